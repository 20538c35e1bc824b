"""Nodes: create, list (detail, fields, filters, pagination), show, patch, delete."""

from __future__ import annotations

import copy
from typing import Any
from urllib.parse import urlencode

import falcon
import jsonpatch
from oslo_utils import strutils, uuidutils

from corral.baremetal.api import common, network_data, schemas, views
from corral.baremetal.api.state import BaremetalState
from corral.baremetal.db import allocations as allocation_db
from corral.baremetal.db import chassis as chassis_db
from corral.baremetal.db import nodes as node_db
from corral.baremetal.domain import states
from corral.baremetal.drivers.base import INTERFACE_TYPES
from corral.core.db import is_duplicate
from corral.core.errors import BadRequest, Conflict, Forbidden, NotAcceptable
from corral.core.http import Route, send_empty, send_json

# Fields a PATCH may change, in upstream's order (its error text lists them so).
PATCHABLE = (
    "automated_clean", "bios_interface", "boot_interface", "chassis_uuid", "conductor_group",
    "console_interface", "deploy_interface", "description", "disable_power_off", "driver", "driver_info",
    "extra", "inspect_interface", "instance_info", "instance_name", "instance_uuid", "lessee", "maintenance",
    "management_interface", "name", "network_data", "network_interface", "owner", "power_interface",
    "properties", "protected", "protected_reason", "raid_interface", "rescue_interface", "resource_class",
    "retired", "retired_reason", "shard", "storage_interface", "vendor_interface", "parent_node",
    "firmware_interface",
)
JSON_DEFAULTS = node_db.JSON_DEFAULTS

# Query filters: parameter -> microversion it appeared in.
FILTERS = {
    "associated": (1, 1),
    "maintenance": (1, 1),
    "instance_uuid": (1, 1),
    "chassis_uuid": (1, 1),
    "provision_state": (1, 9),
    "driver": (1, 16),
    "resource_class": (1, 21),
    "fault": (1, 42),
    "conductor_group": (1, 46),
    "conductor": (1, 49),
    "owner": (1, 50),
    "description_contains": (1, 51),
    "retired": (1, 61),
    "lessee": (1, 65),
    "shard": (1, 82),
    "sharded": (1, 82),
    "parent_node": (1, 83),
    "include_children": (1, 83),
    "instance_name": (1, 104),
    # Not version-gated upstream: owner or lessee.
    "project": (1, 1),
}
BOOLEAN_FILTERS = ("associated", "maintenance", "retired", "sharded", "include_children")


# ------------------------------------------------------------ create


def create(state: BaremetalState, req: falcon.Request, resp: falcon.Response) -> None:
    common.authorize(state, req, "baremetal:node:create")
    body = common.json_body(state, req)
    schemas.validate(schemas.NODE_CREATE, body, "node")
    body = schemas.check_node_formats(body)
    reject_newer_fields(req, body)
    chassis_id = _chassis_id(state, body.get("chassis_uuid"))
    network_data.check(body.get("network_data"))
    group = (body.get("conductor_group") or "").lower()
    state.rpc.check_driver(body["driver"], group)
    values = {key: value for key, value in body.items() if key != "chassis_uuid"}
    values["chassis_id"] = chassis_id
    values.update(state.drivers.resolve_interfaces(body["driver"], body))
    for field, default in JSON_DEFAULTS.items():
        if values.get(field) is None:
            values[field] = copy.deepcopy(default)
    values["uuid"] = body.get("uuid") or uuidutils.generate_uuid()
    values["conductor_group"] = group
    if body.get("parent_node"):
        values["parent_node"] = _parent_uuid(state, req, body["parent_node"])
    # Nodes start in enroll from 1.11; older clients expect them available.
    values["provision_state"] = states.ENROLL if req.context.at_least(1, 11) else states.AVAILABLE
    for flag in ("maintenance", "console_enabled", "protected", "retired", "disable_power_off"):
        if values.get(flag) is None:
            values[flag] = False

    def insert(conn: Any) -> int:
        return node_db.insert(conn, values)

    try:
        node_id = state.db.write(insert)
    except Exception as error:
        if is_duplicate(error):
            raise _duplicate(state, values) from None
        raise
    with state.db.read() as conn:
        node = node_db.get(conn, node_id=node_id)
    assert node is not None
    resp.set_header("Location", f"{views.links.base(req)}/v1/nodes/{node['uuid']}")
    send_json(resp, _full(state, req, node), 201)


