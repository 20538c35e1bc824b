"""Resource provider rows: lookups, creation, updates, trees, generations."""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from corral.core import errors
from corral.core.db import is_duplicate
from corral.placement.api import errors as codes
from corral.placement.db import topology
from corral.placement.db.tables import (
    allocations,
    inventories,
    resource_provider_aggregates,
    resource_provider_traits,
    resource_providers,
)
from corral.placement.domain.inventory import MAX_INT

_parent = resource_providers.alias("parent")
_root = resource_providers.alias("root")
_rp = resource_providers


@dataclass(frozen=True)
class Provider:
    id: int
    uuid: str
    name: str
    generation: int
    parent_uuid: str | None
    root_uuid: str
    parent_id: int | None
    root_id: int
    created_at: datetime.datetime | None
    updated_at: datetime.datetime | None

    @property
    def modified(self) -> datetime.datetime | None:
        return self.updated_at or self.created_at


# SELECT rp.id, rp.uuid, rp.name, rp.generation, parent.uuid, root.uuid,
#        rp.parent_provider_id, rp.root_provider_id, rp.created_at, rp.updated_at
# FROM resource_providers rp
# LEFT JOIN resource_providers parent ON parent.id = rp.parent_provider_id
# JOIN resource_providers root ON root.id = rp.root_provider_id
_SELECT = (
    sa.select(
        _rp.c.id, _rp.c.uuid, _rp.c.name, _rp.c.generation,
        _parent.c.uuid.label("parent_uuid"), _root.c.uuid.label("root_uuid"),
        _rp.c.parent_provider_id, _rp.c.root_provider_id, _rp.c.created_at, _rp.c.updated_at,
    )
    .select_from(
        _rp.outerjoin(_parent, _parent.c.id == _rp.c.parent_provider_id).join(
            _root, _root.c.id == _rp.c.root_provider_id
        )
    )
)


def _provider(row: sa.Row) -> Provider:
    return Provider(*row)


def get(conn: Connection, uuid: str) -> Provider | None:
    # ... WHERE rp.uuid = :uuid
    row = conn.execute(_SELECT.where(_rp.c.uuid == uuid)).first()
    return _provider(row) if row is not None else None


def get_or_404(conn: Connection, uuid: str, code: str | None = None, context: str | None = None) -> Provider:
    """The provider, or a 404 (upstream sends a specific code only from the reshaper).

    ``context`` is a handler's own wording put before the message, as some of
    upstream's handlers do: a format string with ``{uuid}``.
    """
    provider = get(conn, uuid)
    if provider is None:
        message = f"No resource provider with uuid {uuid} found"
        if context is not None:
            message = f"{context.format(uuid=uuid)}: {message}"
        raise errors.NotFound(message, code=code)
    return provider


def get_many(conn: Connection, uuids: Iterable[str]) -> dict[str, Provider]:
    # ... WHERE rp.uuid IN (:uuids)
    wanted = list(set(uuids))
    if not wanted:
        return {}
    rows = conn.execute(_SELECT.where(_rp.c.uuid.in_(wanted))).all()
    return {row.uuid: _provider(row) for row in rows}


def list_providers(conn: Connection, id_query: sa.Select | None = None) -> list[Provider]:
    """Every provider, or those whose id ``id_query`` selects, in id order."""
    # ... [WHERE rp.id IN (<id_query>)] ORDER BY rp.id
    query = _SELECT
    if id_query is not None:
        query = query.where(_rp.c.id.in_(id_query))
    return [_provider(row) for row in conn.execute(query.order_by(_rp.c.id))]


def create(conn: Connection, *, uuid: str, name: str, parent: Provider | None, now: datetime.datetime) -> None:
    """Insert a provider; duplicate names and uuids are 409s."""
    _raise_if_taken(conn, uuid, name)
    try:
        # A savepoint keeps the transaction usable (PostgreSQL) if a
        # concurrent request took the name or uuid in the meantime.
        with conn.begin_nested():
            # INSERT INTO resource_providers (uuid, name, generation, parent_provider_id,
            #                                 root_provider_id, created_at) VALUES (...)
            new_id = conn.execute(
                resource_providers.insert().values(
                    uuid=uuid, name=name, generation=0,
                    parent_provider_id=parent.id if parent else None,
                    root_provider_id=parent.root_id if parent else None,
                    created_at=now,
                )
            ).inserted_primary_key[0]
    except sa.exc.IntegrityError as error:
        if not is_duplicate(error):
            raise
        _raise_if_taken(conn, uuid, name)
        raise errors.Conflict(f"Conflicting resource provider {name} ({uuid}) already exists.") from None
    if parent is None:
        # A root is its own root.
        # UPDATE resource_providers SET root_provider_id = id WHERE id = :id
        conn.execute(
            resource_providers.update().where(resource_providers.c.id == new_id).values(root_provider_id=new_id)
        )
    topology.changed(conn, [new_id])


def _raise_if_taken(conn: Connection, uuid: str, name: str) -> None:
    # SELECT uuid, name FROM resource_providers WHERE uuid = :uuid OR name = :name
    rows = conn.execute(
        sa.select(resource_providers.c.uuid, resource_providers.c.name).where(
            sa.or_(resource_providers.c.uuid == uuid, resource_providers.c.name == name)
        )
    ).all()
    if any(row.uuid == uuid for row in rows):
        raise errors.Conflict(f"Conflicting resource provider uuid: {uuid} already exists.")
    if rows:
        raise errors.Conflict(
        f"Conflicting resource provider name: {name} already exists.", code=codes.DUPLICATE_NAME
    )


