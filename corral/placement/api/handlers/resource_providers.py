"""/resource_providers: create, list, show, update, delete."""

from __future__ import annotations

import uuid as uuidlib
from typing import Any

import falcon
from sqlalchemy.engine import Connection

from corral.core import errors
from corral.core.http import Route, send_empty
from corral.placement.api import query, util
from corral.placement.api.state import PlacementState
from corral.placement.db import provider_filters, providers
from corral.placement.db.providers import Provider

# Microversions that change this resource.
LINK_AGGREGATES = (1, 1)
LINK_TRAITS = (1, 6)
LINK_ALLOCATIONS = (1, 11)
NESTED = (1, 14)
POST_RETURNS_BODY = (1, 20)
REPARENT = (1, 37)


def provider_body(req: falcon.Request, provider: Provider) -> dict[str, Any]:
    base = f"/resource_providers/{provider.uuid}"
    context = req.context
    links = [
        {"rel": "self", "href": util.url(req, base)},
        {"rel": "inventories", "href": util.url(req, base + "/inventories")},
        {"rel": "usages", "href": util.url(req, base + "/usages")},
    ]
    if context.at_least(*LINK_AGGREGATES):
        links.append({"rel": "aggregates", "href": util.url(req, base + "/aggregates")})
    if context.at_least(*LINK_TRAITS):
        links.append({"rel": "traits", "href": util.url(req, base + "/traits")})
    if context.at_least(*LINK_ALLOCATIONS):
        links.append({"rel": "allocations", "href": util.url(req, base + "/allocations")})
    body: dict[str, Any] = {"uuid": provider.uuid, "name": provider.name, "generation": provider.generation}
    if context.at_least(*NESTED):
        body["parent_provider_uuid"] = provider.parent_uuid
        body["root_provider_uuid"] = provider.root_uuid
    body["links"] = links
    return body


def list_providers(state: PlacementState, req: falcon.Request, resp: falcon.Response) -> None:
    util.authorize(state, req, "placement:resource_providers:list")
    wanted = query.parse_provider_filter(query.query_pairs(req.query_string), req.context.version)
    with state.db.read() as conn:
        id_query = provider_filters.provider_id_query(
            conn, wanted, standard_classes=state.standard_classes, standard_traits=state.standard_traits
        )
        found = providers.list_providers(conn, id_query)
    body = {"resource_providers": [provider_body(req, provider) for provider in found]}
    util.send_cacheable(req, resp, body, util.newest(*(p.modified for p in found)))


def _action_failed(action: str, reason: str) -> str:
    # The reason wording clients see from upstream's object layer.
    return f"Object action {action} failed because: {reason}"


def _parent(conn: Connection, parent_uuid: str | None, action: str = "create") -> Provider | None:
    """The parent named by ``parent_uuid``; ValueError with the reason when it does not exist."""
    if parent_uuid is None:
        return None
    parent = providers.get(conn, parent_uuid)
    if parent is None:
        raise ValueError(_action_failed(action, "parent provider UUID does not exist."))
    return parent


def create_provider(state: PlacementState, req: falcon.Request, resp: falcon.Response) -> None:
    util.authorize(state, req, "placement:resource_providers:create")
    body = util.json_body(state, req, state.schema("resource_providers.post"))
    # A dashless or upper-case uuid names the same provider as its canonical form.
    new_uuid = str(uuidlib.UUID(body["uuid"])) if body.get("uuid") else str(uuidlib.uuid4())
    now = util.utcnow()

    def work(conn: Connection) -> Provider:
        parent_uuid = body.get("parent_provider_uuid")
        try:
            if not body["name"]:
                raise ValueError(_action_failed("create", "name is required"))
            if parent_uuid is not None and parent_uuid == new_uuid:
                raise ValueError(_action_failed(
                    "create", "parent provider UUID cannot be same as UUID. "
                    "Please set parent provider UUID to None if there is no parent."))
            parent = _parent(conn, parent_uuid)
        except ValueError as problem:
            raise errors.BadRequest(f'Unable to create resource provider "{body["name"]}", {new_uuid}: {problem}')
        providers.create(conn, uuid=new_uuid, name=body["name"], parent=parent, now=now)
        return providers.get_or_404(conn, new_uuid)

    created = state.db.write(work)
    util.set_location(req, resp, f"/resource_providers/{created.uuid}")
    if req.context.at_least(*POST_RETURNS_BODY):
        util.send_cacheable(req, resp, provider_body(req, created), created.modified)
    else:
        send_empty(resp, 201)


def show_provider(state: PlacementState, req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
    util.authorize(state, req, "placement:resource_providers:show")
    with state.db.read() as conn:
        provider = providers.get_or_404(conn, uuid)
    util.send_cacheable(req, resp, provider_body(req, provider), provider.modified)


def _check_parent_change(req: falcon.Request, provider: Provider, parent: Provider | None) -> None:
    if req.context.at_least(*REPARENT) or provider.parent_id is None:
        return
    if parent is None:
        raise ValueError(_action_failed("update", "un-parenting a provider is not currently allowed."))
    raise ValueError(_action_failed("update", "re-parenting a provider is not currently allowed."))


def update_provider(state: PlacementState, req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
    util.authorize(state, req, "placement:resource_providers:update")
    body = util.provider_json_body(state, req, state.schema("resource_providers.put"), uuid)
    now = util.utcnow()

    def work(conn: Connection) -> Provider:
        provider = providers.get_or_404(conn, uuid)
        if body["name"] != provider.name:
            providers.rename(conn, provider, body["name"], now)
        if "parent_provider_uuid" in body and body["parent_provider_uuid"] != provider.parent_uuid:
            try:
                # Upstream names the action "create" for a missing parent here too.
                parent = _parent(conn, body["parent_provider_uuid"])
                _check_parent_change(req, provider, parent)
            except ValueError as problem:
                raise errors.BadRequest(f"Unable to save resource provider {uuid}: {problem}")
            try:
                providers.set_parent(conn, provider, parent, now)
            except errors.BadRequest as problem:
                raise errors.BadRequest(
                    f"Unable to save resource provider {uuid}: {_action_failed('update', problem.message)}"
                )
        return providers.get_or_404(conn, uuid)

    updated = state.db.write(work)
    util.send_cacheable(req, resp, provider_body(req, updated), updated.modified)


def delete_provider(state: PlacementState, req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
    util.authorize(state, req, "placement:resource_providers:delete")

    def work(conn: Connection) -> None:
        provider = providers.get(conn, uuid)
        if provider is None:
            raise errors.NotFound(
                f"No resource provider with uuid {uuid} found for delete"
            )
        providers.delete(conn, provider)

    state.db.write(work)
    send_empty(resp)


ROUTES = [
    Route("/resource_providers", {"GET": list_providers, "POST": create_provider}),
    Route(
        "/resource_providers/{uuid}",
        {"GET": show_provider, "PUT": update_provider, "DELETE": delete_provider},
    ),
]
