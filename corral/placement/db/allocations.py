"""Writing and reading allocations.

:func:`replace` is the one write path.  In one transaction it checks and
bumps each consumer's generation, locks the providers involved (in id
order, so concurrent writers cannot deadlock on them), re-reads usage under
those locks, checks capacity and writes.  Because the capacity check runs
while the provider rows are locked, two writers can never both fit into
the same free space.
"""

from __future__ import annotations

import datetime
from collections import defaultdict

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from corral.core import errors
from corral.placement.db import catalog, consumers
from corral.placement.db.tables import allocations, inventories, resource_classes, resource_providers
from corral.placement.domain import allocations as rules
from corral.placement.domain.allocations import ConsumerAllocations
from corral.placement.domain.inventory import FIELDS, Inventory


def _resolve_providers(
    conn: Connection, requests: list[ConsumerAllocations]
) -> tuple[dict[str, int], set[int]]:
    """uuid -> id of the providers named in the requests, and the ids the consumers use now."""
    wanted = sorted({uuid for request in requests for uuid in request.allocations})
    consumer_uuids = [request.consumer_uuid for request in requests]
    # SELECT id, uuid FROM resource_providers WHERE uuid IN (:wanted)
    # UNION ALL
    # SELECT DISTINCT resource_provider_id, NULL FROM allocations WHERE consumer_id IN (:consumers)
    named = sa.select(resource_providers.c.id, resource_providers.c.uuid).where(resource_providers.c.uuid.in_(wanted))
    in_use = (
        sa.select(allocations.c.resource_provider_id, sa.null())
        .where(allocations.c.consumer_id.in_(consumer_uuids))
        .distinct()
    )
    found: dict[str, int] = {}
    current: set[int] = set()
    for ident, uuid in conn.execute(sa.union_all(named, in_use)):
        if uuid is None:
            current.add(ident)
        else:
            found[uuid] = ident
    for uuid in wanted:
        if uuid not in found:
            raise errors.BadRequest(f"Allocation for resource provider '{uuid}' that does not exist.")
    return found, current


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
    current = consumers.get(conn, request.consumer_uuid)
    rules.check_generation(request, current.generation if current else None)
    project = consumers.project_id(conn, request.project_id, now, cache)
    user = consumers.user_id(conn, request.user_id, now, cache)
    type_id = consumers.consumer_type_id(conn, request.consumer_type, now, cache)
    if current is None:
        if not consumers.create(conn, request.consumer_uuid, project=project, user=user, consumer_type=type_id, now=now):
            raise rules.concurrent_consumer_update(request.consumer_uuid)
        return
    keep_type = request.consumer_type is None
    if not consumers.bump(conn, current, project=project, user=user, consumer_type=type_id, keep_type=keep_type, now=now):
        raise rules.concurrent_consumer_update(request.consumer_uuid)


def _existing_provider_ids(conn: Connection, consumer_uuids: list[str]) -> set[int]:
    # SELECT DISTINCT resource_provider_id FROM allocations WHERE consumer_id IN (:uuids)
    query = sa.select(allocations.c.resource_provider_id).where(allocations.c.consumer_id.in_(consumer_uuids)).distinct()
    return set(conn.execute(query).scalars())


def lock_providers(conn: Connection, provider_ids: set[int]) -> None:
    """Row-lock the providers, lowest id first (SQLite's write lock already serializes)."""
    if not provider_ids or conn.dialect.name == "sqlite":
        return
    # SELECT id FROM resource_providers WHERE id IN (:ids) ORDER BY id FOR UPDATE
    conn.execute(
        sa.select(resource_providers.c.id)
        .where(resource_providers.c.id.in_(sorted(provider_ids)))
        .order_by(resource_providers.c.id)
        .with_for_update()
    ).all()


def _capacity_rows(conn: Connection, provider_ids: list[int]) -> dict[tuple[int, int], tuple[Inventory, int]]:
    """(provider id, class id) -> (inventory, amount in use) for the providers."""
    used = (
        sa.select(
            allocations.c.resource_provider_id, allocations.c.resource_class_id,
            sa.func.sum(allocations.c.used).label("used"),
        )
        .where(allocations.c.resource_provider_id.in_(provider_ids))
        .group_by(allocations.c.resource_provider_id, allocations.c.resource_class_id)
        .subquery()
    )
    # SELECT inv.resource_provider_id, inv.resource_class_id, inv.total, ..., COALESCE(u.used, 0)
    # FROM inventories inv LEFT JOIN (SELECT resource_provider_id, resource_class_id, SUM(used) AS used
    #                                 FROM allocations WHERE resource_provider_id IN (:ids)
    #                                 GROUP BY resource_provider_id, resource_class_id) u
    #   ON u.resource_provider_id = inv.resource_provider_id AND u.resource_class_id = inv.resource_class_id
    # WHERE inv.resource_provider_id IN (:ids)
    query = (
        sa.select(
            inventories.c.resource_provider_id, inventories.c.resource_class_id,
            *(inventories.c[name] for name in FIELDS), sa.func.coalesce(used.c.used, 0),
        )
        .select_from(
            inventories.outerjoin(
                used,
                sa.and_(
                    used.c.resource_provider_id == inventories.c.resource_provider_id,
                    used.c.resource_class_id == inventories.c.resource_class_id,
                ),
            )
        )
        .where(inventories.c.resource_provider_id.in_(provider_ids))
    )
    return {(row[0], row[1]): (Inventory(*row[2:8]), int(row[8])) for row in conn.execute(query)}


