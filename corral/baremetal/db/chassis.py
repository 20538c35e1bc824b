"""Chassis queries.  Rows are plain dicts, ``extra`` decoded."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from corral.baremetal.db import json_columns, listing
from corral.baremetal.db.nodes import utcnow
from corral.baremetal.db.tables import chassis, nodes

JSON = {"extra": {}}
SORT_KEYS = listing.sort_keys(chassis, JSON)


def get(conn: Connection, *, chassis_id: int | None = None, uuid: str | None = None) -> dict[str, Any] | None:
    # SELECT * FROM chassis WHERE id = :id | uuid = :uuid
    query = sa.select(chassis)
    query = query.where(chassis.c.id == chassis_id) if chassis_id is not None else query.where(chassis.c.uuid == uuid)
    row = conn.execute(query).first()
    return json_columns.decode(row, JSON) if row is not None else None


def list_chassis(conn: Connection, *, sort_key: str = "id", sort_dir: str = "asc", limit: int | None = None,
                 marker: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    # SELECT * FROM chassis [WHERE (sort_key, id) after marker] ORDER BY sort_key, id LIMIT :limit
    query = listing.page(sa.select(chassis), chassis, sort_key=sort_key, sort_dir=sort_dir, limit=limit,
                         marker=marker)
    return [json_columns.decode(row, JSON) for row in conn.execute(query)]


def insert(conn: Connection, values: Mapping[str, Any]) -> int:
    # INSERT INTO chassis (uuid, description, extra, created_at) VALUES (...)
    result = conn.execute(chassis.insert().values(**json_columns.encode(values, JSON), created_at=utcnow()))
    return int(result.inserted_primary_key[0])


def update(conn: Connection, chassis_id: int, values: Mapping[str, Any]) -> None:
    # UPDATE chassis SET ..., updated_at = :now WHERE id = :id
    conn.execute(chassis.update().where(chassis.c.id == chassis_id)
                 .values(**json_columns.encode(values, JSON), updated_at=utcnow()))


def delete_if_empty(conn: Connection, chassis_id: int) -> bool:
    """Delete the chassis unless a node is in it; False when one is."""
    # SELECT 1 FROM nodes WHERE chassis_id = :id LIMIT 1; DELETE FROM chassis WHERE id = :id
    # (the foreign key from nodes refuses the delete if a node joins meanwhile)
    used = conn.execute(sa.select(nodes.c.id).where(nodes.c.chassis_id == chassis_id).limit(1)).first()
    if used is not None:
        return False
    conn.execute(chassis.delete().where(chassis.c.id == chassis_id))
    return True


def uuids_by_id(conn: Connection, chassis_ids: Sequence[int | None]) -> dict[int, str]:
    # SELECT id, uuid FROM chassis WHERE id IN (:ids)
    wanted = {chassis_id for chassis_id in chassis_ids if chassis_id is not None}
    if not wanted:
        return {}
    query = sa.select(chassis.c.id, chassis.c.uuid).where(chassis.c.id.in_(sorted(wanted)))
    return {row.id: row.uuid for row in conn.execute(query)}
