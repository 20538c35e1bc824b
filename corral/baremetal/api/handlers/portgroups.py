"""Port groups (1.23): /v1/portgroups, /v1/portgroups/detail, /v1/nodes/{node}/portgroups."""

from __future__ import annotations

import copy
import re
from typing import Any

import falcon
from oslo_utils import uuidutils

from corral.baremetal.api import common, links, resource_common, schemas
from corral.baremetal.api.handlers.nodes import apply_patch
from corral.baremetal.api.resource_views import PORTGROUP, collection_body, parse_fields, request_not_acceptable, \
    return_fields
from corral.baremetal.api.state import BaremetalState
from corral.baremetal.conductor.ports import duplicate_portgroup
from corral.baremetal.db import nodes as node_db
from corral.baremetal.db import ports as port_db
from corral.core.db import is_duplicate
from corral.core.errors import ApiError, BadRequest, Conflict, NotFound
from corral.core.http import Route, send_empty, send_json

PORTGROUPS_VERSION = (1, 23)
DEFAULT_MODE = "active-backup"

_SCHEMA = {
    "type": "object",
    "properties": {
        "address": {"type": ["string", "null"]},
        "category": {"type": ["string", "null"], "maxLength": 80},
        "extra": {"type": ["object", "null"]},
        "mode": {"type": ["string", "null"], "maxLength": 255},
        "name": {"type": ["string", "null"], "maxLength": 255},
        "node_uuid": {"type": "string"},
        "physical_network": {"type": ["string", "null"], "maxLength": 64},
        "properties": {"type": ["object", "null"]},
        "standalone_ports_supported": {"type": ["string", "boolean", "null"]},
        "uuid": {"type": ["string", "null"]},
    },
    "required": ["node_uuid"],
    "additionalProperties": False,
}
PORTGROUP_CHECK = resource_common.validator(_SCHEMA)
_BODY_VERSIONS = {"mode": (1, 26), "properties": (1, 26), "physical_network": (1, 102), "category": (1, 103)}
PATCHABLE = ("address", "extra", "mode", "name", "node_uuid", "properties", "standalone_ports_supported",
             "physical_network", "category")
COLUMNS = ("address", "extra", "mode", "name", "properties", "standalone_ports_supported", "physical_network",
           "category")


def _unsupported() -> ApiError:
    # Upstream's answer to every port group request below 1.23.
    return NotFound("The API is not supported for this version")


def _check_version(req: falcon.Request) -> None:
    if not req.context.at_least(*PORTGROUPS_VERSION):
        raise _unsupported()


def _normalized(body: Any, what: str = "portgroup") -> dict[str, Any]:
    resource_common.check_schema(PORTGROUP_CHECK, body, what)
    values = dict(body)
    values["address"] = resource_common.as_mac("address", body.get("address"))
    for name in ("node_uuid", "uuid"):
        if body.get(name) is not None:
            resource_common.as_uuid(name, body[name])
    if "standalone_ports_supported" in body:
        values["standalone_ports_supported"] = resource_common.as_boolean(
            "standalone_ports_supported", body["standalone_ports_supported"])
    return values


def _valid_name(name: str) -> bool:
    return re.match(schemas.NAME_PATTERN, name) is not None and not uuidutils.is_uuid_like(name)


# --------------------------------------------------------------- create


