"""Host aggregate queries on the API database."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from corral.compute.db import api_tables as t
from corral.compute.db.api_queries import utcnow


def all_aggregates(conn: Connection) -> list[dict[str, Any]]:
    """Every aggregate with its hosts and metadata, by id."""
    # SELECT * FROM aggregates ORDER BY id; SELECT * FROM aggregate_hosts; SELECT * FROM aggregate_metadata
    aggregates = {
        row.id: {**dict(row._mapping), "hosts": [], "metadata": {}}
        for row in conn.execute(sa.select(t.aggregates).order_by(t.aggregates.c.id))
    }
    for row in conn.execute(sa.select(t.aggregate_hosts).order_by(t.aggregate_hosts.c.id)):
        aggregates[row.aggregate_id]["hosts"].append(row.host)
    for row in conn.execute(sa.select(t.aggregate_metadata).order_by(t.aggregate_metadata.c.key)):
        aggregates[row.aggregate_id]["metadata"][row.key] = row.value
    return list(aggregates.values())


def get_aggregate(conn: Connection, aggregate_id: int) -> dict[str, Any] | None:
    for aggregate in all_aggregates(conn):
        if aggregate["id"] == aggregate_id:
            return aggregate
    return None


def create_aggregate(conn: Connection, uuid: str, name: str) -> int:
    # INSERT INTO aggregates (uuid, name, created_at) VALUES (...)
    result = conn.execute(t.aggregates.insert().values(uuid=uuid, name=name, created_at=utcnow()))
    return int(result.inserted_primary_key[0])


def name_taken(conn: Connection, name: str, other_than: int | None = None) -> bool:
    # SELECT 1 FROM aggregates WHERE name = :name [AND id != :other_than]
    query = sa.select(sa.literal(1)).where(t.aggregates.c.name == name)
    if other_than is not None:
        query = query.where(t.aggregates.c.id != other_than)
    return conn.execute(query).first() is not None


def rename_aggregate(conn: Connection, aggregate_id: int, name: str) -> None:
    # UPDATE aggregates SET name = :name WHERE id = :id
    conn.execute(t.aggregates.update().where(t.aggregates.c.id == aggregate_id).values(name=name, updated_at=utcnow()))


def delete_aggregate(conn: Connection, aggregate_id: int) -> None:
    # DELETE FROM aggregate_metadata / aggregate_hosts / aggregates WHERE (aggregate_)id = :id
    conn.execute(t.aggregate_metadata.delete().where(t.aggregate_metadata.c.aggregate_id == aggregate_id))
    conn.execute(t.aggregate_hosts.delete().where(t.aggregate_hosts.c.aggregate_id == aggregate_id))
    conn.execute(t.aggregates.delete().where(t.aggregates.c.id == aggregate_id))


def add_host(conn: Connection, aggregate_id: int, host: str) -> None:
    # INSERT INTO aggregate_hosts (aggregate_id, host, created_at) VALUES (...)
    conn.execute(t.aggregate_hosts.insert().values(aggregate_id=aggregate_id, host=host, created_at=utcnow()))


def remove_host(conn: Connection, aggregate_id: int, host: str) -> int:
    # DELETE FROM aggregate_hosts WHERE aggregate_id = :id AND host = :host
    h = t.aggregate_hosts
    return conn.execute(h.delete().where(h.c.aggregate_id == aggregate_id, h.c.host == host)).rowcount


def set_metadata(conn: Connection, aggregate_id: int, values: dict[str, str | None]) -> None:
    """Set keys to values; a None value removes the key."""
    # DELETE FROM aggregate_metadata WHERE aggregate_id = :id AND key = :key; INSERT ... per key
    m = t.aggregate_metadata
    now = utcnow()
    for key, value in values.items():
        conn.execute(m.delete().where(m.c.aggregate_id == aggregate_id, m.c.key == key))
        if value is not None:
            conn.execute(m.insert().values(aggregate_id=aggregate_id, key=key, value=value, created_at=now))
    conn.execute(t.aggregates.update().where(t.aggregates.c.id == aggregate_id).values(updated_at=now))
