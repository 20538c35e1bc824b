"""Writing and reading allocations.

:func:`replace` is the one write path.  In one transaction it checks and
bumps each consumer's generation, locks the providers involved (in id
order, so concurrent writers cannot deadlock on them), re-reads usage under
those locks, checks capacity and writes.  Because the capacity check runs
while the provider rows are locked, two writers can never both fit into
the same free space.

The statements of the write path are built once, with bind parameters, so
that a request pays neither for building them nor for SQLAlchemy's cache
key.  On PostgreSQL the usual claim (new consumers, generation ``null``)
takes two round trips instead (:mod:`corral.placement.db.claims_pg`).
"""

from __future__ import annotations

import datetime
from collections import defaultdict

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from corral.core import errors
from corral.placement.db import catalog, claims_pg, consumers
from corral.placement.db.tables import allocations, inventories, resource_classes, resource_providers
from corral.placement.domain import allocations as rules
from corral.placement.domain.allocations import ConsumerAllocations
from corral.placement.domain.inventory import FIELDS, MAX_INT, Inventory

_rp = resource_providers

# SELECT id, uuid FROM resource_providers WHERE uuid IN (:wanted)
# UNION ALL
# SELECT DISTINCT resource_provider_id, NULL FROM allocations WHERE consumer_id IN (:consumers)
_PROVIDERS_AND_CURRENT = sa.union_all(
    sa.select(_rp.c.id, _rp.c.uuid).where(_rp.c.uuid.in_(sa.bindparam("wanted", expanding=True))),
    sa.select(allocations.c.resource_provider_id, sa.null())
    .where(allocations.c.consumer_id.in_(sa.bindparam("consumers", expanding=True)))
    .distinct(),
)

# The same in one statement that also locks every row it returns, lowest id
# first (PostgreSQL locks the rows after sorting them).  The ids come from a
# UNION: "uuid IN (...) OR id IN (subquery)" would scan every provider.
# SELECT rp.id, rp.uuid, rp.id IN (SELECT resource_provider_id FROM allocations
#                                  WHERE consumer_id IN (:consumers)) AS in_use
# FROM resource_providers rp
# WHERE rp.id IN (SELECT id FROM resource_providers WHERE uuid IN (:wanted)
#                 UNION SELECT resource_provider_id FROM allocations WHERE consumer_id IN (:consumers))
# ORDER BY rp.id FOR UPDATE OF rp
_in_use_ids = sa.select(allocations.c.resource_provider_id).where(
    allocations.c.consumer_id.in_(sa.bindparam("consumers", expanding=True))
)
_named = _rp.alias("named")
_LOCK_PROVIDERS_AND_CURRENT = (
    sa.select(_rp.c.id, _rp.c.uuid, _rp.c.id.in_(_in_use_ids).label("in_use"))
    .where(_rp.c.id.in_(sa.union(
        sa.select(_named.c.id).where(_named.c.uuid.in_(sa.bindparam("wanted", expanding=True))), _in_use_ids,
    )))
    .order_by(_rp.c.id)
    .with_for_update(of=_rp)
)

# SELECT id FROM resource_providers WHERE id IN (:ids) ORDER BY id FOR UPDATE
_LOCK_PROVIDERS = (
    sa.select(_rp.c.id).where(_rp.c.id.in_(sa.bindparam("ids", expanding=True))).order_by(_rp.c.id).with_for_update()
)

# SELECT DISTINCT resource_provider_id FROM allocations WHERE consumer_id IN (:uuids)
_PROVIDERS_OF_CONSUMERS = (
    sa.select(allocations.c.resource_provider_id)
    .where(allocations.c.consumer_id.in_(sa.bindparam("uuids", expanding=True)))
    .distinct()
)

