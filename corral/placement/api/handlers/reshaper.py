"""POST /reshaper (1.30): move inventories and allocations in one transaction.

A reshape typically moves inventory from a root provider to new children
and the allocations with it.  The steps, their checks and the generations
they leave are upstream's, in upstream's order:

1. each provider named in ``inventories``, in the body's order, must exist
   (400) and be at the given generation (409);
2. each consumer's generation is checked (409), then the providers its
   allocations name must exist (400);
3. interim inventories: a provider whose new inventory is not empty gets
   the union of its current and new records (generation + 1), so that
   allocations can move before any class disappears;
4. the allocations are written with the usual capacity and unit checks
   (409); each provider they touch, or that an emptied consumer leaves,
   gets generation + 1;
5. final inventories: each provider gets exactly its new inventory
   (generation + 1); removing a class still in use is a 409.  Only then
   comes Corral's own refusal of a capacity below what is allocated
   (``[placement] refuse_inventory_below_usage``).

Any failure leaves everything as it was.
"""

from __future__ import annotations

from collections.abc import Sequence

import falcon
from sqlalchemy.engine import Connection

from corral.core import errors
from corral.core.http import Endpoint, Route, send_empty
from corral.placement.api import errors as codes
from corral.placement.api import util
from corral.placement.api.handlers.allocations import consumer_request, id_cache
from corral.placement.api.handlers.inventories import from_records
from corral.placement.api.state import PlacementState
from corral.placement.db import allocations as allocation_db
from corral.placement.db import catalog, consumers, inventories, providers
from corral.placement.db.providers import Provider
from corral.placement.domain import allocations as allocation_rules
from corral.placement.domain import inventory as inventory_rules
from corral.placement.domain.allocations import ConsumerAllocations
from corral.placement.domain.inventory import Inventory

INTRODUCED = (1, 30)
MALFORMED = "malformed reshaper data: "

# (provider uuid, generation given, new inventory by class), in the body's order.
Target = tuple[str, int, dict[str, Inventory]]


def _providers_at_generation(conn: Connection, targets: Sequence[Target]) -> list[Provider]:
    """Step 1: the providers whose inventories change, locked, at the generations given."""
    found = providers.get_many(conn, [uuid for uuid, _, _ in targets])
    allocation_db.lock_providers(conn, {provider.id for provider in found.values()})
    # Read again under the locks: the generations compared are the current ones.
    found = providers.get_many(conn, list(found))
    checked = []
    for uuid, generation, _ in targets:
        provider = found.get(uuid)
        if provider is None:
            raise errors.BadRequest(
                f"Resource provider {uuid} in inventories not found: No resource provider with uuid {uuid} found",
                code=codes.RESOURCE_PROVIDER_NOT_FOUND,
            )
        if provider.generation != generation:
            raise errors.Conflict(
                f"resource provider generation conflict for provider {uuid}: "
                f"actual: {provider.generation}, given: {generation}",
                code=codes.CONCURRENT_UPDATE,
            )
        checked.append(provider)
    return checked


def _check_consumers(conn: Connection, requests: Sequence[ConsumerAllocations]) -> None:
    """Step 2: consumer generations, then the providers the allocations name."""
    for request in requests:
        current = consumers.get(conn, request.consumer_uuid)
        allocation_rules.check_generation(request, current.generation if current else None)
    named = [uuid for request in requests for uuid in request.allocations]
    found = providers.get_many(conn, named)
    for uuid in named:
        if uuid not in found:
            raise errors.BadRequest(f"Allocation for resource provider '{uuid}' that does not exist.")


def _class_ids(state: PlacementState, conn: Connection, targets: Sequence[Target]) -> dict[str, int]:
    names = [name for _, _, inventory in targets for name in inventory]
    found = catalog.ids_by_name(conn, catalog.RESOURCE_CLASSES, names, state.standard_classes)
    for name in names:
        if name not in found:
            raise errors.BadRequest(f"{MALFORMED}No such resource class {name}.")
    return found


def _store(conn: Connection, provider: Provider, records: dict[str, Inventory], class_ids: dict[str, int]) -> None:
    now = util.utcnow()
    inventories.replace(conn, provider.id, records, class_ids, now)
    providers.bump_generation(conn, provider.id, None, now)


def _write_allocations(state: PlacementState, conn: Connection, requests: list[ConsumerAllocations]) -> None:
    """Step 4."""
    if not requests:
        return
    try:
        allocation_db.replace(conn, requests, state.standard_classes, util.utcnow(), id_cache(state))
    except allocation_rules.UnknownResourceClass as problem:
        raise errors.BadRequest(f"{MALFORMED}{problem.message}") from None


def _set_final(
    state: PlacementState, conn: Connection, targeted: list[tuple[Provider, dict[str, Inventory]]],
    class_ids: dict[str, int], version: tuple[int, int],
) -> None:
    """Step 5: upstream's in-use rule for every provider, then Corral's own rules."""
    try:
        for provider, inventory in targeted:
            inventory_rules.check_in_use(
                provider.uuid, inventories.usage(conn, provider.id), inventory, refuse_below_usage=False
            )
            _store(conn, provider, inventory, class_ids)
        for provider, inventory in targeted:
            # Corral refuses a reserved amount above the total here as on every other inventory write.
            for name, record in inventory.items():
                inventory_rules.check_capacity(provider.uuid, name, record, version)
            if state.conf.placement.refuse_inventory_below_usage:
                inventory_rules.check_in_use(
                    provider.uuid, inventories.usage(conn, provider.id), inventory, refuse_below_usage=True
                )
    except inventory_rules.InventoryInUse as problem:
        raise errors.Conflict(f"update conflict: {problem.message}", code=codes.INVENTORY_INUSE) from None


def _set_interim(
    state: PlacementState, conn: Connection, targeted: list[tuple[Provider, dict[str, Inventory]]],
    class_ids: dict[str, int],
) -> None:
    """Step 3: current and new records together, wherever the new inventory is not empty."""
    for provider, inventory in targeted:
        if inventory:
            current = inventories.for_provider(conn, provider.id)
            current_ids = catalog.ids_by_name(conn, catalog.RESOURCE_CLASSES, list(current), state.standard_classes)
            _store(conn, provider, {**current, **inventory}, {**current_ids, **class_ids})


def reshape(state: PlacementState, req: falcon.Request, resp: falcon.Response) -> None:
    util.authorize(state, req, "placement:reshaper:reshape")
    body = util.json_body(state, req, state.schema("reshaper.post"))
    requests = [
        consumer_request(state, req, consumer_uuid, section) for consumer_uuid, section in body["allocations"].items()
    ]
    targets: list[Target] = [
        (uuid, section["resource_provider_generation"], from_records(section["inventories"]))
        for uuid, section in body["inventories"].items()
    ]
    version = (req.context.version.major, req.context.version.minor)

    def work(conn: Connection) -> None:
        checked = _providers_at_generation(conn, targets)
        targeted = [(provider, inventory) for provider, (_, _, inventory) in zip(checked, targets)]
        _check_consumers(conn, requests)
        class_ids = _class_ids(state, conn, targets)
        _set_interim(state, conn, targeted, class_ids)
        _write_allocations(state, conn, requests)
        _set_final(state, conn, targeted, class_ids, version)

    state.db.write(work)
    send_empty(resp)


ROUTES = [Route("/reshaper", {"POST": Endpoint(reshape, min_version=INTRODUCED)})]
