"""Consumers, with the projects, users and consumer types they refer to."""

from __future__ import annotations

import datetime
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from corral.core.db import is_duplicate
from corral.placement.db.tables import allocations, consumer_types, consumers, projects, users


@dataclass(frozen=True)
class Consumer:
    id: int
    uuid: str
    project_id: str
    user_id: str
    generation: int
    consumer_type: str | None


# SELECT c.id, c.uuid, p.external_id, u.external_id, c.generation, ct.name
# FROM consumers c JOIN projects p ON p.id = c.project_id JOIN users u ON u.id = c.user_id
# LEFT JOIN consumer_types ct ON ct.id = c.consumer_type_id
_SELECT = sa.select(
    consumers.c.id, consumers.c.uuid, projects.c.external_id, users.c.external_id,
    consumers.c.generation, consumer_types.c.name,
).select_from(
    consumers.join(projects, projects.c.id == consumers.c.project_id)
    .join(users, users.c.id == consumers.c.user_id)
    .outerjoin(consumer_types, consumer_types.c.id == consumers.c.consumer_type_id)
)


# ... WHERE c.uuid = :uuid
_SELECT_ONE = _SELECT.where(consumers.c.uuid == sa.bindparam("uuid"))


def get(conn: Connection, uuid: str) -> Consumer | None:
    row = conn.execute(_SELECT_ONE, {"uuid": uuid}).first()
    return Consumer(*row) if row is not None else None


def get_many(conn: Connection, uuids: list[str]) -> dict[str, Consumer]:
    # ... WHERE c.uuid IN (:uuids)
    if not uuids:
        return {}
    return {row.uuid: Consumer(*row) for row in conn.execute(_SELECT.where(consumers.c.uuid.in_(uuids)))}


class IdCache:
    """Ids of projects, users and consumer types already committed.

    Those rows are never deleted, so an id seen committed stays valid; ids
    of rows inserted by the current transaction are not remembered (it may
    still roll back).
    """

    def __init__(self) -> None:
        self._ids: dict[tuple[str, str], int] = {}

    def get(self, table: str, value: str) -> int | None:
        return self._ids.get((table, value))

    def remember(self, table: str, value: str, ident: int) -> None:
        if len(self._ids) > 100_000:
            self._ids.clear()
        self._ids[(table, value)] = ident


def _ensure_named(
    conn: Connection, table: sa.Table, column: str, value: str, now: datetime.datetime, cache: IdCache | None = None
) -> int:
    """Id of the row whose ``column`` is ``value``, inserting it when missing."""
    if cache is not None and (cached := cache.get(table.name, value)) is not None:
        return cached
    # SELECT id FROM <table> WHERE <column> = :value
    query = sa.select(table.c.id).where(table.c[column] == value)
    found = conn.execute(query).scalar()
    if found is not None:
        if cache is not None:
            cache.remember(table.name, value, found)
        return found
    try:
        with conn.begin_nested():
            # INSERT INTO <table> (<column>, created_at) VALUES (:value, :now)
            return conn.execute(table.insert().values({column: value, "created_at": now})).inserted_primary_key[0]
    except sa.exc.IntegrityError as error:
        if not is_duplicate(error):
            raise
        return conn.execute(query).scalar_one()


def project_id(conn: Connection, external_id: str, now: datetime.datetime, cache: IdCache | None = None) -> int:
    return _ensure_named(conn, projects, "external_id", external_id, now, cache)


def user_id(conn: Connection, external_id: str, now: datetime.datetime, cache: IdCache | None = None) -> int:
    return _ensure_named(conn, users, "external_id", external_id, now, cache)


def consumer_type_id(
    conn: Connection, name: str | None, now: datetime.datetime, cache: IdCache | None = None
) -> int | None:
    return None if name is None else _ensure_named(conn, consumer_types, "name", name, now, cache)


# One round trip instead of a savepoint around the insert, where the
# database has it:
# INSERT INTO consumers (uuid, project_id, user_id, consumer_type_id, generation, created_at)
# VALUES (:uuid, :project_id, :user_id, :consumer_type_id, :generation, :created_at)
# ON CONFLICT DO NOTHING RETURNING id
_INSERT_UNLESS_PRESENT = {
    "postgresql": postgresql.insert(consumers).on_conflict_do_nothing().returning(consumers.c.id),
    "sqlite": sqlite.insert(consumers).on_conflict_do_nothing().returning(consumers.c.id),
}


def create(
    conn: Connection, uuid: str, *, project: int, user: int, consumer_type: int | None, now: datetime.datetime
) -> bool:
    """Insert a consumer at generation 1; False when one appeared concurrently."""
    values = dict(
        uuid=uuid, project_id=project, user_id=user, consumer_type_id=consumer_type, generation=1, created_at=now
    )
    statement = _INSERT_UNLESS_PRESENT.get(conn.dialect.name)
    if statement is not None:
        return conn.execute(statement, values).first() is not None
    try:
        with conn.begin_nested():
            # INSERT INTO consumers (...) VALUES (...)
            conn.execute(consumers.insert(), values)
    except sa.exc.IntegrityError as error:
        if not is_duplicate(error):
            raise
        return False
    return True


def bump(
    conn: Connection,
    consumer: Consumer,
    *,
    project: int,
    user: int,
    consumer_type: int | None,
    keep_type: bool,
    now: datetime.datetime,
) -> bool:
    """Move the consumer to the next generation if nobody else did first."""
    values = {
        "generation": consumers.c.generation + 1, "project_id": project, "user_id": user, "updated_at": now,
    }
    if not keep_type:
        values["consumer_type_id"] = consumer_type
    # UPDATE consumers SET generation = generation + 1, project_id = :project, user_id = :user,
    #        [consumer_type_id = :type,] updated_at = :now
    # WHERE id = :id AND generation = :seen
    updated = conn.execute(
        consumers.update()
        .where(consumers.c.id == consumer.id, consumers.c.generation == consumer.generation)
        .values(values)
    ).rowcount
    return updated == 1


def delete_if_unused(conn: Connection, uuids: list[str]) -> None:
    """Drop the consumer records of consumers that no longer have allocations."""
    if not uuids:
        return
    # DELETE FROM consumers WHERE uuid IN (:uuids)
    #   AND NOT EXISTS (SELECT 1 FROM allocations WHERE allocations.consumer_id = consumers.uuid)
    conn.execute(
        consumers.delete().where(
            consumers.c.uuid.in_(uuids),
            ~sa.exists().where(allocations.c.consumer_id == consumers.c.uuid),
        )
    )