_used = (
    sa.select(
        allocations.c.resource_provider_id, allocations.c.resource_class_id,
        sa.func.sum(allocations.c.used).label("used"),
    )
    .where(allocations.c.resource_provider_id.in_(sa.bindparam("ids", expanding=True)))
    .group_by(allocations.c.resource_provider_id, allocations.c.resource_class_id)
    .subquery()
)
# SELECT inv.resource_provider_id, inv.resource_class_id, inv.total, ..., COALESCE(u.used, 0)
# FROM inventories inv LEFT JOIN (SELECT resource_provider_id, resource_class_id, SUM(used) AS used
#                                 FROM allocations WHERE resource_provider_id IN (:ids)
#                                 GROUP BY resource_provider_id, resource_class_id) u
#   ON u.resource_provider_id = inv.resource_provider_id AND u.resource_class_id = inv.resource_class_id
# WHERE inv.resource_provider_id IN (:ids)
_CAPACITY = (
    sa.select(
        inventories.c.resource_provider_id, inventories.c.resource_class_id,
        *(inventories.c[name] for name in FIELDS), sa.func.coalesce(_used.c.used, 0),
    )
    .select_from(
        inventories.outerjoin(
            _used,
            sa.and_(
                _used.c.resource_provider_id == inventories.c.resource_provider_id,
                _used.c.resource_class_id == inventories.c.resource_class_id,
            ),
        )
    )
    .where(inventories.c.resource_provider_id.in_(sa.bindparam("ids", expanding=True)))
)

# DELETE FROM allocations WHERE consumer_id IN (:uuids)
_DELETE_FOR_CONSUMERS = allocations.delete().where(allocations.c.consumer_id.in_(sa.bindparam("uuids", expanding=True)))

# INSERT INTO allocations (resource_provider_id, consumer_id, resource_class_id, used, created_at) VALUES ...
_INSERT = allocations.insert()

# UPDATE resource_providers SET generation = generation + 1, updated_at = :now WHERE id IN (:ids)
_BUMP_PROVIDERS = (
    _rp.update()
    .where(_rp.c.id.in_(sa.bindparam("ids", expanding=True)))
    .values(generation=_rp.c.generation + 1, updated_at=sa.bindparam("now"))
)

def _resolve_providers(
    conn: Connection, wanted: list[str], consumer_uuids: list[str]
) -> tuple[dict[str, int], set[int]]:
    """uuid -> id of the providers named in the requests, and the ids the consumers use now.

    On PostgreSQL (and MySQL) all those providers are locked as well.
    """
    found: dict[str, int] = {}
    current: set[int] = set()
    params = {"wanted": wanted, "consumers": consumer_uuids}
    if conn.dialect.name == "postgresql":
        for ident, uuid, in_use in conn.execute(_LOCK_PROVIDERS_AND_CURRENT, params):
            if in_use:
                current.add(ident)
            if uuid in wanted:
                found[uuid] = ident
    else:
        for ident, uuid in conn.execute(_PROVIDERS_AND_CURRENT, params):
            if uuid is None:
                current.add(ident)
            else:
                found[uuid] = ident
        # Providers are locked before consumers are touched, always lowest
        # id first, so that concurrent writers queue instead of deadlocking.
        lock_providers(conn, set(found.values()) | current)
    for uuid in wanted:
        if uuid not in found:
            raise errors.BadRequest(f"Allocation for resource provider '{uuid}' that does not exist.")
    return found, current


def _known_classes(
    conn: Connection, requests: list[ConsumerAllocations], cached: dict[str, int]
) -> dict[str, int] | None:
    """Like :func:`_resolve_classes`, but None for an unknown class: its 400 waits for the providers' own."""
    try:
        return _resolve_classes(conn, requests, cached)
    except rules.UnknownResourceClass:
        return None


def _resolve_classes(conn: Connection, requests: list[ConsumerAllocations], cached: dict[str, int]) -> dict[str, int]:
    wanted = {rc for request in requests for amounts in request.allocations.values() for rc in amounts}
    found = catalog.ids_by_name(conn, resource_classes, wanted, cached)
    missing = sorted(wanted - set(found))
    if missing:
        raise rules.UnknownResourceClass(missing[0])
    return found


