"""Server group (instance group) queries on the API database."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from corral.compute.db import api_tables as t
from corral.compute.db.api_queries import utcnow

_LIVE = sa.or_(t.instance_mappings.c.queued_for_delete.is_(False), t.instance_mappings.c.queued_for_delete.is_(None))


def _group(row: Any) -> dict[str, Any]:
    group = dict(row._mapping)
    group["rules"] = None if group["rules"] is None else json.loads(group["rules"])
    return group


def _with_members(conn: Connection, groups: list[dict[str, Any]]) -> list[dict[str, Any]]:
    # SELECT group_id, instance_uuid FROM instance_group_member WHERE group_id IN (...) ORDER BY id
    by_id = {group["id"]: group for group in groups}
    for group in groups:
        group["members"] = []
    if by_id:
        m = t.instance_group_member
        rows = conn.execute(
            sa.select(m.c.group_id, m.c.instance_uuid).where(m.c.group_id.in_(list(by_id))).order_by(m.c.id)
        )
        for row in rows:
            by_id[row.group_id]["members"].append(row.instance_uuid)
    return groups


def get_group(conn: Connection, uuid: str, project_id: str | None = None, *,
              lock: bool = False) -> dict[str, Any] | None:
    """The group with its member uuids; ``project_id`` restricts to one project; ``lock`` takes its row lock."""
    # SELECT * FROM instance_groups WHERE uuid = :uuid [AND project_id = :project_id] [FOR UPDATE]
    g = t.instance_groups
    query = sa.select(g).where(g.c.uuid == uuid)
    if project_id is not None:
        query = query.where(g.c.project_id == project_id)
    if lock:
        query = query.with_for_update()
    row = conn.execute(query).first()
    return None if row is None else _with_members(conn, [_group(row)])[0]


def list_groups(conn: Connection, project_id: str | None) -> list[dict[str, Any]]:
    """Every group (``project_id`` None) or one project's, by id, with member uuids."""
    # SELECT * FROM instance_groups [WHERE project_id = :project_id] ORDER BY id
    g = t.instance_groups
    query = sa.select(g)
    if project_id is not None:
        query = query.where(g.c.project_id == project_id)
    return _with_members(conn, [_group(row) for row in conn.execute(query.order_by(g.c.id))])


def count_groups(conn: Connection, project_id: str) -> int:
    # SELECT count(*) FROM instance_groups WHERE project_id = :project_id
    g = t.instance_groups
    return int(conn.execute(sa.select(sa.func.count()).where(g.c.project_id == project_id)).scalar_one())


def create_group(conn: Connection, *, uuid: str, name: str | None, project_id: str, user_id: str | None,
                 policy: str, rules: dict[str, str] | None) -> None:
    # INSERT INTO instance_groups (uuid, name, project_id, user_id, policy, rules, created_at) VALUES (...)
    conn.execute(t.instance_groups.insert().values(
        uuid=uuid, name=name, project_id=project_id, user_id=user_id, policy=policy,
        rules=None if rules is None else json.dumps(rules), created_at=utcnow(),
    ))


def delete_group(conn: Connection, group_id: int) -> int:
    # DELETE FROM instance_group_member WHERE group_id = :id; DELETE FROM instance_groups WHERE id = :id
    conn.execute(t.instance_group_member.delete().where(t.instance_group_member.c.group_id == group_id))
    return conn.execute(t.instance_groups.delete().where(t.instance_groups.c.id == group_id)).rowcount


def add_members(conn: Connection, group_id: int, instance_uuids: Sequence[str]) -> None:
    # INSERT INTO instance_group_member (group_id, instance_uuid, created_at) VALUES (...) per instance
    now = utcnow()
    for instance_uuid in instance_uuids:
        conn.execute(t.instance_group_member.insert().values(
            group_id=group_id, instance_uuid=instance_uuid, created_at=now
        ))


def count_live_members(conn: Connection, group_id: int, user_id: str) -> int:
    """Members of the group booted by ``user_id`` that are not queued for delete (upstream's quota count)."""
    # SELECT count(*) FROM instance_group_member JOIN instance_mappings ON instance_uuid
    #   WHERE group_id = :group_id AND instance_mappings.user_id = :user_id
    #   AND (queued_for_delete = false OR queued_for_delete IS NULL)
    m, im = t.instance_group_member, t.instance_mappings
    query = (
        sa.select(sa.func.count())
        .select_from(m.join(im, im.c.instance_uuid == m.c.instance_uuid))
        .where(m.c.group_id == group_id, im.c.user_id == user_id, _LIVE)
    )
    return int(conn.execute(query).scalar_one())


def member_hosts(conn: Connection, group_id: int, excluding: str | None = None) -> list[str]:
    """The host of each placed member (one entry per member), except ``excluding``."""
    # SELECT host FROM instance_group_member WHERE group_id = :group_id AND host IS NOT NULL
    #   [AND instance_uuid != :excluding] ORDER BY id
    m = t.instance_group_member
    query = sa.select(m.c.host).where(m.c.group_id == group_id, m.c.host.is_not(None))
    if excluding is not None:
        query = query.where(m.c.instance_uuid != excluding)
    return [row.host for row in conn.execute(query.order_by(m.c.id))]


def set_member_host(conn: Connection, instance_uuid: str, host: str | None, group_id: int | None = None) -> int:
    # UPDATE instance_group_member SET host = :host WHERE instance_uuid = :instance_uuid [AND group_id = :group_id]
    m = t.instance_group_member
    query = m.update().where(m.c.instance_uuid == instance_uuid)
    if group_id is not None:
        query = query.where(m.c.group_id == group_id)
    return conn.execute(query.values(host=host, updated_at=utcnow())).rowcount


def groups_of_instance(conn: Connection, instance_uuid: str) -> list[str]:
    """Uuids of the groups the instance is a member of."""
    # SELECT instance_groups.uuid FROM instance_group_member JOIN instance_groups ON group_id = instance_groups.id
    #   WHERE instance_uuid = :instance_uuid ORDER BY instance_groups.id
    m, g = t.instance_group_member, t.instance_groups
    query = (
        sa.select(g.c.uuid).select_from(m.join(g, g.c.id == m.c.group_id))
        .where(m.c.instance_uuid == instance_uuid).order_by(g.c.id)
    )
    return [row.uuid for row in conn.execute(query)]


def member_mappings(conn: Connection, instance_uuids: Sequence[str]) -> list[Any]:
    """Instance mappings of the given members (cell_id NULL: not in a cell yet)."""
    # SELECT instance_uuid, cell_id, queued_for_delete FROM instance_mappings WHERE instance_uuid IN (...)
    im = t.instance_mappings
    if not instance_uuids:
        return []
    query = sa.select(im.c.instance_uuid, im.c.cell_id, im.c.queued_for_delete).where(
        im.c.instance_uuid.in_(list(instance_uuids))
    )
    return list(conn.execute(query))
