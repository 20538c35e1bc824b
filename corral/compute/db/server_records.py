"""Queries on one cell database for what hangs off a server.

Tags, metadata changes, faults, instance actions and their events, and
the tasks the API leaves for the compute service of the server's host.
Every function runs inside the caller's transaction.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from corral.compute.db import cell_tables as t
from corral.compute.db.api_queries import utcnow

# ------------------------------------------------------------------ tags


def tags_of(conn: Connection, uuids: Sequence[str]) -> dict[str, list[str]]:
    # SELECT resource_id, tag FROM tags WHERE resource_id IN (...) ORDER BY tag
    found: dict[str, list[str]] = {u: [] for u in uuids}
    if uuids:
        query = sa.select(t.tags).where(t.tags.c.resource_id.in_(list(uuids))).order_by(t.tags.c.tag)
        for row in conn.execute(query):
            found[row.resource_id].append(row.tag)
    return found


def add_tags(conn: Connection, instance_uuid: str, tags: Sequence[str]) -> None:
    # INSERT INTO tags (resource_id, tag) VALUES (:uuid, :tag) per tag
    for tag in dict.fromkeys(tags):
        conn.execute(t.tags.insert().values(resource_id=instance_uuid, tag=tag))


def replace_tags(conn: Connection, instance_uuid: str, tags: Sequence[str]) -> None:
    # DELETE FROM tags WHERE resource_id = :uuid; INSERT INTO tags ... per tag
    conn.execute(t.tags.delete().where(t.tags.c.resource_id == instance_uuid))
    add_tags(conn, instance_uuid, tags)


def delete_tag(conn: Connection, instance_uuid: str, tag: str | None = None) -> int:
    # DELETE FROM tags WHERE resource_id = :uuid [AND tag = :tag]
    query = t.tags.delete().where(t.tags.c.resource_id == instance_uuid)
    if tag is not None:
        query = query.where(t.tags.c.tag == tag)
    return int(conn.execute(query).rowcount)


def tag_conditions(tags: list[str] | None, tags_any: list[str] | None, not_tags: list[str] | None,
                   not_tags_any: list[str] | None) -> list[Any]:
    """WHERE clauses on instances for upstream's four tag filters."""
    uuid = t.instances.c.uuid

    def having(tag: str) -> Any:
        # EXISTS (SELECT 1 FROM tags WHERE resource_id = instances.uuid AND tag = :tag)
        return sa.exists().where(t.tags.c.resource_id == uuid, t.tags.c.tag == tag)

    def having_any(names: list[str]) -> Any:
        # EXISTS (SELECT 1 FROM tags WHERE resource_id = instances.uuid AND tag IN (...))
        return sa.exists().where(t.tags.c.resource_id == uuid, t.tags.c.tag.in_(names))

    clauses: list[Any] = []
    if tags:
        clauses.extend(having(tag) for tag in tags)
    if tags_any:
        clauses.append(having_any(tags_any))
    if not_tags:
        clauses.append(sa.not_(sa.and_(*(having(tag) for tag in not_tags))))
    if not_tags_any:
        clauses.append(sa.not_(having_any(not_tags_any)))
    return clauses


# -------------------------------------------------------------- metadata


def set_metadata(conn: Connection, instance_uuid: str, metadata: dict[str, str], *, replace: bool) -> None:
    """Set these items (``replace``: and drop every other one)."""
    # [DELETE FROM instance_metadata WHERE instance_uuid = :uuid AND key NOT IN (...)]
    # UPDATE instance_metadata SET value = :v WHERE instance_uuid = :uuid AND key = :k
    # (INSERT INTO instance_metadata ... when no row was updated), per item
    m = t.instance_metadata
    now = utcnow()
    if replace:
        conn.execute(m.delete().where(m.c.instance_uuid == instance_uuid, m.c.key.not_in(list(metadata))))
    for key, value in metadata.items():
        updated = conn.execute(
            m.update().where(m.c.instance_uuid == instance_uuid, m.c.key == key).values(value=value, updated_at=now)
        ).rowcount
        if not updated:
            conn.execute(m.insert().values(instance_uuid=instance_uuid, key=key, value=value, created_at=now))