def create(state: BaremetalState, req: falcon.Request, resp: falcon.Response, **parent: str) -> None:
    _check_version(req)
    body = common.json_body(state, req)
    values = _normalized(body)
    node = resource_common.node_for_child(state, req, values["node_uuid"])
    common.authorize(state, req, "baremetal:portgroup:create", node)
    if parent:
        raise BadRequest("Malformed request URI.")
    for key, version in _BODY_VERSIONS.items():
        if values.get(key) and not req.context.at_least(*version):
            raise request_not_acceptable()
    if values.get("name") and not _valid_name(values["name"]):
        raise BadRequest(f"Cannot create portgroup with invalid name '{values['name']}'")
    row = {key: values[key] for key in COLUMNS if values.get(key) is not None}
    row.update(uuid=values.get("uuid") or uuidutils.generate_uuid(), node_id=node["id"])
    row.setdefault("mode", state.conf.default_portgroup_mode)
    row.setdefault("standalone_ports_supported", True)
    row.setdefault("dynamic_portgroup", False)
    try:
        portgroup_id = state.db.write(lambda conn: port_db.insert_portgroup(conn, row))
    except Exception as error:
        if is_duplicate(error):
            raise duplicate_portgroup(state, row) from None
        with state.db.read() as conn:
            if node_db.get(conn, node_id=node["id"]) is None:
                raise BadRequest(f"Node {node['uuid']} could not be found.") from None
        raise
    with state.db.read() as conn:
        portgroup = port_db.get_portgroup(conn, portgroup_id=portgroup_id)
    assert portgroup is not None
    resp.set_header("Location", f"{links.base(req)}/v1/portgroups/{portgroup['uuid']}")
    send_json(resp, PORTGROUP.body(req, portgroup), 201)


# ----------------------------------------------------------------- list


def _list(state: BaremetalState, req: falcon.Request, resp: falcon.Response, *, detail_path: bool,
          node_ident: str | None = None) -> None:
    _check_version(req)
    common.authorize(state, req, "baremetal:portgroup:list")
    fields, detail = return_fields(PORTGROUP, req, detail_path=detail_path)
    filters = _filters(state, req, node_ident)
    limit, sort_key, sort_dir, marker = resource_common.list_paging(
        state, req, PORTGROUP, sort_keys=port_db.PORTGROUP_SORT_KEYS, json_fields=port_db.PORTGROUP_JSON,
        find_marker=lambda conn, uuid: port_db.get_portgroup(conn, uuid=uuid), kind="Portgroup")
    with state.db.read() as conn:
        rows = port_db.list_portgroups(conn, filters, sort_key=sort_key, sort_dir=sort_dir, limit=limit,
                                       marker=marker)
    items = [PORTGROUP.body(req, row, fields) for row in rows]
    send_json(resp, collection_body(req, "portgroups", items, rows, limit=limit,
                                    path="portgroups/detail" if detail_path else "portgroups",
                                    sort_key=sort_key, sort_dir=sort_dir, fields=fields, detail=detail))


def _filters(state: BaremetalState, req: falcon.Request, node_ident: str | None) -> dict[str, Any]:
    node_ident = node_ident or req.get_param("node")
    address = req.get_param("address")
    shard = req.get_param("shard")
    if shard is not None and not req.context.at_least(1, 106):
        raise request_not_acceptable()
    groups = req.get_param("conductor_groups")
    if groups is not None and not req.context.at_least(1, 99):
        raise request_not_acceptable()
    if sum(1 for given in (node_ident, address, shard, groups) if given) > 1:
        raise BadRequest("Filtering by node, address, or shard simultaneously is not supported.")
    filters: dict[str, Any] = {}
    if node_ident:
        filters["node_id"] = common.find_node(state, req, node_ident)["id"]
    elif address:
        filters["address"] = resource_common.as_mac("address", address)
    elif shard:
        if not port_db.node_has_shard_column():
            return {"node_id": -1}
        filters["shard"] = [item for item in shard.split(",") if item]
    elif groups:
        filters["conductor_groups"] = [group for group in groups.split(",") if group]
    if not req.context.is_admin:
        filters["project"] = req.context.project_id or ""
    return filters


def list_portgroups(state: BaremetalState, req: falcon.Request, resp: falcon.Response) -> None:
    _list(state, req, resp, detail_path=False)


def list_detail(state: BaremetalState, req: falcon.Request, resp: falcon.Response) -> None:
    _list(state, req, resp, detail_path=True)


def list_node_portgroups(state: BaremetalState, req: falcon.Request, resp: falcon.Response, node_ident: str) -> None:
    _node_version(req)
    _list(state, req, resp, detail_path=False, node_ident=node_ident)


def list_node_portgroups_detail(state: BaremetalState, req: falcon.Request, resp: falcon.Response,
                                node_ident: str) -> None:
    _node_version(req)
    _list(state, req, resp, detail_path=True, node_ident=node_ident)


