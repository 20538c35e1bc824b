"""/resource_providers/{uuid}/inventories[/{resource_class}]."""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from typing import Any

import falcon
from sqlalchemy.engine import Connection

from corral.core import errors
from corral.core.http import Endpoint, Route, send_empty
from corral.placement.api import errors as codes
from corral.placement.api import util
from corral.placement.api.state import PlacementState
from corral.placement.db import catalog, inventories, providers
from corral.placement.db.providers import Provider
from corral.placement.domain import inventory as rules
from corral.placement.domain.inventory import Inventory

# Upstream's reads of inventories word a missing provider with a space before the colon.
_PROVIDER_SPACED = "No resource provider with uuid {uuid} found "
_CLASS_NAME = re.compile(r"^[A-Z0-9_]+$")
# Stands for a record under a name that is no resource class (refused later).
_UNCHECKED = Inventory(total=1)

DELETE_ALL = (1, 5)


def _version(req: falcon.Request) -> tuple[int, int]:
    return (req.context.version.major, req.context.version.minor)


def _one_body(inventory: Inventory, generation: int) -> dict[str, Any]:
    return {**inventory.as_dict(), "resource_provider_generation": generation}


def _all_body(found: Mapping[str, Inventory], generation: int) -> dict[str, Any]:
    return {
        "inventories": {name: inventory.as_dict() for name, inventory in found.items()},
        "resource_provider_generation": generation,
    }


def from_records(records: Mapping[str, Any]) -> dict[str, Inventory]:
    """A PUT's inventories by class name.

    The schema (upstream's) leaves records under names that cannot be
    resource classes unchecked: whatever they hold, those names are refused
    later as unknown classes.
    """
    return {
        name: rules.from_request(data) if _CLASS_NAME.match(name) else _UNCHECKED for name, data in records.items()
    }


def _class_ids(
    state: PlacementState,
    conn: Connection,
    provider: Provider,
    names: list[str],
    prefix: str = "Unknown resource class in inventory for resource provider",
) -> dict[str, int]:
    found = catalog.ids_by_name(conn, catalog.RESOURCE_CLASSES, names, state.standard_classes)
    missing = sorted(set(names) - set(found))
    if missing:
        raise errors.BadRequest(f"{prefix} {provider.uuid}: No such resource class {missing[0]}.")
    return found


def _replace(
    state: PlacementState,
    conn: Connection,
    req: falcon.Request,
    provider: Provider,
    new: dict[str, Inventory],
    generation: int | None,
    action: str = "update",
    changed: Collection[str] | None = None,
) -> int:
    """Validate and store ``new`` as the provider's whole inventory; the new generation.

    Only the ``changed`` classes (all when None) have their capacity checked
    at this request's microversion: records written earlier, under another
    microversion's rule, stay as they are.
    """
    # Upstream's order: a stale generation, then capacity, then unknown classes.
    now = util.utcnow()
    new_generation = providers.bump_generation(conn, provider.id, generation, now)
    for name, inventory in new.items():
        if changed is None or name in changed:
            rules.check_capacity(provider.uuid, name, inventory, _version(req), action)
    class_ids = _class_ids(state, conn, provider, list(new))
    rules.check_in_use(
        provider.uuid,
        inventories.usage(conn, provider.id),
        new,
        refuse_below_usage=state.conf.placement.refuse_inventory_below_usage,
    )
    inventories.replace(conn, provider.id, new, class_ids, now)
    return new_generation