def _chassis_id(state: BaremetalState, chassis_uuid: str | None) -> int | None:
    """The id of the chassis a node names (400 when there is none with that UUID)."""
    if not chassis_uuid:
        return None
    with state.db.read() as conn:
        chassis = chassis_db.get(conn, uuid=chassis_uuid)
    if chassis is None:
        raise BadRequest(f"Chassis {chassis_uuid} could not be found.")
    return int(chassis["id"])


def _with_links(conn: Any, nodes: list[dict[str, Any]]) -> None:
    """Add each node's allocation_uuid and chassis_uuid (one query each for the whole page)."""
    allocation_uuids = allocation_db.uuids_by_id(conn, [node["allocation_id"] for node in nodes])
    chassis_uuids = chassis_db.uuids_by_id(conn, [node.get("chassis_id") for node in nodes])
    for node in nodes:
        node["allocation_uuid"] = allocation_uuids.get(node["allocation_id"])
        node["chassis_uuid"] = chassis_uuids.get(node.get("chassis_id"))


def reject_newer_fields(req: falcon.Request, body: dict[str, Any]) -> None:
    """406 for a field newer than the request's version, as upstream refuses them.

    Like upstream, an empty value (null; "" for conductor_group) of a newer
    field passes: old clients send those.
    """
    for field, version in views.FIELD_VERSIONS.items():
        if req.context.at_least(*version) or field not in body:
            continue
        empty = "" if field == "conductor_group" else None
        if body[field] != empty:
            raise NotAcceptable("Request not acceptable.")


def _parent_uuid(state: BaremetalState, req: falcon.Request, ident: str) -> str:
    """The UUID of the parent node named by UUID or name (400 when it does not exist)."""
    with state.db.read() as conn:
        parent = node_db.get(conn, uuid=ident) if uuidutils.is_uuid_like(ident) else node_db.get(conn, name=ident)
    if parent is None or not common.can_see(req, parent):
        raise BadRequest(f"Node {ident} could not be found.")
    return parent["uuid"]


def _duplicate(state: BaremetalState, values: dict[str, Any]) -> Conflict:
    with state.db.read() as conn:
        if values.get("name") and node_db.get(conn, name=values["name"]) is not None:
            return Conflict(f"A node with name {values['name']} already exists.")
        if node_db.get(conn, uuid=values["uuid"]) is not None:
            return Conflict(f"A node with UUID {values['uuid']} already exists.")
    if values.get("instance_uuid"):
        return Conflict(
            f"Instance {values['instance_uuid']} is already associated with a node, it cannot be associated "
            f"with this other node {values['uuid']}"
        )
    return Conflict("A node with the same identity already exists.")


def _full(state: BaremetalState, req: falcon.Request, node: dict[str, Any],
          fields: list[str] | None = None) -> dict[str, Any]:
    """The node's body; its traits and links are read unless ``node`` came with them
    (``find_node(..., shown=True)``)."""
    node = dict(node)
    traits = node.pop("traits", None)
    if traits is None:
        with state.db.read() as conn:
            traits = node_db.traits_of(conn, [node["id"]])[node["id"]]
            _with_links(conn, [node])
    body = views.node_body(req, node, traits=traits, conductor=state.rpc.owner(node), fields=fields)
    return common.redact(state, req, node, body)


# -------------------------------------------------------------- list


def list_nodes(state: BaremetalState, req: falcon.Request, resp: falcon.Response) -> None:
    detail = req.get_param("detail")
    if detail is not None:
        if not req.context.at_least(1, 43):
            raise views.not_acceptable((1, 43))
        if not _boolean(detail, "detail"):
            detail = None
    if detail is not None:
        if req.get_param("fields") is not None:
            raise BadRequest("Can not specify ?detail=True and fields in the same request.")
        _list(state, req, resp, detail=True, path="/v1/nodes")
    else:
        _list(state, req, resp, detail=False, path="/v1/nodes")


def list_detail(state: BaremetalState, req: falcon.Request, resp: falcon.Response) -> None:
    if req.get_param("fields") is not None:
        raise BadRequest("Can not specify ?detail=True and fields in the same request.")
    _list(state, req, resp, detail=True, path="/v1/nodes/detail")


def _boolean(value: str, name: str) -> bool:
    try:
        return strutils.bool_from_string(value, strict=True)
    except ValueError:
        raise BadRequest(f"Invalid value for {name}: {value!r} is not a boolean.") from None