def _check_capacity(
    conn: Connection,
    wanted: dict[tuple[int, int], list[int]],
    uuids: dict[int, str],
    class_names: dict[int, str],
) -> None:
    current = _capacity_rows(conn, sorted({provider_id for provider_id, _ in wanted}))
    for key, amounts in sorted(wanted.items()):
        provider_uuid, rc = uuids[key[0]], class_names[key[1]]
        if key not in current:
            raise errors.Conflict(
                f"Unable to allocate inventory: Inventory for '{rc}' on resource provider '{provider_uuid}' invalid."
            )
        inventory, in_use = current[key]
        if not all(inventory.fits(amount) for amount in amounts):
            raise errors.Conflict(
                f"Unable to allocate inventory: Unable to create allocation for '{rc}' on resource provider "
                f"'{provider_uuid}'. The requested amount would violate inventory constraints."
            )
        if in_use + sum(amounts) > inventory.capacity:
            raise errors.Conflict(
                f"Unable to allocate inventory: Unable to create allocation for '{rc}' on resource provider "
                f"'{provider_uuid}'. The requested amount would exceed the capacity."
            )


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


def replace(
    conn: Connection,
    requests: list[ConsumerAllocations],
    standard_classes: dict[str, int],
    now: datetime.datetime,
    cache: consumers.IdCache | None = None,
) -> None:
    """Make each consumer's allocations exactly what its request says."""
    requests = sorted(requests, key=lambda request: request.consumer_uuid)
    found, current = _resolve_providers(conn, requests)
    class_ids = _resolve_classes(conn, requests, standard_classes)
    new_provider_ids = set(found.values())
    # Providers are locked before consumers are touched, always lowest id
    # first, so that concurrent writers queue instead of deadlocking.
    lock_providers(conn, new_provider_ids | current)
    for request in requests:
        _claim_consumer(conn, request, now, cache)
    consumer_uuids = [request.consumer_uuid for request in requests]
    emptied = [request.consumer_uuid for request in requests if not request.allocations]
    # Like upstream, emptying a consumer's allocations counts as a change
    # to the providers it leaves.
    left = _existing_provider_ids(conn, emptied) if emptied and current else set()
    if current:
        # DELETE FROM allocations WHERE consumer_id IN (:uuids)
        conn.execute(allocations.delete().where(allocations.c.consumer_id.in_(consumer_uuids)))
    rows, wanted = _rows(requests, found, class_ids, now)
    if rows:
        uuids = {ident: uuid for uuid, ident in found.items()}
        _check_capacity(conn, wanted, uuids, {ident: name for name, ident in class_ids.items()})
        # INSERT INTO allocations (resource_provider_id, consumer_id, resource_class_id, used, created_at) VALUES ...
        conn.execute(allocations.insert(), rows)
    changed = (new_provider_ids if rows else set()) | left
    if changed:
        # UPDATE resource_providers SET generation = generation + 1, updated_at = :now WHERE id IN (:ids)
        conn.execute(
            resource_providers.update()
            .where(resource_providers.c.id.in_(sorted(changed)))
            .values(generation=resource_providers.c.generation + 1, updated_at=now)
        )
    consumers.delete_if_unused(conn, emptied)


def delete_for_consumer(conn: Connection, consumer_uuid: str) -> bool:
    """Remove a consumer's allocations and record; False when it had none."""
    provider_ids = _existing_provider_ids(conn, [consumer_uuid])
    if not provider_ids:
        return False
    lock_providers(conn, provider_ids)
    # DELETE FROM allocations WHERE consumer_id = :uuid
    conn.execute(allocations.delete().where(allocations.c.consumer_id == consumer_uuid))
    consumers.delete_if_unused(conn, [consumer_uuid])
    return True


# ------------------------------------------------------------------ reads

_rp = resource_providers


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