def _claim_consumer(
    conn: Connection, request: ConsumerAllocations, now: datetime.datetime, cache: consumers.IdCache | None
) -> None:
    """Check and advance the consumer's generation (creating its record if needed)."""
    project = consumers.project_id(conn, request.project_id, now, cache)
    user = consumers.user_id(conn, request.user_id, now, cache)
    type_id = consumers.consumer_type_id(conn, request.consumer_type, now, cache)
    if request.check_generation and request.generation is None:
        # A consumer the caller believes new: try to create it straight
        # away; only when that fails is the stored one read, for the 409.
        if consumers.create(conn, request.consumer_uuid, project=project, user=user, consumer_type=type_id, now=now):
            return
        existing = consumers.get(conn, request.consumer_uuid)
        rules.check_generation(request, existing.generation if existing else None)
        raise rules.concurrent_consumer_update(request.consumer_uuid)
    current = consumers.get(conn, request.consumer_uuid)
    rules.check_generation(request, current.generation if current else None)
    if current is None:
        if not consumers.create(conn, request.consumer_uuid, project=project, user=user, consumer_type=type_id, now=now):
            raise rules.concurrent_consumer_update(request.consumer_uuid)
        return
    keep_type = request.consumer_type is None
    if not consumers.bump(conn, current, project=project, user=user, consumer_type=type_id, keep_type=keep_type, now=now):
        raise rules.concurrent_consumer_update(request.consumer_uuid)


def _existing_provider_ids(conn: Connection, consumer_uuids: list[str]) -> set[int]:
    return set(conn.execute(_PROVIDERS_OF_CONSUMERS, {"uuids": consumer_uuids}).scalars())


def lock_providers(conn: Connection, provider_ids: set[int]) -> None:
    """Row-lock the providers, lowest id first (SQLite's write lock already serializes)."""
    if not provider_ids or conn.dialect.name == "sqlite":
        return
    conn.execute(_LOCK_PROVIDERS, {"ids": sorted(provider_ids)}).all()


def _capacity_rows(conn: Connection, provider_ids: list[int]) -> dict[tuple[int, int], tuple[Inventory, int]]:
    """(provider id, class id) -> (inventory, amount in use) for the providers."""
    return {(row[0], row[1]): (Inventory(*row[2:8]), int(row[8])) for row in conn.execute(_CAPACITY, {"ids": provider_ids})}


def _rows(
    requests: list[ConsumerAllocations], found: dict[str, int], class_ids: dict[str, int], now: datetime.datetime
) -> tuple[list[dict], dict[tuple[int, int], list[int]]]:
    """Allocation rows to insert, and the amounts wanted per (provider, class)."""
    rows, wanted = [], defaultdict(list)
    for request in requests:
        for provider_uuid, amounts in request.allocations.items():
            provider_id = found[provider_uuid]
            for rc, amount in amounts.items():
                wanted[(provider_id, class_ids[rc])].append(amount)
                rows.append({
                    "resource_provider_id": provider_id, "consumer_id": request.consumer_uuid,
                    "resource_class_id": class_ids[rc], "used": amount, "created_at": now,
                })
    return rows, wanted


def _is_new_consumer_claim(request: ConsumerAllocations) -> bool:
    """A claim for a consumer the caller says is new (1.28+, generation null).

    Amounts no inventory can hold (beyond a 32-bit column) take the general
    path, which refuses them for want of capacity before writing anything.
    """
    return (
        request.check_generation and request.generation is None and bool(request.allocations)
        and all(type(amount) is int and 0 < amount <= MAX_INT
                for amounts in request.allocations.values() for amount in amounts.values())
    )


