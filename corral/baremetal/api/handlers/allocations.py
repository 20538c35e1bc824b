"""Allocations (1.52): /v1/allocations and /v1/nodes/{node}/allocation.

Creating an allocation goes to a live conductor chosen at random, which
stores it (state ``allocating``) and processes it in a worker thread; the
response is the allocation as stored, before any processing.
"""

from __future__ import annotations

import datetime
import re
from typing import Any
from urllib.parse import urlencode

import falcon
import jsonschema
from oslo_utils import uuidutils

from corral.baremetal.api import common, links, schemas, views
from corral.baremetal.api.state import BaremetalState
from corral.baremetal.conductor import allocations as conductor_allocations
from corral.baremetal.db import allocations as allocation_db
from corral.baremetal.db import nodes as node_db
from corral.baremetal.domain import allocations as domain
from corral.core.errors import ApiError, BadRequest, Conflict, MethodNotAllowed, NotFound
from corral.core.db import is_duplicate
from corral.core.http import Route, send_empty, send_json

ALLOCATIONS_VERSION = (1, 52)
UPDATE_VERSION = (1, 57)
OWNER_VERSION = (1, 60)
BACKFILL_VERSION = (1, 58)
PATCHABLE = ("name", "extra")

NOT_ALLOWED = "The API version does not allow allocations"

_UUID_RE = re.compile(schemas.UUID_PATTERN)


def _require_version(req: falcon.Request) -> None:
    if not req.context.at_least(*ALLOCATIONS_VERSION):
        if req.method in ("GET", "HEAD"):
            raise NotFound(NOT_ALLOWED)
        raise MethodNotAllowed(NOT_ALLOWED)


def _authorize(state: BaremetalState, req: falcon.Request, rule: str,
               allocation: dict[str, Any] | None = None) -> None:
    target = {"allocation.owner": (allocation or {}).get("owner") or ""}
    state.policy.authorize(req.context, rule, target)


# ------------------------------------------------------------- views


def _visible_fields(req: falcon.Request) -> list[str]:
    return [field for field in domain.FIELDS
            if field not in domain.FIELD_VERSIONS or req.context.at_least(*domain.FIELD_VERSIONS[field])]


def _parse_fields(req: falcon.Request) -> list[str] | None:
    raw = req.get_param("fields")
    if raw is None:
        return None
    allowed = _visible_fields(req)
    fields = [field.strip() for field in raw.split(",") if field.strip()]
    for field in fields:
        if field not in allowed:
            choices = sorted(field for field in allowed if field != "owner")
            if "owner" in allowed:
                choices.append("owner")
            raise BadRequest(f"Schema error: {field!r} is not one of {choices}")
    return fields


def _timestamp(value: Any) -> str | None:
    if isinstance(value, datetime.datetime):
        return views.timestamp(value)
    return value


def allocation_body(req: falcon.Request, allocation: dict[str, Any], fields: list[str] | None = None) -> dict[str, Any]:
    wanted = None if fields is None else {*fields, "links"}
    body: dict[str, Any] = {}
    for field in _visible_fields(req):
        if wanted is not None and field not in wanted:
            continue
        if field == "links":
            body[field] = links.resource(req, "allocations", allocation["uuid"])
        elif field in ("created_at", "updated_at"):
            body[field] = _timestamp(allocation.get(field))
        elif field in allocation_db.JSON_DEFAULTS:
            body[field] = allocation.get(field) or type(allocation_db.JSON_DEFAULTS[field])()
        else:
            body[field] = allocation.get(field)
    return body


# ------------------------------------------------------------ lookup


def find_allocation(state: BaremetalState, req: falcon.Request, ident: str) -> dict[str, Any]:
    with state.db.read() as conn:
        if uuidutils.is_uuid_like(ident):
            allocation = allocation_db.get(conn, uuid=ident)
        elif domain.is_valid_name(ident):
            allocation = allocation_db.get(conn, name=ident)
        else:
            raise BadRequest(f"Expected a logical name or UUID but received {ident}.")
    if allocation is None or not _can_see(req, allocation):
        raise NotFound(f"Allocation {ident} could not be found.")
    return allocation


def _can_see(req: falcon.Request, allocation: dict[str, Any]) -> bool:
    context = req.context
    return context.is_admin or (context.project_id is not None and allocation.get("owner") == context.project_id)


# -------------------------------------------------------- conductors


def _call_any_conductor(state: BaremetalState, method: str, **params: Any) -> Any:
    """Call ``method`` on a live conductor chosen at random (another one if it cannot be reached)."""
    return state.rpc.call_any(method, **params)