def list_inventories(state: PlacementState, req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
    util.authorize(state, req, "placement:resource_providers:inventories:list")
    with state.db.read() as conn:
        provider = providers.get_or_404(conn, uuid, context=_PROVIDER_SPACED)
        found = inventories.for_provider(conn, provider.id)
    util.send_cacheable(
        req, resp, _all_body(found, provider.generation), provider.modified, modified_known=bool(found)
    )


def replace_inventories(state: PlacementState, req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
    util.authorize(state, req, "placement:resource_providers:inventories:update")
    body = util.provider_json_body(state, req, state.schema("inventories.put_all"), uuid)
    new = from_records(body["inventories"])

    def work(conn: Connection) -> int:
        provider = providers.get_or_404(conn, uuid)
        try:
            return _replace(state, conn, req, provider, new, body["resource_provider_generation"])
        except rules.InventoryInUse as problem:
            raise errors.Conflict(f"update conflict: {problem.message}", code=codes.INVENTORY_INUSE) from None

    generation = state.db.write(work)
    util.send_cacheable(req, resp, _all_body(new, generation), util.utcnow())


def create_inventory(state: PlacementState, req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
    util.authorize(state, req, "placement:resource_providers:inventories:create")
    body = util.provider_json_body(state, req, state.schema("inventories.post"), uuid)
    name = body["resource_class"]
    added = rules.from_request(body)

    def work(conn: Connection) -> int:
        provider = providers.get_or_404(conn, uuid)
        current = inventories.for_provider(conn, provider.id)
        _class_ids(state, conn, provider, [name], prefix="Unable to create inventory for resource provider")
        if name in current:
            raise errors.Conflict(
                f"Update conflict: Inventory for '{name}' on resource provider '{uuid}' already exists."
            )
        # Like upstream, a generation in the body is accepted but not compared.
        return _replace(state, conn, req, provider, {**current, name: added}, None, action="create", changed={name})

    generation = state.db.write(work)
    util.set_location(req, resp, f"/resource_providers/{uuid}/inventories/{name}")
    util.send_cacheable(req, resp, _one_body(added, generation), util.utcnow(), status=201)


def _no_inventory(uuid: str, name: str) -> errors.NotFound:
    return errors.NotFound(f"No inventory of class {name} for {uuid}")


def show_inventory(
    state: PlacementState, req: falcon.Request, resp: falcon.Response, uuid: str, resource_class: str
) -> None:
    util.authorize(state, req, "placement:resource_providers:inventories:show")
    with state.db.read() as conn:
        provider = providers.get_or_404(conn, uuid, context=_PROVIDER_SPACED)
        found = inventories.for_provider(conn, provider.id)
    if resource_class not in found:
        raise _no_inventory(uuid, resource_class)
    util.send_cacheable(req, resp, _one_body(found[resource_class], provider.generation), provider.modified)


def update_inventory(
    state: PlacementState, req: falcon.Request, resp: falcon.Response, uuid: str, resource_class: str
) -> None:
    util.authorize(state, req, "placement:resource_providers:inventories:update")
    body = util.provider_json_body(state, req, state.schema("inventories.put_one"), uuid)
    changed = rules.from_request(body)

    def work(conn: Connection) -> int:
        provider = providers.get_or_404(conn, uuid)
        # Upstream's order: stale generation, then capacity, then the record.
        if body["resource_provider_generation"] != provider.generation:
            raise providers.generation_conflict()
        rules.check_capacity(provider.uuid, resource_class, changed, _version(req))
        current = inventories.for_provider(conn, provider.id)
        if resource_class not in current:
            if not catalog.ids_by_name(conn, catalog.RESOURCE_CLASSES, [resource_class], state.standard_classes):
                raise errors.NotFound(f"No such resource class {resource_class}.")
            raise errors.BadRequest(
                f"No inventory record with resource class for resource provider {uuid}: "
                f"No inventory of class {resource_class} found."
            )
        new = {**current, resource_class: changed}
        return _replace(state, conn, req, provider, new, body["resource_provider_generation"], changed=())

    generation = state.db.write(work)
    util.send_cacheable(req, resp, _one_body(changed, generation), util.utcnow())


def delete_inventory(
    state: PlacementState, req: falcon.Request, resp: falcon.Response, uuid: str, resource_class: str
) -> None:
    util.authorize(state, req, "placement:resource_providers:inventories:delete")

    def work(conn: Connection) -> None:
        provider = providers.get_or_404(conn, uuid)
        current = inventories.for_provider(conn, provider.id)
        if resource_class not in current:
            missing = f"No inventory of class {resource_class} found for delete"
            if not catalog.ids_by_name(conn, catalog.RESOURCE_CLASSES, [resource_class], state.standard_classes):
                raise errors.NotFound(f"{missing}: No such resource class {resource_class}.")
            raise errors.NotFound(f"{missing}: {missing}")
        rest = {name: inv for name, inv in current.items() if name != resource_class}
        try:
            _replace(state, conn, req, provider, rest, None, changed=())
        except rules.InventoryInUse as problem:
            # Upstream's wording; its code here is placement.concurrent_update, which
            # invites a retry that cannot succeed, so this keeps the in-use code.
            raise errors.Conflict(
                f"Unable to delete inventory of class {resource_class}: {problem.message}",
                code=codes.INVENTORY_INUSE,
            ) from None

    state.db.write(work)
    send_empty(resp)


def delete_inventories(state: PlacementState, req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
    util.authorize(state, req, "placement:resource_providers:inventories:delete")

    def work(conn: Connection) -> None:
        provider = providers.get_or_404(conn, uuid)
        _replace(state, conn, req, provider, {}, None, changed=())

    state.db.write(work)
    send_empty(resp)


def _delete_all_not_yet(state: PlacementState, req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
    # Upstream answers 405 (not 404) before the method existed.
    raise errors.MethodNotAllowed("")


ROUTES = [
    Route(
        "/resource_providers/{uuid}/inventories",
        {
            "GET": list_inventories,
            "POST": create_inventory,
            "PUT": replace_inventories,
            "DELETE": [
                Endpoint(_delete_all_not_yet, max_version=(1, 4)),
                Endpoint(delete_inventories, min_version=DELETE_ALL),
            ],
        },
    ),
    Route(
        "/resource_providers/{uuid}/inventories/{resource_class}",
        {"GET": show_inventory, "PUT": update_inventory, "DELETE": delete_inventory},
    ),
]