def _filters(state: BaremetalState, req: falcon.Request) -> dict[str, Any]:
    filters: dict[str, Any] = {}
    for name, version in FILTERS.items():
        value = req.get_param(name)
        if value is None:
            continue
        if not req.context.at_least(*version):
            raise views.not_acceptable(version)
        if name in BOOLEAN_FILTERS:
            filters[name] = _boolean(value, name)
        elif name in ("chassis_uuid", "instance_uuid") and not uuidutils.is_uuid_like(value):
            raise BadRequest(f"Expected UUID for {name}: {value}")
        elif name == "chassis_uuid":
            with state.db.read() as conn:
                chassis = chassis_db.get(conn, uuid=value)
            filters["chassis_id"] = chassis["id"] if chassis is not None else -1
        else:
            filters[name] = value
    if "conductor_group" in filters:
        filters["conductor_group"] = filters["conductor_group"].lower()
    if "shard" in filters:
        filters["shard_in"] = [item.strip() for item in filters.pop("shard").split(",") if item.strip()]
    if "sharded" in filters:
        filters["sharded"] = bool(filters["sharded"])
    # Child nodes show only when asked for, or under their parent.
    include_children = filters.pop("include_children", False)
    if "parent_node" in filters:
        filters["parent_node"] = _parent_uuid(state, req, filters["parent_node"])
    elif not include_children:
        filters["parent_node"] = None
    if not common.allowed(state, req, "baremetal:node:list_all"):
        # A project lists the nodes it owns or leases.
        if not req.context.project_id or filters.get("project") not in (None, req.context.project_id):
            raise Forbidden("baremetal:node:list_all is disallowed by policy")
        filters["project"] = req.context.project_id
    return filters


def list_in_chassis(state: BaremetalState, req: falcon.Request, resp: falcon.Response, chassis: dict[str, Any],
                    *, detail: bool) -> None:
    """/v1/chassis/{uuid}/nodes[/detail]: the nodes of one chassis."""
    path = f"/v1/chassis/{chassis['uuid']}/nodes" + ("/detail" if detail else "")
    _list(state, req, resp, detail=detail, path=path, chassis_id=chassis["id"])


def _list(state: BaremetalState, req: falcon.Request, resp: falcon.Response, *, detail: bool, path: str,
          chassis_id: int | None = None) -> None:
    common.authorize(state, req, "baremetal:node:list")
    fields = None if detail else views.parse_fields(req)
    filters = _filters(state, req)
    if chassis_id is not None:
        filters["chassis_id"] = chassis_id
    conductor = filters.pop("conductor", None)
    limit, sort_key, sort_dir, marker = common.paging(
        state, req, sort_keys=node_db.SORT_KEYS, find_marker=lambda conn, uuid: node_db.get(conn, uuid=uuid), kind="Node"
    )
    secrets = common.secrets_shown(state, req)
    live = state.rpc.live()
    found: list[dict[str, Any]] = []
    with state.db.read() as conn:
        # Filtering by conductor needs the hash ring: read on until the page is full.
        batch_marker = marker
        while len(found) < limit:
            batch = node_db.list_nodes(conn, filters, sort_key=sort_key, sort_dir=sort_dir, limit=limit,
                                       marker=batch_marker)
            for node in batch:
                if conductor is None or state.rpc.owner(node, live) == conductor:
                    found.append(node)
            if len(batch) < limit or conductor is None:
                break
            batch_marker = batch[-1]
        found = found[:limit]
        traits = node_db.traits_of(conn, [node["id"] for node in found])
        _with_links(conn, found)
    items = []
    for node in found:
        owner = state.rpc.owner(node, live)
        if detail:
            item = views.node_body(req, node, traits=traits[node["id"]], conductor=owner)
        else:
            item = views.list_item(req, node, fields=fields, traits=traits[node["id"]], conductor=owner)
        items.append(common.redact(state, req, node, item, secrets))
    body: dict[str, Any] = {"nodes": items}
    if found and len(found) == limit:
        query = {"sort_key": sort_key, "sort_dir": sort_dir}
        if fields is not None:
            query["fields"] = ",".join(fields)
        query["limit"] = str(limit)
        query["marker"] = found[-1]["uuid"]
        body["next"] = f"{views.links.base(req)}{path}?{urlencode(query, safe=',')}"
    send_json(resp, body)


# -------------------------------------------------------------- show