# ------------------------------------------------------------ create


def _schema(req: falcon.Request) -> dict[str, Any]:
    name_or_uuid = {"anyOf": [{"type": "string", "format": "uuid"},
                              {"type": "string", "pattern": schemas.NAME_PATTERN, "maxLength": 255}]}
    properties: dict[str, Any] = {
        "candidate_nodes": {"type": ["array", "null"], "items": name_or_uuid},
        "extra": {"type": ["object", "null"]},
        "name": {"type": ["string", "null"]},
        "resource_class": {"type": ["string", "null"], "maxLength": 80},
        "traits": {"type": ["array", "null"], "items": {"type": "string"}},
        "uuid": {"type": ["string", "null"]},
    }
    if req.context.at_least(*BACKFILL_VERSION):
        properties["node"] = {"type": ["string", "null"]}
    if req.context.at_least(*OWNER_VERSION):
        properties["owner"] = {"type": ["string", "null"], "maxLength": 255}
    return {"type": "object", "properties": properties, "additionalProperties": False}


_FORMATS = jsonschema.FormatChecker()


@_FORMATS.checks("uuid")
def _is_uuid(value: object) -> bool:
    return isinstance(value, str) and _UUID_RE.match(value) is not None


def _validate(req: falcon.Request, body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise BadRequest(f"Schema error: {body!r} is not of type 'object'")
    if "owner" in body and not req.context.at_least(*OWNER_VERSION):
        raise ApiError("Request not acceptable.", status=406)
    validator = jsonschema.Draft4Validator(_schema(req), format_checker=_FORMATS)
    error = jsonschema.exceptions.best_match(validator.iter_errors(body))
    if error is not None:
        message = error.message
        if error.context:
            cause = jsonschema.exceptions.best_match(error.context)
            message += f". Possible root cause: {cause.message}" if cause is not None else ""
        raise BadRequest(f"Schema error: {message}")
    for trait in body.get("traits") or []:
        if not schemas.is_valid_trait(trait):
            raise BadRequest(
                f"Schema error: {trait!r} is not valid under any of the given schemas. Possible root cause: "
                f"{trait!r} does not match '{schemas.TRAIT_PATTERN}'"
            )
    if body.get("uuid") is not None and not _is_uuid(body["uuid"]):
        raise BadRequest(f"Schema error: {body['uuid']!r} is not a 'uuid'")
    if not body.get("resource_class") and not body.get("node"):
        raise BadRequest("The resource_class field is mandatory when not backfilling")
    name = body.get("name")
    if name is not None and not domain.is_valid_name(name):
        raise BadRequest(f"Cannot create allocation with invalid name '{name}'")
    return body


def create(state: BaremetalState, req: falcon.Request, resp: falcon.Response) -> None:
    _require_version(req)
    body = _validate(req, common.json_body(state, req))
    _authorize(state, req, "baremetal:allocation:create", body)
    if body.get("node"):
        _backfill(state, req, resp, body)
        return
    allocation_uuid = body.get("uuid") or uuidutils.generate_uuid()
    with state.db.read() as conn:
        candidates, missing = conductor_allocations.candidate_uuids(conn, body.get("candidate_nodes") or [])
        associated = node_db.list_nodes(conn, {"instance_uuid": allocation_uuid}, limit=1)
        existing = allocation_db.get(conn, uuid=allocation_uuid)
    if missing:
        raise BadRequest(f"Nodes cannot be found: {', '.join(missing)}")
    if existing is not None:
        # An active allocation's UUID is also its node's instance UUID: name the allocation.
        raise Conflict(f"An allocation with UUID {allocation_uuid} already exists.")
    if associated:
        raise Conflict(f"Instance {allocation_uuid} is already associated with node {associated[0]['uuid']}.")
    owner = body.get("owner")
    if owner is None and not req.context.is_admin:
        owner = req.context.project_id  # a project's allocation is its own
    values = {
        "uuid": allocation_uuid,
        "name": body.get("name"),
        "resource_class": body["resource_class"],
        "candidate_nodes": candidates,
        "extra": body.get("extra") or {},
        "owner": owner,
    }
    traits = list(dict.fromkeys(body.get("traits") or []))
    created = _call_any_conductor(state, "create_allocation", values=values, traits=traits)
    allocation = {
        **values, **created, "traits": traits, "state": domain.ALLOCATING, "updated_at": None,
        "last_error": None, "node_uuid": None,
    }
    resp.set_header("Location", f"{links.base(req)}/v1/allocations/{allocation_uuid}")
    send_json(resp, allocation_body(req, allocation), 201)


def _backfill(state: BaremetalState, req: falcon.Request, resp: falcon.Response, body: dict[str, Any]) -> None:
    """An allocation for a node deployed without one (1.58), recorded at once.

    Upstream answers a node that does not fit with a 500 and keeps an
    allocation in ``error``; Corral refuses it (400) and stores nothing.
    """
    try:
        node = common.find_node(state, req, body["node"])
    except NotFound:
        raise BadRequest(f"Node {body['node']} could not be found.") from None
    with state.db.read() as conn:
        candidates, missing = conductor_allocations.candidate_uuids(conn, body.get("candidate_nodes") or [])
    if missing:
        raise BadRequest(f"Nodes cannot be found: {', '.join(missing)}")
    owner = body.get("owner")
    if owner is None and not req.context.is_admin:
        owner = req.context.project_id
    values = {
        "uuid": node.get("instance_uuid") or body.get("uuid") or uuidutils.generate_uuid(),
        "name": body.get("name"),
        "resource_class": body.get("resource_class"),
        "candidate_nodes": candidates,
        "extra": body.get("extra") or {},
        "owner": owner,
    }
    traits = list(dict.fromkeys(body.get("traits") or []))
    allocation_id = common.conductor_call(state, node, "backfill_allocation", values=values, traits=traits)
    with state.db.read() as conn:
        allocation = allocation_db.get(conn, allocation_id=allocation_id)
    assert allocation is not None
    resp.set_header("Location", f"{links.base(req)}/v1/allocations/{allocation['uuid']}")
    send_json(resp, allocation_body(req, allocation), 201)


# ------------------------------------------------------------- update


def update(state: BaremetalState, req: falcon.Request, resp: falcon.Response, allocation_ident: str) -> None:
    _require_version(req)
    if not req.context.at_least(*UPDATE_VERSION):
        raise MethodNotAllowed("The API version does not allow updating allocations")
    allocation = find_allocation(state, req, allocation_ident)
    _authorize(state, req, "baremetal:allocation:update", allocation)
    operations = common.json_body(state, req)
    schemas.validate(schemas.PATCH, operations, "patch")
    for operation in operations:
        if operation["path"].split("/")[1] not in PATCHABLE:
            raise BadRequest(f"Cannot patch {operation['path']}. Only the following can be updated: "
                             f"{', '.join(PATCHABLE)}")
        if operation["path"] == "/name" and operation.get("value") and not domain.is_valid_name(operation["value"]):
            raise BadRequest(f"Cannot update allocation with invalid name '{operation['value']}'")
    from corral.baremetal.api.handlers.nodes import apply_patch

    patched = apply_patch({"name": allocation["name"], "extra": dict(allocation["extra"] or {})}, operations)
    if not isinstance(patched.get("extra") or {}, dict):
        raise BadRequest(f"Schema error: {patched['extra']!r} is not of type 'object'")
    if patched.get("name") is not None and not isinstance(patched["name"], str):
        raise BadRequest(f"Schema error: {patched['name']!r} is not of type 'string'")
    values = {"name": patched.get("name"), "extra": patched.get("extra") or {}}
    try:
        state.db.write(lambda conn: allocation_db.update(conn, allocation["id"], values))
    except Exception as error:
        if is_duplicate(error):
            raise Conflict(f"An allocation with name {values['name']} already exists.") from None
        raise
    with state.db.read() as conn:
        updated = allocation_db.get(conn, allocation_id=allocation["id"])
    if updated is None:
        raise NotFound(f"Allocation {allocation_ident} could not be found.")
    send_json(resp, allocation_body(req, updated))


# -------------------------------------------------------------- list


def _list_filters(state: BaremetalState, req: falcon.Request) -> dict[str, Any]:
    filters: dict[str, Any] = {}
    allocation_state = req.get_param("state")
    if allocation_state is not None:
        filters["state"] = allocation_state
    resource_class = req.get_param("resource_class")
    if resource_class is not None:
        if len(resource_class) > domain.MAX_RESOURCE_CLASS_LENGTH:
            raise BadRequest(f"Invalid resource class: {resource_class!r} is longer than "
                             f"{domain.MAX_RESOURCE_CLASS_LENGTH} characters.")
        filters["resource_class"] = resource_class
    node_ident = req.get_param("node")
    if node_ident is not None:
        with state.db.read() as conn:
            node = node_db.get(conn, uuid=node_ident) if uuidutils.is_uuid_like(node_ident) else None
            node = node or node_db.get(conn, name=node_ident)
        if node is None or not common.can_see(req, node):
            raise BadRequest(f"Node {node_ident} could not be found.")
        filters["node_id"] = node["id"]
    owner = req.get_param("owner")
    if owner is not None:
        if not req.context.at_least(*OWNER_VERSION):
            raise views.not_acceptable(OWNER_VERSION)
        filters["owner"] = owner
    if not req.context.is_admin:
        if "owner" in filters and filters["owner"] != req.context.project_id:
            raise ApiError("Access was denied to the allocations of another project.", status=403)
        filters["owner"] = req.context.project_id or ""
    return filters


def list_allocations(state: BaremetalState, req: falcon.Request, resp: falcon.Response) -> None:
    _require_version(req)
    _authorize(state, req, "baremetal:allocation:list")
    fields = _parse_fields(req)
    filters = _list_filters(state, req)
    limit, sort_key, sort_dir, marker = common.paging(
        state, req, sort_keys=allocation_db.SORT_KEYS,
        find_marker=lambda conn, uuid: allocation_db.get(conn, uuid=uuid), kind="Allocation",
    )
    with state.db.read() as conn:
        found = allocation_db.list_allocations(conn, filters, sort_key=sort_key, sort_dir=sort_dir, limit=limit,
                                               marker=marker)
    body: dict[str, Any] = {"allocations": [allocation_body(req, item, fields) for item in found]}
    if found and len(found) == limit:
        query = {"sort_key": sort_key, "sort_dir": sort_dir}
        if fields is not None:
            query["fields"] = ",".join(fields)
        query["limit"] = str(limit)
        query["marker"] = found[-1]["uuid"]
        body["next"] = f"{links.base(req)}/v1/allocations?{urlencode(query, safe=',')}"
    send_json(resp, body)


# ------------------------------------------------------ show, delete


def show(state: BaremetalState, req: falcon.Request, resp: falcon.Response, allocation_ident: str) -> None:
    _require_version(req)
    fields = _parse_fields(req)
    allocation = find_allocation(state, req, allocation_ident)
    _authorize(state, req, "baremetal:allocation:get", allocation)
    send_json(resp, allocation_body(req, allocation, fields))


def delete(state: BaremetalState, req: falcon.Request, resp: falcon.Response, allocation_ident: str) -> None:
    _require_version(req)
    allocation = find_allocation(state, req, allocation_ident)
    _authorize(state, req, "baremetal:allocation:delete", allocation)
    _call_any_conductor(state, "destroy_allocation", allocation_id=allocation["id"])
    send_empty(resp, 204)


# ------------------------------------------------- node's allocation


def _node_allocation(state: BaremetalState, req: falcon.Request, node_ident: str) -> dict[str, Any]:
    if not req.context.at_least(*ALLOCATIONS_VERSION):
        # Upstream's node router aborts before its version hook: a bare 404
        # for every method, without version headers or a description.
        raise NotFound("", routing=True, bare=True)
    node = common.find_node(state, req, node_ident)
    allocation = None
    if node.get("allocation_id"):
        with state.db.read() as conn:
            allocation = allocation_db.get(conn, allocation_id=node["allocation_id"])
    if allocation is None:
        raise NotFound(f"Allocation for node {node_ident} was not found")
    return allocation


def show_for_node(state: BaremetalState, req: falcon.Request, resp: falcon.Response, node_ident: str) -> None:
    fields = _parse_fields(req) if req.context.at_least(*ALLOCATIONS_VERSION) else None
    allocation = _node_allocation(state, req, node_ident)
    _authorize(state, req, "baremetal:allocation:get", allocation)
    send_json(resp, allocation_body(req, allocation, fields))


def delete_for_node(state: BaremetalState, req: falcon.Request, resp: falcon.Response, node_ident: str) -> None:
    allocation = _node_allocation(state, req, node_ident)
    _authorize(state, req, "baremetal:allocation:delete", allocation)
    _call_any_conductor(state, "destroy_allocation", allocation_id=allocation["id"])
    send_empty(resp, 204)


ROUTES = [
    Route("/v1/allocations", {"GET": list_allocations, "POST": create}),
    Route("/v1/allocations/{allocation_ident}", {"GET": show, "PATCH": update, "DELETE": delete}),
    Route("/v1/nodes/{node_ident}/allocation", {"GET": show_for_node, "DELETE": delete_for_node}),
]
