"""Node traits (1.37): /v1/nodes/{node}/traits."""

from __future__ import annotations

import falcon

from corral.baremetal.api import common, schemas, views
from corral.baremetal.api.state import BaremetalState
from corral.core.errors import BadRequest, NotFound
from corral.core.http import Endpoint, Route, send_empty, send_json

TRAITS_VERSION = (1, 37)
MAX_TRAITS = 50


def _invalid(trait: object, what: str) -> BadRequest:
    return BadRequest(
        f"Schema error for {what}: {trait!r} is not valid under any of the given schemas. Possible root cause: "
        f"{trait!r} does not match '{schemas.TRAIT_PATTERN}'"
    )


def get_traits(state: BaremetalState, req: falcon.Request, resp: falcon.Response, node_ident: str) -> None:
    node = common.find_node(state, req, node_ident)
    common.authorize(state, req, "baremetal:node:traits:list", node)
    send_json(resp, {"traits": common.traits_of(state, [node["id"]])[node["id"]]})


def set_traits(state: BaremetalState, req: falcon.Request, resp: falcon.Response, node_ident: str) -> None:
    node = common.find_node(state, req, node_ident)
    common.authorize(state, req, "baremetal:node:traits:set", node)
    body = common.json_body(state, req)
    if not isinstance(body, dict) or set(body) != {"traits"} or not isinstance(body["traits"], list):
        raise BadRequest("Schema error for body: the body must be {\"traits\": [...]}")
    for trait in body["traits"]:
        if not schemas.is_valid_trait(trait):
            raise _invalid(trait, "body")
    if len(set(body["traits"])) > MAX_TRAITS:
        raise BadRequest(f"Could not modify traits for node {node['uuid']}: a node can have at most "
                         f"{MAX_TRAITS} traits.")
    common.conductor_call(state, node, "set_traits", traits=list(body["traits"]))
    send_empty(resp, 204)


def add_trait(state: BaremetalState, req: falcon.Request, resp: falcon.Response, node_ident: str,
              trait: str) -> None:
    node = common.find_node(state, req, node_ident)
    common.authorize(state, req, "baremetal:node:traits:set", node)
    if not schemas.is_valid_trait(trait):
        raise _invalid(trait, "trait")
    existing = common.traits_of(state, [node["id"]])[node["id"]]
    if trait not in existing and len(existing) >= MAX_TRAITS:
        raise BadRequest(f"Could not modify traits for node {node['uuid']}: a node can have at most "
                         f"{MAX_TRAITS} traits.")
    common.conductor_call(state, node, "add_trait", trait=trait)
    resp.set_header("Location", f"{views.links.base(req)}/v1/nodes/{node_ident}/traits/{trait}")
    send_empty(resp, 204)


def remove_traits(state: BaremetalState, req: falcon.Request, resp: falcon.Response, node_ident: str) -> None:
    node = common.find_node(state, req, node_ident)
    common.authorize(state, req, "baremetal:node:traits:delete", node)
    common.conductor_call(state, node, "set_traits", traits=[])
    send_empty(resp, 204)


def remove_trait(state: BaremetalState, req: falcon.Request, resp: falcon.Response, node_ident: str,
                 trait: str) -> None:
    node = common.find_node(state, req, node_ident)
    common.authorize(state, req, "baremetal:node:traits:delete", node)
    if not common.conductor_call(state, node, "remove_trait", trait=trait):
        raise NotFound(f"Node {node['uuid']} doesn't have a trait '{trait}'")
    send_empty(resp, 204)


def _v(handler: object) -> Endpoint:
    return Endpoint(handler, min_version=TRAITS_VERSION)  # type: ignore[arg-type]


ROUTES = [
    Route("/v1/nodes/{node_ident}/traits", {"GET": _v(get_traits), "PUT": _v(set_traits),
                                           "DELETE": _v(remove_traits)}),
    Route("/v1/nodes/{node_ident}/traits/{trait}", {"PUT": _v(add_trait), "DELETE": _v(remove_trait)}),
]