def show(state: BaremetalState, req: falcon.Request, resp: falcon.Response, node_ident: str) -> None:
    # One statement for the node and its traits and links, one for the live conductors.
    node = common.find_node(state, req, node_ident, shown=True)
    common.authorize(state, req, "baremetal:node:get", node)
    fields = views.parse_fields(req)
    send_json(resp, _full(state, req, node, fields))


# ------------------------------------------------------------- patch


def patch(state: BaremetalState, req: falcon.Request, resp: falcon.Response, node_ident: str) -> None:
    node = common.find_node(state, req, node_ident)
    operations = common.json_body(state, req)
    schemas.validate(schemas.PATCH, operations, "patch")
    _authorize_patch(state, req, node, operations)
    reset_interfaces = _reset_interfaces(req)
    for operation in operations:
        field = _patch_field(req, operation["path"])
        if field not in PATCHABLE:
            raise BadRequest(f"Cannot patch {operation['path']}. Only the following can be updated: "
                             f"{', '.join(PATCHABLE)}")
        if operation["op"] != "remove" and "value" not in operation:
            raise BadRequest(f"'add' and 'replace' operations need a value: {operation['path']}")
    with state.db.read() as conn:
        node = {**node, "chassis_uuid": chassis_db.uuids_by_id(conn, [node.get("chassis_id")]).get(
            node.get("chassis_id"))}
    if not req.context.at_least(1, 25) and any(
            operation["op"] == "remove" and operation["path"] == "/chassis_uuid" for operation in operations):
        raise BadRequest("Cannot remove chassis_uuid from a node before API version 1.25.")
    # A field newer than the request is refused (406), as upstream does.
    for operation in operations:
        field = _patch_field(req, operation["path"])
        version = views.FIELD_VERSIONS.get(field)
        if version is not None and not req.context.at_least(*version) and operation.get("value") is not None:
            raise NotAcceptable("Request not acceptable.")
    allowed = [field for field in PATCHABLE if views.visible(field, req)]
    current = {field: copy.deepcopy(node.get(field)) for field in allowed}
    patched = apply_patch(current, operations)
    for field in allowed:
        patched.setdefault(field, copy.deepcopy(JSON_DEFAULTS.get(field)))
    patched = {key: value for key, value in patched.items() if key in allowed}
    for field in node_db.JSON_FIELDS:
        if field in patched and patched[field] is None:
            patched[field] = {}
    for flag in ("maintenance", "protected", "retired", "disable_power_off"):
        if flag in patched and patched[flag] is None:
            patched[flag] = False
    schemas.validate(schemas.NODE_PATCHED, patched, "node")
    patched = schemas.check_node_formats({key: value for key, value in patched.items()
                                          if key != "name" or value != node.get("name")},
                                         node_uuid=node["uuid"])
    if "network_data" in patched and patched["network_data"] != node.get("network_data"):
        network_data.check(patched["network_data"])
    if patched.get("parent_node") and patched["parent_node"] != node.get("parent_node"):
        patched["parent_node"] = _parent_uuid(state, req, patched["parent_node"])
        if patched["parent_node"] == node["uuid"]:
            raise BadRequest(f"Node {node['uuid']} cannot be its own parent node.")
    changes = {key: value for key, value in patched.items() if node.get(key) != value}
    display_name = (changes.get("instance_info") or {}).get("display_name")
    if (isinstance(display_name, str) and 0 < len(display_name) <= 255 and not node.get("instance_name")
            and "instance_name" not in changes):
        # As upstream: an instance's display name names the node's instance
        # unless an instance_name was given.
        changes["instance_name"] = display_name
    if "chassis_uuid" in changes:
        changes["chassis_id"] = _chassis_id(state, changes.pop("chassis_uuid"))
    if "conductor_group" in changes:
        changes["conductor_group"] = (changes["conductor_group"] or "").lower()
    if "maintenance" in changes and not changes["maintenance"]:
        changes["maintenance_reason"] = None
    if reset_interfaces and "driver" not in changes:
        raise BadRequest("The reset_interfaces parameter can be set only when the node's driver is updated.")
    if "driver" in changes:
        state.rpc.check_driver(changes["driver"], changes.get("conductor_group", node["conductor_group"]))
    if reset_interfaces:
        # Interfaces the patch does not name fall back to the new driver's defaults.
        named = {operation["path"].split("/")[1] for operation in operations}
        for name in INTERFACE_TYPES:
            field = f"{name}_interface"
            if field not in named:
                changes[field] = None
    if any(key.endswith("_interface") for key in changes) or "driver" in changes:
        merged = {**node, **changes}
        requested = {f"{name}_interface": merged.get(f"{name}_interface") for name in INTERFACE_TYPES}
        state.drivers.resolve_interfaces(merged["driver"], requested)
    # The node as the conductor owning it now will see it (the old owner before a move).
    # Upstream sends every patch, changes or not, through the conductor, which
    # answers with the node as saved under its lock: `reservation` names it.
    host = common.conductor_call(state, node, "update_node", values=changes)
    with state.db.read() as conn:
        updated = node_db.get(conn, node_id=node["id"])
    assert updated is not None
    send_json(resp, _full(state, req, {**updated, "reservation": updated["reservation"] or host}))