def delete_metadata_key(conn: Connection, instance_uuid: str, key: str) -> int:
    # DELETE FROM instance_metadata WHERE instance_uuid = :uuid AND key = :key
    m = t.instance_metadata
    return int(conn.execute(m.delete().where(m.c.instance_uuid == instance_uuid, m.c.key == key)).rowcount)


# ---------------------------------------------------------------- faults


def add_fault(conn: Connection, instance_uuid: str, code: int, message: str, details: str | None,
              host: str | None) -> None:
    # INSERT INTO instance_faults (instance_uuid, code, message, details, host, created_at) VALUES (...)
    now = utcnow()
    conn.execute(t.instance_faults.insert().values(
        instance_uuid=instance_uuid, code=code, message=message[:255], details=details, host=host,
        created_at=now, updated_at=now,
    ))


def latest_faults(conn: Connection, uuids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Each server's newest fault."""
    # SELECT * FROM instance_faults WHERE instance_uuid IN (...) ORDER BY created_at, id
    found: dict[str, dict[str, Any]] = {}
    if uuids:
        f = t.instance_faults
        query = sa.select(f).where(f.c.instance_uuid.in_(list(uuids))).order_by(f.c.created_at, f.c.id)
        for row in conn.execute(query):
            found[row.instance_uuid] = dict(row._mapping)
    return found


# ------------------------------------------------------- instance actions


def start_action(conn: Connection, instance_uuid: str, action: str, request_id: str, user_id: str | None,
                 project_id: str | None) -> int:
    # INSERT INTO instance_actions (action, instance_uuid, request_id, user_id, project_id, start_time, ...)
    now = utcnow()
    result = conn.execute(t.instance_actions.insert().values(
        action=action, instance_uuid=instance_uuid, request_id=request_id, user_id=user_id,
        project_id=project_id, start_time=now, created_at=now, updated_at=now,
    ))
    return int(result.inserted_primary_key[0])


def get_action(conn: Connection, instance_uuid: str, request_id: str) -> dict[str, Any] | None:
    # SELECT * FROM instance_actions WHERE instance_uuid = :uuid AND request_id = :rid ORDER BY id DESC LIMIT 1
    a = t.instance_actions
    row = conn.execute(
        sa.select(a).where(a.c.instance_uuid == instance_uuid, a.c.request_id == request_id)
        .order_by(a.c.id.desc()).limit(1)
    ).first()
    return None if row is None else dict(row._mapping)


def latest_action(conn: Connection, instance_uuid: str, action: str) -> dict[str, Any] | None:
    # SELECT * FROM instance_actions WHERE instance_uuid = :uuid AND action = :action ORDER BY id DESC LIMIT 1
    a = t.instance_actions
    row = conn.execute(
        sa.select(a).where(a.c.instance_uuid == instance_uuid, a.c.action == action).order_by(a.c.id.desc()).limit(1)
    ).first()
    return None if row is None else dict(row._mapping)


def list_actions(conn: Connection, instance_uuid: str, *, limit: int | None = None,
                 after: dict[str, Any] | None = None, changes_since: datetime.datetime | None = None,
                 changes_before: datetime.datetime | None = None) -> list[dict[str, Any]]:
    """Newest first (created_at, then id); ``after`` is the marker action."""
    # SELECT * FROM instance_actions WHERE instance_uuid = :uuid [AND updated_at >= :since]
    #   [AND updated_at <= :before] [AND (created_at, id) < (:marker_created_at, :marker_id)]
    #   ORDER BY created_at DESC, id DESC [LIMIT :limit]
    a = t.instance_actions
    query = sa.select(a).where(a.c.instance_uuid == instance_uuid)
    if changes_since is not None:
        query = query.where(a.c.updated_at >= changes_since)
    if changes_before is not None:
        query = query.where(a.c.updated_at <= changes_before)
    if after is not None:
        query = query.where(sa.or_(
            a.c.created_at < after["created_at"],
            sa.and_(a.c.created_at == after["created_at"], a.c.id < after["id"]),
        ))
    query = query.order_by(a.c.created_at.desc(), a.c.id.desc())
    if limit is not None:
        query = query.limit(limit)
    return [dict(row._mapping) for row in conn.execute(query)]


def action_events(conn: Connection, action_id: int) -> list[dict[str, Any]]:
    # SELECT * FROM instance_actions_events WHERE action_id = :id ORDER BY created_at DESC, id DESC
    e = t.instance_actions_events
    query = sa.select(e).where(e.c.action_id == action_id).order_by(e.c.created_at.desc(), e.c.id.desc())
    return [dict(row._mapping) for row in conn.execute(query)]


def start_event(conn: Connection, action_id: int, event: str, host: str | None) -> int:
    # INSERT INTO instance_actions_events (action_id, event, start_time, host, ...) VALUES (...);
    # UPDATE instance_actions SET updated_at = now WHERE id = :action_id
    now = utcnow()
    result = conn.execute(t.instance_actions_events.insert().values(
        action_id=action_id, event=event, start_time=now, host=host, created_at=now, updated_at=now,
    ))
    conn.execute(t.instance_actions.update().where(t.instance_actions.c.id == action_id).values(updated_at=now))
    return int(result.inserted_primary_key[0])


def finish_event(conn: Connection, action_id: int, event_id: int, result: str, traceback: str | None) -> None:
    """An event's end; an error also marks its action ('Error', as upstream)."""
    # UPDATE instance_actions_events SET finish_time = now, result = :r, traceback = :tb WHERE id = :id;
    # UPDATE instance_actions SET updated_at = now [, message = 'Error'] WHERE id = :action_id
    now = utcnow()
    e = t.instance_actions_events
    conn.execute(e.update().where(e.c.id == event_id).values(
        finish_time=now, result=result, traceback=traceback, updated_at=now
    ))
    values: dict[str, Any] = {"updated_at": now}
    if result == "Error":
        values["message"] = "Error"
    conn.execute(t.instance_actions.update().where(t.instance_actions.c.id == action_id).values(**values))


def record_event(conn: Connection, action_id: int, event: str, host: str | None, result: str = "Success",
                 traceback: str | None = None) -> None:
    """An event that started and finished at once."""
    finish_event(conn, action_id, start_event(conn, action_id, event, host), result, traceback)


# ------------------------------------------------------------------ tasks


def add_task(conn: Connection, instance_uuid: str, task: str, request_id: str, params: dict[str, Any]) -> None:
    # DELETE FROM instance_tasks WHERE instance_uuid = :uuid;
    # INSERT INTO instance_tasks (instance_uuid, task, request_id, params, ...) VALUES (...)
    now = utcnow()
    conn.execute(t.instance_tasks.delete().where(t.instance_tasks.c.instance_uuid == instance_uuid))
    conn.execute(t.instance_tasks.insert().values(
        instance_uuid=instance_uuid, task=task, request_id=request_id, params=json.dumps(params),
        created_at=now, updated_at=now,
    ))


def host_tasks(conn: Connection, host: str) -> list[dict[str, Any]]:
    """The tasks of the servers on ``host``, oldest first, each with its server's row."""
    # SELECT instance_tasks.*, instances.* FROM instance_tasks JOIN instances ON instances.uuid =
    #   instance_tasks.instance_uuid WHERE instances.host = :host ORDER BY instance_tasks.created_at
    k = t.instance_tasks
    query = (
        sa.select(k.c.instance_uuid, k.c.task, k.c.request_id, k.c.params)
        .join(t.instances, t.instances.c.uuid == k.c.instance_uuid)
        .where(t.instances.c.host == host)
        .order_by(k.c.created_at, k.c.instance_uuid)
    )
    return [{**row._mapping, "params": json.loads(row.params)} for row in conn.execute(query)]


def take_task(conn: Connection, instance_uuid: str, request_id: str) -> int:
    # DELETE FROM instance_tasks WHERE instance_uuid = :uuid AND request_id = :rid
    k = t.instance_tasks
    return int(conn.execute(
        k.delete().where(k.c.instance_uuid == instance_uuid, k.c.request_id == request_id)
    ).rowcount)


def deleted_among(conn: Connection, uuids: Sequence[str]) -> list[dict[str, Any]]:
    """The rows of those servers that are deleted (not soft-deleted)."""
    # SELECT * FROM instances WHERE uuid IN (...) AND deleted = true
    if not uuids:
        return []
    query = sa.select(t.instances).where(t.instances.c.uuid.in_(list(uuids)), t.instances.c.deleted.is_(True))
    return [dict(row._mapping) for row in conn.execute(query)]