def replace(
    conn: Connection,
    requests: list[ConsumerAllocations],
    standard_classes: dict[str, int],
    now: datetime.datetime,
    cache: consumers.IdCache | None = None,
) -> None:
    """Make each consumer's allocations exactly what its request says."""
    requests = sorted(requests, key=lambda request: request.consumer_uuid)
    consumer_uuids = [request.consumer_uuid for request in requests]
    wanted_providers = sorted({uuid for request in requests for uuid in request.allocations})
    if conn.dialect.name == "postgresql" and all(map(_is_new_consumer_claim, requests)):
        fast_classes = _known_classes(conn, requests, standard_classes)
        if fast_classes is not None and claims_pg.claim(conn, requests, wanted_providers, fast_classes, now, cache):
            return
    found, current = _resolve_providers(conn, wanted_providers, consumer_uuids)
    class_ids = _resolve_classes(conn, requests, standard_classes)
    new_provider_ids = set(found.values())
    for request in requests:
        _claim_consumer(conn, request, now, cache)
    emptied = [request.consumer_uuid for request in requests if not request.allocations]
    # Like upstream, emptying a consumer's allocations counts as a change
    # to the providers it leaves.
    left = _existing_provider_ids(conn, emptied) if emptied and current else set()
    if current:
        conn.execute(_DELETE_FOR_CONSUMERS, {"uuids": consumer_uuids})
    rows, wanted = _rows(requests, found, class_ids, now)
    if rows:
        uuids = {ident: uuid for uuid, ident in found.items()}
        capacity = _capacity_rows(conn, sorted({provider_id for provider_id, _ in wanted}))
        rules.check_capacity(capacity, wanted, uuids, {ident: name for name, ident in class_ids.items()})
        conn.execute(_INSERT, rows)
    changed = (new_provider_ids if rows else set()) | left
    if changed:
        conn.execute(_BUMP_PROVIDERS, {"ids": sorted(changed), "now": now})
    consumers.delete_if_unused(conn, emptied)


def delete_for_consumer(conn: Connection, consumer_uuid: str) -> bool:
    """Remove a consumer's allocations and record; False when it had none."""
    provider_ids = _existing_provider_ids(conn, [consumer_uuid])
    if not provider_ids:
        return False
    lock_providers(conn, provider_ids)
    conn.execute(_DELETE_FOR_CONSUMERS, {"uuids": [consumer_uuid]})
    consumers.delete_if_unused(conn, [consumer_uuid])
    return True


# ------------------------------------------------------------------ reads

def for_consumer(conn: Connection, consumer_uuid: str) -> dict[str, dict]:
    """provider uuid -> {"generation": g, "resources": {rc: amount}}."""
    # SELECT rp.uuid, rp.generation, rc.name, a.used FROM allocations a
    # JOIN resource_providers rp ON rp.id = a.resource_provider_id
    # JOIN resource_classes rc ON rc.id = a.resource_class_id
    # WHERE a.consumer_id = :uuid
    query = (
        sa.select(_rp.c.uuid, _rp.c.generation, resource_classes.c.name, allocations.c.used)
        .select_from(
            allocations.join(_rp, _rp.c.id == allocations.c.resource_provider_id).join(
                resource_classes, resource_classes.c.id == allocations.c.resource_class_id
            )
        )
        .where(allocations.c.consumer_id == consumer_uuid)
    )
    result: dict[str, dict] = {}
    for uuid, generation, rc, used in conn.execute(query):
        entry = result.setdefault(uuid, {"generation": generation, "resources": {}})
        entry["resources"][rc] = entry["resources"].get(rc, 0) + used
    return result


def for_provider(conn: Connection, provider_id: int) -> dict[str, dict[str, int]]:
    """consumer uuid -> {rc: amount} on one provider."""
    # SELECT a.consumer_id, rc.name, a.used FROM allocations a
    # JOIN resource_classes rc ON rc.id = a.resource_class_id WHERE a.resource_provider_id = :id
    query = (
        sa.select(allocations.c.consumer_id, resource_classes.c.name, allocations.c.used)
        .select_from(allocations.join(resource_classes, resource_classes.c.id == allocations.c.resource_class_id))
        .where(allocations.c.resource_provider_id == provider_id)
    )
    result: dict[str, dict[str, int]] = {}
    for consumer, rc, used in conn.execute(query):
        resources = result.setdefault(consumer, {})
        resources[rc] = resources.get(rc, 0) + used
    return result