# Fields with a policy rule of their own; the others need "baremetal:node:update".
PATCH_RULES = {
    "driver_info": "baremetal:node:update:driver_info",
    "properties": "baremetal:node:update:properties",
    "chassis_uuid": "baremetal:node:update:chassis_uuid",
    "instance_uuid": "baremetal:node:update:instance_uuid",
    "lessee": "baremetal:node:update:lessee",
    "owner": "baremetal:node:update:owner",
    "driver": "baremetal:node:update:driver_interfaces",
    **{f"{name}_interface": "baremetal:node:update:driver_interfaces" for name in INTERFACE_TYPES},
    "network_data": "baremetal:node:update:network_data",
    "conductor_group": "baremetal:node:update:conductor_group",
    "name": "baremetal:node:update:name",
    "retired": "baremetal:node:update:retired",
    "retired_reason": "baremetal:node:update:retired",
    "shard": "baremetal:node:update:shard",
    "parent_node": "baremetal:node:update:parent_node",
    "disable_power_off": "baremetal:node:update:disable_power_off",
    "extra": "baremetal:node:update_extra",
    "instance_info": "baremetal:node:update_instance_info",
}


def _authorize_patch(state: BaremetalState, req: falcon.Request, node: dict[str, Any],
                     operations: list[dict[str, Any]]) -> None:
    rules = []
    for operation in operations:
        rule = PATCH_RULES.get(_patch_field(req, operation["path"]), "baremetal:node:update")
        if rule not in rules:
            rules.append(rule)
        if rule == "baremetal:node:update:owner" and node["provision_state"] == states.ACTIVE:
            rules.append("baremetal:node:update_owner_provisioned")
    for rule in rules or ["baremetal:node:update"]:
        common.authorize(state, req, rule, node)


def _patch_field(req: falcon.Request, path: str) -> str:
    """The top-level field a patch path names ("~1" and "~0" unescaped from 1.98)."""
    field = path.split("/")[1]
    if req.context.at_least(1, 98):
        field = field.replace("~1", "/").replace("~0", "~")
    return field


def _reset_interfaces(req: falcon.Request) -> bool:
    raw = req.get_param("reset_interfaces")
    if raw is None:
        return False
    if not req.context.at_least(1, 45):
        raise views.not_acceptable((1, 45))
    return _boolean(raw, "reset_interfaces")


def apply_patch(document: dict[str, Any], operations: list[dict[str, Any]]) -> dict[str, Any]:
    """Apply operations one at a time so an error names the one that failed."""
    for operation in operations:
        if operation["op"] == "add" and operation["path"].count("/") == 1:
            if operation["path"].lstrip("/") not in document:
                raise BadRequest(
                    f"Adding a new attribute ({operation['path']}) to the root of the resource is not allowed."
                )
    for operation in operations:
        try:
            if operation["op"] == "remove" and operation["path"].count("/") == 1:
                # Removing a top-level field resets it.
                document = {**document, operation["path"].lstrip("/"): None}
                continue
            document = jsonpatch.apply_patch(document, jsonpatch.JsonPatch([operation]))
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException, KeyError, TypeError) as error:
            raise BadRequest(f"Couldn't apply patch '{operation}'. Reason: {error}") from None
    return document


# ------------------------------------------------------------ delete


def delete(state: BaremetalState, req: falcon.Request, resp: falcon.Response, node_ident: str) -> None:
    node = common.find_node(state, req, node_ident)
    common.authorize(state, req, "baremetal:node:delete", node)
    common.conductor_call(state, node, "destroy_node")
    send_empty(resp, 204)


ROUTES = [
    Route("/v1/nodes", {"GET": list_nodes, "POST": create}),
    Route("/v1/nodes/detail", {"GET": list_detail}),
    Route("/v1/nodes/{node_ident}", {"GET": show, "PATCH": patch, "DELETE": delete}),
]
