"""Resource classes and traits: standard names synced at start-up, custom ones on demand.

Standard names (from os-resource-classes and os-traits) never change while
the service runs, so their ids are cached on the application state;
custom ones are looked up in the database every time so that several API
processes always agree.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable

import os_resource_classes
import os_traits
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from corral.core.db import Database, is_duplicate
from corral.placement.db.tables import resource_classes, traits

CUSTOM_PREFIX = "CUSTOM_"


def standard_resource_classes() -> list[str]:
    return list(os_resource_classes.STANDARDS)


def standard_traits() -> list[str]:
    return sorted(os_traits.get_traits())


def sync_standard(db: Database, table: sa.Table, names: list[str]) -> dict[str, int]:
    """Insert the standard names missing from ``table``; name -> id for all of them."""

    def work(conn: Connection) -> dict[str, int]:
        # SELECT name, id FROM <table>
        existing = {row.name: row.id for row in conn.execute(sa.select(table.c.name, table.c.id))}
        missing = [name for name in names if name not in existing]
        if missing:
            now = datetime.datetime.now(datetime.UTC).replace(tzinfo=None)
            # INSERT INTO <table> (name, created_at) VALUES ...
            conn.execute(table.insert(), [{"name": name, "created_at": now} for name in missing])
            existing = {row.name: row.id for row in conn.execute(sa.select(table.c.name, table.c.id))}
        return {name: existing[name] for name in names}

    try:
        return db.write(work)
    except sa.exc.IntegrityError as error:
        # Another process synced at the same moment; its rows are as good.
        if not is_duplicate(error):
            raise
        return db.write(work)


def ids_by_name(conn: Connection, table: sa.Table, names: Iterable[str], cached: dict[str, int]) -> dict[str, int]:
    """name -> id for the ``names`` that exist (standard ones from ``cached``)."""
    found = {name: cached[name] for name in names if name in cached}
    rest = [name for name in names if name not in found]
    if rest:
        # SELECT name, id FROM <table> WHERE name IN (:rest)
        rows = conn.execute(sa.select(table.c.name, table.c.id).where(table.c.name.in_(rest)))
        found.update({row.name: row.id for row in rows})
    return found


def names_by_id(conn: Connection, table: sa.Table, ids: Iterable[int], cached: dict[str, int]) -> dict[int, str]:
    reverse = {ident: name for name, ident in cached.items()}
    found = {ident: reverse[ident] for ident in ids if ident in reverse}
    rest = [ident for ident in ids if ident not in found]
    if rest:
        # SELECT id, name FROM <table> WHERE id IN (:rest)
        rows = conn.execute(sa.select(table.c.id, table.c.name).where(table.c.id.in_(rest)))
        found.update({row.id: row.name for row in rows})
    return found


def all_names(conn: Connection, table: sa.Table) -> list[str]:
    # SELECT name FROM <table> ORDER BY id
    return [row.name for row in conn.execute(sa.select(table.c.name).order_by(table.c.id))]


def get_id(conn: Connection, table: sa.Table, name: str) -> int | None:
    # SELECT id FROM <table> WHERE name = :name
    return conn.execute(sa.select(table.c.id).where(table.c.name == name)).scalar()


def insert(conn: Connection, table: sa.Table, name: str, now: datetime.datetime) -> bool:
    """Insert a custom name; False when it already exists."""
    if get_id(conn, table, name) is not None:
        return False
    try:
        with conn.begin_nested():
            # INSERT INTO <table> (name, created_at) VALUES (:name, :now)
            conn.execute(table.insert().values(name=name, created_at=now))
    except sa.exc.IntegrityError as error:
        if not is_duplicate(error):
            raise
        return False
    return True


RESOURCE_CLASSES = resource_classes
TRAITS = traits
