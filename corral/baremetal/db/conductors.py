"""Conductor registration and heartbeats."""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from typing import Any

import orjson
import sqlalchemy as sa
from sqlalchemy.dialects import mysql, postgresql, sqlite
from sqlalchemy.engine import Connection

from corral.baremetal.db.nodes import utcnow
from corral.baremetal.db.tables import conductor_hardware_interfaces, conductors


def register(
    conn: Connection,
    hostname: str,
    *,
    drivers: Iterable[str],
    group: str,
    rpc_address: str | None,
    interfaces: Iterable[tuple[str, str, str, bool]],
) -> int:
    """Insert or take over the row for ``hostname``; record its hardware interfaces."""
    now = utcnow()
    values = {
        "drivers": orjson.dumps(sorted(drivers)).decode(),
        "online": True,
        "conductor_group": group,
        "rpc_address": rpc_address,
        "updated_at": now,
    }
    conductor_id = _upsert(conn, hostname, now, values)
    # DELETE FROM conductor_hardware_interfaces WHERE conductor_id = :id; INSERT ...
    conn.execute(
        conductor_hardware_interfaces.delete().where(conductor_hardware_interfaces.c.conductor_id == conductor_id)
    )
    rows = [
        {
            "conductor_id": conductor_id,
            "hardware_type": hardware_type,
            "interface_type": interface_type,
            "interface_name": name,
            "default": default,
            "created_at": now,
        }
        for hardware_type, interface_type, name, default in interfaces
    ]
    if rows:
        conn.execute(conductor_hardware_interfaces.insert(), rows)
    return conductor_id


def _upsert(conn: Connection, hostname: str, now: datetime.datetime, values: dict[str, Any]) -> int:
    """Insert the row for ``hostname`` or update it, in one statement: two conductors
    starting with one host name cannot both insert (the loser would fail on the
    unique host name).  The statement also locks the row until commit, so their
    hardware interface rows are replaced one after the other."""
    dialect = conn.dialect.name
    if dialect in ("postgresql", "sqlite"):
        # INSERT INTO conductors (hostname, created_at, ...) VALUES (...)
        # ON CONFLICT (hostname) DO UPDATE SET drivers = ..., online = ..., ... RETURNING id
        insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
        statement = (
            insert(conductors).values(hostname=hostname, created_at=now, **values)
            .on_conflict_do_update(index_elements=[conductors.c.hostname], set_=values)
            .returning(conductors.c.id)
        )
        return int(conn.execute(statement).scalar_one())
    # INSERT INTO conductors (hostname, created_at, ...) VALUES (...)
    # ON DUPLICATE KEY UPDATE drivers = ..., online = ..., ...
    conn.execute(
        mysql.insert(conductors).values(hostname=hostname, created_at=now, **values).on_duplicate_key_update(**values)
    )
    # SELECT id FROM conductors WHERE hostname = :hostname
    return int(conn.execute(sa.select(conductors.c.id).where(conductors.c.hostname == hostname)).scalar_one())


def heartbeat(conn: Connection, hostname: str) -> bool:
    # UPDATE conductors SET updated_at = :now, online = true WHERE hostname = :hostname
    result = conn.execute(
        conductors.update().where(conductors.c.hostname == hostname).values(updated_at=utcnow(), online=True)
    )
    return result.rowcount == 1


def unregister(conn: Connection, hostname: str) -> None:
    # UPDATE conductors SET online = false WHERE hostname = :hostname
    conn.execute(conductors.update().where(conductors.c.hostname == hostname).values(online=False))


def alive(conn: Connection, timeout: float) -> list[dict[str, Any]]:
    """Online conductors whose last heartbeat is recent enough."""
    cutoff = utcnow() - datetime.timedelta(seconds=timeout)
    # SELECT * FROM conductors WHERE online AND updated_at >= :cutoff ORDER BY hostname
    query = (
        sa.select(conductors)
        .where(conductors.c.online.is_(True), conductors.c.updated_at >= cutoff)
        .order_by(conductors.c.hostname)
    )
    return [_decode(row) for row in conn.execute(query)]


def all_conductors(conn: Connection) -> list[dict[str, Any]]:
    # SELECT * FROM conductors ORDER BY hostname
    return [_decode(row) for row in conn.execute(sa.select(conductors).order_by(conductors.c.hostname))]


def get(conn: Connection, hostname: str) -> dict[str, Any] | None:
    # SELECT * FROM conductors WHERE hostname = :hostname
    row = conn.execute(sa.select(conductors).where(conductors.c.hostname == hostname)).first()
    return _decode(row) if row is not None else None


def interfaces_of(conn: Connection, conductor_ids: Iterable[int]) -> list[dict[str, Any]]:
    # SELECT * FROM conductor_hardware_interfaces WHERE conductor_id IN (:ids)
    ids = list(conductor_ids)
    if not ids:
        return []
    query = sa.select(conductor_hardware_interfaces).where(conductor_hardware_interfaces.c.conductor_id.in_(ids))
    return [dict(row._mapping) for row in conn.execute(query)]


def _decode(row: Any) -> dict[str, Any]:
    conductor = dict(row._mapping)
    conductor["drivers"] = orjson.loads(conductor["drivers"]) if conductor["drivers"] else []
    return conductor
