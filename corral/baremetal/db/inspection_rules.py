"""Inspection rules (1.96): stored conditions and actions for inspection.

Rules are plain dicts keyed by column name with ``conditions`` and
``actions`` decoded. Every function takes an open connection.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from corral.baremetal.db import json_columns
from corral.baremetal.db.nodes import utcnow
from corral.baremetal.db.tables import inspection_rules

_JSON: dict[str, Any] = {"conditions": [], "actions": []}

SORT_KEYS = frozenset({"id", "uuid", "description", "priority", "phase", "sensitive", "created_at", "updated_at"})


def get(conn: Connection, *, uuid: str | None = None, rule_id: int | None = None) -> dict[str, Any] | None:
    # SELECT * FROM inspection_rules WHERE uuid = :uuid | id = :id
    column = inspection_rules.c.uuid if uuid is not None else inspection_rules.c.id
    row = conn.execute(sa.select(inspection_rules).where(column == (uuid if uuid is not None else rule_id))).first()
    return None if row is None else json_columns.decode(row, _JSON)


def list_rules(conn: Connection, *, phase: str | None = None, sort_key: str = "id", sort_dir: str = "asc",
               limit: int | None = None, marker: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    # SELECT * FROM inspection_rules [WHERE phase = :phase] [AND after marker] ORDER BY <sort_key>, id LIMIT :limit
    table = inspection_rules
    query = sa.select(table)
    if phase is not None:
        query = query.where(table.c.phase == phase)
    column = table.c[sort_key]
    ascending = sort_dir == "asc"
    if marker is not None:
        value = marker[sort_key]
        id_after = table.c.id > marker["id"] if ascending else table.c.id < marker["id"]
        beyond = column > value if ascending else column < value
        query = query.where(id_after if sort_key == "id" else sa.or_(beyond, sa.and_(column == value, id_after)))
    order = [column.asc() if ascending else column.desc()]
    if sort_key != "id":
        order.append(table.c.id.asc() if ascending else table.c.id.desc())
    query = query.order_by(*order)
    if limit is not None:
        query = query.limit(limit)
    return [json_columns.decode(row, _JSON) for row in conn.execute(query)]


def insert(conn: Connection, values: Mapping[str, Any]) -> int:
    # INSERT INTO inspection_rules (...) VALUES (...)
    result = conn.execute(inspection_rules.insert().values(created_at=utcnow(),
                                                           **json_columns.encode(values, _JSON)))
    return int(result.inserted_primary_key[0])


def update(conn: Connection, rule_id: int, values: Mapping[str, Any]) -> None:
    # UPDATE inspection_rules SET ..., updated_at = :now WHERE id = :id
    conn.execute(inspection_rules.update().where(inspection_rules.c.id == rule_id)
                 .values(updated_at=utcnow(), **json_columns.encode(values, _JSON)))


def delete(conn: Connection, rule_id: int) -> None:
    # DELETE FROM inspection_rules WHERE id = :id
    conn.execute(inspection_rules.delete().where(inspection_rules.c.id == rule_id))