def _node_version(req: falcon.Request) -> None:
    # The node's portgroups sub-collection appeared in 1.24.
    if not req.context.at_least(1, 24):
        raise NotFound("", routing=True)


# ----------------------------------------------------- show/patch/delete


def show(state: BaremetalState, req: falcon.Request, resp: falcon.Response, portgroup_ident: str) -> None:
    _check_version(req)
    portgroup = resource_common.find_portgroup(state, req, portgroup_ident)
    common.authorize(state, req, "baremetal:portgroup:get", resource_common.owner_view(portgroup))
    send_json(resp, PORTGROUP.body(req, portgroup, parse_fields(PORTGROUP, req)))


def patch(state: BaremetalState, req: falcon.Request, resp: falcon.Response, portgroup_ident: str) -> None:
    _check_version(req)
    portgroup = resource_common.find_portgroup(state, req, portgroup_ident)
    common.authorize(state, req, "baremetal:portgroup:update", resource_common.owner_view(portgroup))
    operations = common.json_body(state, req)
    schemas.validate(schemas.PATCH, operations, "patch")
    for field, version in _BODY_VERSIONS.items():
        if resource_common.is_path_updated(operations, f"/{field}") and not req.context.at_least(*version):
            raise request_not_acceptable()
    resource_common.check_patch_fields(operations, PATCHABLE)
    for operation in operations:
        if operation["path"] == "/name" and operation.get("value") and not _valid_name(operation["value"]):
            raise BadRequest(f"Portgroup {portgroup_ident}: Cannot change name to invalid name "
                             f"'{operation['value']}'")
    current = {key: copy.deepcopy(portgroup.get(key)) for key in COLUMNS}
    current["node_uuid"] = portgroup["node_uuid"]
    patched = apply_patch(current, operations)
    if patched.get("mode") is None:
        raise BadRequest("'mode' is a mandatory attribute and can not be removed")
    for name in ("extra", "properties"):
        if patched.get(name) is None:
            patched[name] = {}
    values = _normalized(patched, "patch")
    node = resource_common.patched_node(state, req, portgroup, values["node_uuid"])
    if node["provision_state"] == "inspecting":
        raise Conflict(f'Cannot update portgroup "{portgroup["uuid"]}" on node "{node["uuid"]}" while it is in '
                       'state "inspecting".')
    changes = {key: values.get(key) for key in COLUMNS}
    if changes["standalone_ports_supported"] is None:
        changes["standalone_ports_supported"] = True
    changes["node_id"] = node["id"]
    changes = {key: value for key, value in changes.items() if portgroup.get(key) != value}
    if changes:
        common.conductor_call(state, node, "update_portgroup", portgroup_id=portgroup["id"], values=changes)
    with state.db.read() as conn:
        updated = port_db.get_portgroup(conn, portgroup_id=portgroup["id"])
    assert updated is not None
    send_json(resp, PORTGROUP.body(req, updated))


def delete(state: BaremetalState, req: falcon.Request, resp: falcon.Response, portgroup_ident: str) -> None:
    _check_version(req)
    portgroup = resource_common.find_portgroup(state, req, portgroup_ident)
    common.authorize(state, req, "baremetal:portgroup:delete", resource_common.owner_view(portgroup))
    with state.db.read() as conn:
        node = node_db.get(conn, node_id=portgroup["node_id"])
    assert node is not None
    common.conductor_call(state, node, "destroy_portgroup", portgroup_id=portgroup["id"])
    send_empty(resp, 204)


ROUTES = [
    Route("/v1/portgroups", {"GET": list_portgroups, "POST": create}),
    Route("/v1/portgroups/detail", {"GET": list_detail}),
    Route("/v1/portgroups/{portgroup_ident}", {"GET": show, "PATCH": patch, "DELETE": delete}),
    Route("/v1/nodes/{node_ident}/portgroups", {"GET": list_node_portgroups, "POST": create}),
    Route("/v1/nodes/{node_ident}/portgroups/detail", {"GET": list_node_portgroups_detail}),
]
