"""Volume connector and volume target queries.  Rows carry their node's uuid, owner and lessee."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from corral.baremetal.db import json_columns, listing
from corral.baremetal.db.nodes import utcnow
from corral.baremetal.db.tables import nodes, volume_connectors, volume_targets

CONNECTOR_JSON = {"extra": {}}
TARGET_JSON = {"extra": {}, "properties": {}}
TABLES = {"connector": volume_connectors, "target": volume_targets}
JSON = {"connector": CONNECTOR_JSON, "target": TARGET_JSON}
SORT_KEYS = {kind: listing.sort_keys(table, JSON[kind]) for kind, table in TABLES.items()}


def _select(table: sa.Table) -> sa.Select:
    # SELECT <table>.*, nodes.uuid AS node_uuid, nodes.owner, nodes.lessee
    #   FROM <table> JOIN nodes ON nodes.id = <table>.node_id
    return sa.select(table, nodes.c.uuid.label("node_uuid"), nodes.c.owner.label("node_owner"),
                     nodes.c.lessee.label("node_lessee")).select_from(table.join(nodes, nodes.c.id == table.c.node_id))


def get(conn: Connection, kind: str, *, row_id: int | None = None, uuid: str | None = None) -> dict[str, Any] | None:
    # <select> WHERE id = :id | uuid = :uuid
    table = TABLES[kind]
    condition = table.c.id == row_id if row_id is not None else table.c.uuid == uuid
    row = conn.execute(_select(table).where(condition)).first()
    return json_columns.decode(row, JSON[kind]) if row is not None else None


def list_rows(conn: Connection, kind: str, filters: Mapping[str, Any], *, sort_key: str = "id",
              sort_dir: str = "asc", limit: int | None = None,
              marker: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    # <select> WHERE <filters> [AND (sort_key, id) after marker] ORDER BY sort_key, id LIMIT :limit
    table = TABLES[kind]
    query = _select(table)
    for key, value in filters.items():
        if key == "project":
            query = query.where(sa.or_(nodes.c.owner == value, nodes.c.lessee == value))
        else:
            query = query.where(table.c[key] == value)
    query = listing.page(query, table, sort_key=sort_key, sort_dir=sort_dir, limit=limit, marker=marker)
    return [json_columns.decode(row, JSON[kind]) for row in conn.execute(query)]


def insert(conn: Connection, kind: str, values: Mapping[str, Any]) -> int:
    # INSERT INTO volume_connectors | volume_targets (...) VALUES (...)
    table = TABLES[kind]
    result = conn.execute(table.insert().values(**json_columns.encode(values, JSON[kind]), created_at=utcnow()))
    return int(result.inserted_primary_key[0])


def update(conn: Connection, kind: str, row_id: int, values: Mapping[str, Any]) -> None:
    # UPDATE volume_connectors | volume_targets SET ..., updated_at = :now WHERE id = :id
    table = TABLES[kind]
    conn.execute(table.update().where(table.c.id == row_id)
                 .values(**json_columns.encode(values, JSON[kind]), updated_at=utcnow()))


def delete(conn: Connection, kind: str, row_id: int) -> None:
    # DELETE FROM volume_connectors | volume_targets WHERE id = :id
    table = TABLES[kind]
    conn.execute(table.delete().where(table.c.id == row_id))


def delete_for_node(conn: Connection, node_id: int) -> None:
    # DELETE FROM volume_connectors WHERE node_id = :id; DELETE FROM volume_targets WHERE node_id = :id
    for table in TABLES.values():
        conn.execute(table.delete().where(table.c.node_id == node_id))
