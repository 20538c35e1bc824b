"""Queries on the Compute API database (SQLAlchemy Core).

Functions take a connection, so callers decide the transaction; each write
path of the API runs in one ``Database.write``.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterable, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from corral.compute.db import api_tables as t


def utcnow() -> datetime.datetime:
    # Naive UTC with microseconds (kept on every backend, see the tables).
    return datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)


# ---------------------------------------------------------------- cells


def create_cell_mapping(
    conn: Connection, *, uuid: str, name: str | None, database_connection: str, transport_url: str,
    disabled: bool = False,
) -> int:
    # INSERT INTO cell_mappings (uuid, name, database_connection, transport_url, disabled, created_at)
    result = conn.execute(
        t.cell_mappings.insert().values(
            uuid=uuid, name=name, database_connection=database_connection, transport_url=transport_url,
            disabled=disabled, created_at=utcnow(),
        )
    )
    return int(result.inserted_primary_key[0])


def get_cell_mapping(conn: Connection, uuid: str) -> Any:
    # SELECT * FROM cell_mappings WHERE uuid = :uuid
    return conn.execute(sa.select(t.cell_mappings).where(t.cell_mappings.c.uuid == uuid)).first()


def update_cell_mapping(conn: Connection, uuid: str, **values: Any) -> int:
    # UPDATE cell_mappings SET ... WHERE uuid = :uuid
    return conn.execute(
        t.cell_mappings.update().where(t.cell_mappings.c.uuid == uuid).values(updated_at=utcnow(), **values)
    ).rowcount


def delete_cell_mapping(conn: Connection, cell_id: int) -> None:
    # DELETE FROM cell_mappings WHERE id = :cell_id
    conn.execute(t.cell_mappings.delete().where(t.cell_mappings.c.id == cell_id))


# ---------------------------------------------------------------- hosts


def host_mappings(conn: Connection, cell_ids: Iterable[int] | None = None) -> list[Any]:
    # SELECT host_mappings.*, cell_mappings.uuid AS cell_uuid FROM host_mappings JOIN cell_mappings
    #   [WHERE cell_id IN (...)] ORDER BY host_mappings.id
    query = sa.select(t.host_mappings, t.cell_mappings.c.uuid.label("cell_uuid")).join(
        t.cell_mappings, t.cell_mappings.c.id == t.host_mappings.c.cell_id
    )
    if cell_ids is not None:
        query = query.where(t.host_mappings.c.cell_id.in_(list(cell_ids)))
    return list(conn.execute(query.order_by(t.host_mappings.c.id)))


def host_mapping(conn: Connection, host: str) -> Any:
    # SELECT * FROM host_mappings WHERE host = :host
    return conn.execute(sa.select(t.host_mappings).where(t.host_mappings.c.host == host)).first()


def create_host_mapping(conn: Connection, cell_id: int, host: str) -> None:
    # INSERT INTO host_mappings (cell_id, host, created_at) VALUES (...)
    conn.execute(t.host_mappings.insert().values(cell_id=cell_id, host=host, created_at=utcnow()))


def delete_host_mappings(conn: Connection, cell_id: int) -> int:
    # DELETE FROM host_mappings WHERE cell_id = :cell_id
    return conn.execute(t.host_mappings.delete().where(t.host_mappings.c.cell_id == cell_id)).rowcount


# ------------------------------------------------------ instance mappings


def create_instance_mapping(
    conn: Connection, *, instance_uuid: str, cell_id: int | None, project_id: str, user_id: str | None,
    queued_for_delete: bool | None = False, created_at: datetime.datetime | None = None,
) -> None:
    # INSERT INTO instance_mappings (instance_uuid, cell_id, project_id, user_id, queued_for_delete, created_at)
    conn.execute(
        t.instance_mappings.insert().values(
            instance_uuid=instance_uuid, cell_id=cell_id, project_id=project_id, user_id=user_id,
            queued_for_delete=queued_for_delete, created_at=created_at or utcnow(),
        )
    )


def instance_mapping(conn: Connection, instance_uuid: str) -> Any:
    # SELECT * FROM instance_mappings WHERE instance_uuid = :instance_uuid
    return conn.execute(
        sa.select(t.instance_mappings).where(t.instance_mappings.c.instance_uuid == instance_uuid)
    ).first()


def update_instance_mapping(conn: Connection, instance_uuid: str, **values: Any) -> int:
    # UPDATE instance_mappings SET ... WHERE instance_uuid = :instance_uuid
    return conn.execute(
        t.instance_mappings.update()
        .where(t.instance_mappings.c.instance_uuid == instance_uuid)
        .values(updated_at=utcnow(), **values)
    ).rowcount


def live_mappings_in_cells(
    conn: Connection, cell_ids: Sequence[int], project_id: str | None, limit: int
) -> list[Any]:
    """Mappings not queued for delete (NULL counts as not deleted), in insertion order."""
    # SELECT * FROM instance_mappings WHERE cell_id IN (...) [AND project_id = :p]
    #   AND (queued_for_delete = false OR queued_for_delete IS NULL) ORDER BY id LIMIT :limit
    m = t.instance_mappings
    query = sa.select(m).where(
        m.c.cell_id.in_(list(cell_ids)), sa.or_(m.c.queued_for_delete.is_(False), m.c.queued_for_delete.is_(None))
    )
    if project_id is not None:
        query = query.where(m.c.project_id == project_id)
    return list(conn.execute(query.order_by(m.c.id).limit(limit)))


def project_has_live_mappings_in(conn: Connection, project_id: str, cell_ids: Sequence[int]) -> bool:
    # SELECT 1 FROM instance_mappings WHERE project_id = :p AND cell_id IN (...)
    #   AND (queued_for_delete = false OR queued_for_delete IS NULL) LIMIT 1
    m = t.instance_mappings
    query = (
        sa.select(sa.literal(1))
        .where(
            m.c.project_id == project_id,
            m.c.cell_id.in_(list(cell_ids)),
            sa.or_(m.c.queued_for_delete.is_(False), m.c.queued_for_delete.is_(None)),
        )
        .limit(1)
    )
    return conn.execute(query).first() is not None


def unmigrated_mappings(conn: Connection, cell_id: int, limit: int) -> list[Any]:
    # SELECT * FROM instance_mappings WHERE cell_id = :cell_id AND queued_for_delete IS NULL
    #   ORDER BY id LIMIT :limit
    m = t.instance_mappings
    query = sa.select(m).where(m.c.cell_id == cell_id, m.c.queued_for_delete.is_(None))
    return list(conn.execute(query.order_by(m.c.id).limit(limit)))


def count_unmigrated_mappings(conn: Connection) -> int:
    # SELECT count(*) FROM instance_mappings WHERE queued_for_delete IS NULL AND cell_id IS NOT NULL
    m = t.instance_mappings
    query = sa.select(sa.func.count()).where(m.c.queued_for_delete.is_(None), m.c.cell_id.is_not(None))
    return int(conn.execute(query).scalar_one())


def set_queued_for_delete(conn: Connection, uuids: Sequence[str], value: bool) -> None:
    # UPDATE instance_mappings SET queued_for_delete = :value WHERE instance_uuid IN (...)
    if uuids:
        m = t.instance_mappings
        conn.execute(m.update().where(m.c.instance_uuid.in_(list(uuids))).values(queued_for_delete=value))


def count_mappings_in_cell(conn: Connection, cell_id: int) -> int:
    # SELECT count(*) FROM instance_mappings WHERE cell_id = :cell_id
    m = t.instance_mappings
    return int(conn.execute(sa.select(sa.func.count()).where(m.c.cell_id == cell_id)).scalar_one())


# -------------------------------------------------------- request specs


def create_request_spec(conn: Connection, instance_uuid: str, spec: dict[str, Any]) -> None:
    # INSERT INTO request_specs (instance_uuid, spec, created_at) VALUES (...)
    conn.execute(
        t.request_specs.insert().values(instance_uuid=instance_uuid, spec=json.dumps(spec), created_at=utcnow())
    )


def request_spec(conn: Connection, instance_uuid: str) -> dict[str, Any] | None:
    # SELECT spec FROM request_specs WHERE instance_uuid = :instance_uuid
    row = conn.execute(
        sa.select(t.request_specs.c.spec).where(t.request_specs.c.instance_uuid == instance_uuid)
    ).first()
    return None if row is None else json.loads(row.spec)


def delete_request_spec(conn: Connection, instance_uuid: str) -> None:
    # DELETE FROM request_specs WHERE instance_uuid = :instance_uuid
    conn.execute(t.request_specs.delete().where(t.request_specs.c.instance_uuid == instance_uuid))


# ------------------------------------------------------- build requests


def create_build_request(conn: Connection, instance_uuid: str, project_id: str, instance: dict[str, Any]) -> None:
    # INSERT INTO build_requests (instance_uuid, project_id, instance, created_at) VALUES (...)
    conn.execute(
        t.build_requests.insert().values(
            instance_uuid=instance_uuid, project_id=project_id, instance=json.dumps(instance, default=str),
            created_at=utcnow(),
        )
    )


def build_requests(conn: Connection, project_id: str | None) -> list[dict[str, Any]]:
    # SELECT instance FROM build_requests [WHERE project_id = :p] ORDER BY id
    query = sa.select(t.build_requests.c.instance)
    if project_id is not None:
        query = query.where(t.build_requests.c.project_id == project_id)
    return [json.loads(row.instance) for row in conn.execute(query.order_by(t.build_requests.c.id))]


def build_request(conn: Connection, instance_uuid: str) -> dict[str, Any] | None:
    # SELECT instance FROM build_requests WHERE instance_uuid = :instance_uuid
    row = conn.execute(
        sa.select(t.build_requests.c.instance).where(t.build_requests.c.instance_uuid == instance_uuid)
    ).first()
    return None if row is None else json.loads(row.instance)


def delete_build_request(conn: Connection, instance_uuid: str) -> int:
    # DELETE FROM build_requests WHERE instance_uuid = :instance_uuid
    return conn.execute(
        t.build_requests.delete().where(t.build_requests.c.instance_uuid == instance_uuid)
    ).rowcount


# ---------------------------------------------------------------- quotas


def project_quotas(conn: Connection, project_id: str) -> dict[str, int]:
    # SELECT resource, hard_limit FROM quotas WHERE project_id = :project_id
    rows = conn.execute(
        sa.select(t.quotas.c.resource, t.quotas.c.hard_limit).where(t.quotas.c.project_id == project_id)
    )
    return {row.resource: row.hard_limit for row in rows if row.hard_limit is not None}


def set_project_quota(conn: Connection, project_id: str, resource: str, limit: int) -> None:
    # UPDATE quotas SET hard_limit = :limit WHERE project_id = :p AND resource = :r
    # (INSERT when no row was updated)
    q = t.quotas
    updated = conn.execute(
        q.update()
        .where(q.c.project_id == project_id, q.c.resource == resource)
        .values(hard_limit=limit, updated_at=utcnow())
    ).rowcount
    if not updated:
        conn.execute(q.insert().values(project_id=project_id, resource=resource, hard_limit=limit, created_at=utcnow()))


def delete_project_quotas(conn: Connection, project_id: str) -> None:
    # DELETE FROM quotas WHERE project_id = :project_id
    conn.execute(t.quotas.delete().where(t.quotas.c.project_id == project_id))