def rename(conn: Connection, provider: Provider, name: str, now: datetime.datetime) -> None:
    try:
        with conn.begin_nested():
            # UPDATE resource_providers SET name = :name, updated_at = :now WHERE id = :id
            conn.execute(
                resource_providers.update()
                .where(resource_providers.c.id == provider.id)
                .values(name=name, updated_at=now)
            )
    except sa.exc.IntegrityError as error:
        if not is_duplicate(error):
            raise
        raise errors.Conflict(
            f"Conflicting resource provider {name} already exists.", code=codes.DUPLICATE_NAME
        ) from None


def tree_members(conn: Connection, root_id: int) -> dict[int, int | None]:
    """id -> parent id for every provider of one tree."""
    # SELECT id, parent_provider_id FROM resource_providers WHERE root_provider_id = :root_id
    rows = conn.execute(
        sa.select(resource_providers.c.id, resource_providers.c.parent_provider_id).where(
            resource_providers.c.root_provider_id == root_id
        )
    )
    return {row.id: row.parent_provider_id for row in rows}


def descendants(members: dict[int, int | None], top: int) -> set[int]:
    """``top`` and every provider below it."""
    children: dict[int, list[int]] = {}
    for child, parent in members.items():
        if parent is not None:
            children.setdefault(parent, []).append(child)
    found, pending = set(), [top]
    while pending:
        current = pending.pop()
        found.add(current)
        pending.extend(children.get(current, ()))
    return found


def set_parent(conn: Connection, provider: Provider, parent: Provider | None, now: datetime.datetime) -> None:
    """Move ``provider`` and its subtree under ``parent`` (None: make it a root)."""
    subtree = descendants(tree_members(conn, provider.root_id), provider.id)
    if parent is not None and parent.id in subtree:
        raise errors.BadRequest("creating loop in the provider tree is not allowed.")
    new_root = parent.root_id if parent is not None else provider.id
    # UPDATE resource_providers SET parent_provider_id = :parent, updated_at = :now WHERE id = :id
    conn.execute(
        resource_providers.update()
        .where(resource_providers.c.id == provider.id)
        .values(parent_provider_id=parent.id if parent else None, updated_at=now)
    )
    # UPDATE resource_providers SET root_provider_id = :new_root WHERE id IN (:subtree)
    conn.execute(
        resource_providers.update()
        .where(resource_providers.c.id.in_(sorted(subtree)))
        .values(root_provider_id=new_root)
    )
    topology.changed(conn, subtree)


def bump_generation(conn: Connection, provider_id: int, expected: int | None, now: datetime.datetime) -> int:
    """Increment a provider's generation if it is still ``expected``.

    ``expected=None`` increments unconditionally.  A mismatch (a stale
    caller, or a concurrent writer that got there first) is a 409.
    """
    # UPDATE resource_providers SET generation = generation + 1, updated_at = :now
    # WHERE id = :id [AND generation = :expected]
    query = (
        resource_providers.update()
        .where(resource_providers.c.id == provider_id)
        .values(generation=resource_providers.c.generation + 1, updated_at=now)
    )
    if expected is not None:
        if not 0 <= expected <= MAX_INT:
            # No generation is outside its INTEGER column's range, and the
            # databases cannot compare with such numbers (PostgreSQL casts
            # to INTEGER, SQLite binds 64 bits at most).
            raise generation_conflict()
        query = query.where(resource_providers.c.generation == expected)
    if conn.execute(query).rowcount != 1:
        raise generation_conflict()
    # SELECT generation FROM resource_providers WHERE id = :id
    return conn.execute(
        sa.select(resource_providers.c.generation).where(resource_providers.c.id == provider_id)
    ).scalar_one()


def generation_conflict() -> errors.Conflict:
    return errors.Conflict(
        "resource provider generation conflict", code=codes.CONCURRENT_UPDATE
    )


def delete(conn: Connection, provider: Provider) -> None:
    """Delete a provider that has no children and no allocations."""
    # Children are checked first, as upstream does.
    # SELECT 1 FROM resource_providers WHERE parent_provider_id = :id LIMIT 1
    if conn.execute(
        sa.select(resource_providers.c.id).where(resource_providers.c.parent_provider_id == provider.id).limit(1)
    ).first():
        raise errors.Conflict(
            f"Unable to delete parent resource provider {provider.uuid}: It has child resource providers.",
            code=codes.PROVIDER_CANNOT_DELETE_PARENT,
        )
    # SELECT 1 FROM allocations WHERE resource_provider_id = :id LIMIT 1
    if conn.execute(
        sa.select(allocations.c.id).where(allocations.c.resource_provider_id == provider.id).limit(1)
    ).first():
        raise errors.Conflict(
            f"Unable to delete resource provider {provider.uuid}: Resource provider has allocations.",
            code=codes.PROVIDER_IN_USE,
        )
    for table in (inventories, resource_provider_traits, resource_provider_aggregates):
        # DELETE FROM <table> WHERE resource_provider_id = :id
        conn.execute(table.delete().where(table.c.resource_provider_id == provider.id))
    # MySQL refuses to delete a row that references itself (a root), so
    # the self-reference goes first.
    # UPDATE resource_providers SET root_provider_id = NULL WHERE id = :id AND generation = :generation
    conn.execute(
        resource_providers.update()
        .where(resource_providers.c.id == provider.id, resource_providers.c.generation == provider.generation)
        .values(root_provider_id=None)
    )
    # DELETE FROM resource_providers WHERE id = :id AND generation = :generation
    deleted = conn.execute(
        resource_providers.delete().where(
            resource_providers.c.id == provider.id, resource_providers.c.generation == provider.generation
        )
    ).rowcount
    if deleted != 1:
        raise generation_conflict()
    topology.changed(conn, [provider.id])
