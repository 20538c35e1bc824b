"""Ports: /v1/ports, /v1/ports/detail, /v1/nodes/{node}/ports, /v1/portgroups/{group}/ports."""

from __future__ import annotations

import copy
import re
from typing import Any

import falcon
from oslo_utils import uuidutils

from corral.baremetal.api import common, links, resource_common, schemas
from corral.baremetal.api.handlers.nodes import apply_patch
from corral.baremetal.api.resource_views import PORT, collection_body, parse_fields, request_not_acceptable, \
    return_fields
from corral.baremetal.api.state import BaremetalState
from corral.baremetal.conductor.ports import duplicate_port
from corral.baremetal.db import nodes as node_db
from corral.baremetal.db import ports as port_db
from corral.baremetal.domain import ports as rules
from corral.core.db import is_duplicate
from corral.core.errors import ApiError, BadRequest, Conflict, NotFound
from corral.core.http import Route, send_empty, send_json

# Body keys of a port create or patch, and the microversion each appeared in.
_BODY_VERSIONS: dict[str, tuple[int, int]] = {
    "pxe_enabled": (1, 19),
    "local_link_connection": (1, 19),
    "portgroup_uuid": (1, 24),
    "physical_network": (1, 34),
    "is_smartnic": (1, 53),
    "name": (1, 88),
    "node_ident": (1, 94),
    "description": (1, 97),
    "vendor": (1, 100),
    "category": (1, 101),
    "available_for_dynamic_portgroup": (1, 111),
}

_SCHEMA = {
    "type": "object",
    "properties": {
        "address": {"type": "string"},
        "extra": {"type": ["object", "null"]},
        "is_smartnic": {"type": ["string", "boolean", "null"]},
        "local_link_connection": {"type": ["null", "object"]},
        "node_ident": {"type": "string"},
        "node_uuid": {"type": "string"},
        "physical_network": {"type": ["string", "null"], "maxLength": 64},
        "portgroup_uuid": {"type": ["string", "null"]},
        "pxe_enabled": {"type": ["string", "boolean", "null"]},
        "uuid": {"type": ["string", "null"]},
        "name": {"type": ["string", "null"], "maxLength": 255},
        "description": {"type": ["string", "null"], "maxLength": 255},
        "vendor": {"type": ["string", "null"], "maxLength": 32},
        "category": {"type": ["string", "null"], "maxLength": 80},
        "available_for_dynamic_portgroup": {"type": "boolean"},
    },
    "required": ["address"],
    "oneOf": [{"required": ["node_ident"]}, {"required": ["node_uuid"]}],
    "additionalProperties": False,
}
_LINK_BASE = {
    "type": "object",
    "properties": {
        "port_id": {"type": "string"},
        "switch_id": {"type": "string"},
        "hostname": {"type": "string"},
        "switch_info": {"type": "string"},
        "network_type": {"type": "string", "enum": ["managed", "unmanaged"]},
        "vtep-logical-switch": {"type": "string"},
        "vtep-physical-switch": {"type": "string"},
    },
    "additionalProperties": False,
    "dependentRequired": {"vtep-logical-switch": ["vtep-physical-switch"],
                          "vtep-physical-switch": ["vtep-logical-switch"]},
}
_UNMANAGED = copy.deepcopy(_LINK_BASE)
_UNMANAGED["properties"]["network_type"]["enum"] = ["unmanaged"]
_LOCAL_LINK = {"anyOf": [
    {**_LINK_BASE, "required": ["port_id", "switch_id"]},
    {**_LINK_BASE, "required": ["port_id", "hostname"]},
    {**_UNMANAGED, "required": ["network_type"]},
    {**_LINK_BASE, "required": ["port_id", "vtep-logical-switch", "vtep-physical-switch"]},
    {"type": "object", "additionalProperties": False},
]}
_SMART_NIC_LINK = {**_LINK_BASE, "required": ["port_id", "hostname"]}

PORT_CHECK = resource_common.validator(_SCHEMA)
LOCAL_LINK_CHECK = resource_common.validator(_LOCAL_LINK)
SMART_NIC_CHECK = resource_common.validator(_SMART_NIC_LINK)

PATCHABLE = ("address", "extra", "is_smartnic", "local_link_connection", "node_ident", "node_uuid",
             "physical_network", "portgroup_uuid", "pxe_enabled", "name", "description", "vendor", "category",
             "available_for_dynamic_portgroup")
# Columns written from a port body (node and port group go by id).
COLUMNS = ("address", "extra", "is_smartnic", "local_link_connection", "physical_network", "pxe_enabled", "name",
           "description", "vendor", "category", "available_for_dynamic_portgroup")


# ----------------------------------------------------------- validation


def _check_versions(req: falcon.Request, body: dict[str, Any]) -> None:
    for key in body:
        version = _BODY_VERSIONS.get(key)
        if version is not None and not req.context.at_least(*version):
            raise request_not_acceptable()
    link = body.get("local_link_connection") or {}
    if "network_type" in link and not req.context.at_least(1, 64):
        raise request_not_acceptable()
    if "vtep-logical-switch" in link and not req.context.at_least(1, 90):
        raise request_not_acceptable()


def _normalized(body: dict[str, Any], what: str = "port") -> dict[str, Any]:
    """The body's values checked and converted as upstream's validators do."""
    resource_common.check_schema(PORT_CHECK, body, what)
    values = dict(body)
    values["address"] = resource_common.as_mac("address", body.get("address"))
    for name in ("node_uuid", "portgroup_uuid", "uuid"):
        if body.get(name) is not None:
            resource_common.as_uuid(name, body[name])
    for name in ("is_smartnic", "pxe_enabled"):
        if name in body:
            values[name] = resource_common.as_boolean(name, body[name])
    link = body.get("local_link_connection")
    if link:
        resource_common.check_schema(LOCAL_LINK_CHECK, link, "local_link_connection")
        if "switch_id" in link:
            switch_id = rules.normalize_switch_id(link["switch_id"])
            if switch_id is None:
                raise BadRequest(f"Expected a MAC address or OpenFlow datapath ID but received {link['switch_id']}.")
            values["local_link_connection"] = {**link, "switch_id": switch_id}
    if values.get("name") is not None and not _valid_name(values["name"]):
        raise BadRequest(f"Expected a logical name but received {values['name']}.")
    return values


def _valid_name(name: str) -> bool:
    return re.match(schemas.NAME_PATTERN, name) is not None and not uuidutils.is_uuid_like(name)


def _check_content(values: dict[str, Any]) -> None:
    if values.get("is_smartnic"):
        errors = list(SMART_NIC_CHECK.iter_errors(values.get("local_link_connection") or {}))
        if errors:
            raise BadRequest("Smart NIC port must have port_id and hostname in local_link_connection")
    physical_network = values.get("physical_network")
    if physical_network is not None and not physical_network:
        raise BadRequest("A non-empty value is required when setting physical_network")


# -------------------------------------------------------------- lookups


def find_port(state: BaremetalState, req: falcon.Request, ident: str) -> dict[str, Any]:
    with state.db.read() as conn:
        if uuidutils.is_uuid_like(ident):
            port = port_db.get_port(conn, uuid=ident)
        elif req.context.at_least(1, 88):
            port = port_db.get_port(conn, name=ident)
        else:
            port = None
    if port is None or not common.can_see(req, _owner_view(port)):
        raise NotFound(f"Port {ident} could not be found.")
    return port


def _owner_view(row: dict[str, Any]) -> dict[str, Any]:
    return {"owner": row.get("node_owner"), "lessee": row.get("node_lessee")}


def _authorize(state: BaremetalState, req: falcon.Request, rule: str, row: dict[str, Any] | None) -> None:
    common.authorize(state, req, rule, None if row is None else _owner_view(row))


def _portgroup_for(state: BaremetalState, uuid: str, node_id: int) -> dict[str, Any]:
    with state.db.read() as conn:
        portgroup = port_db.get_portgroup(conn, uuid=uuid)
    if portgroup is None:
        raise BadRequest(f"Portgroup {uuid} could not be found.")
    if portgroup["node_id"] != node_id:
        raise BadRequest("Port can not be added to a portgroup belonging to a different node.")
    return portgroup


# --------------------------------------------------------------- create


def create(state: BaremetalState, req: falcon.Request, resp: falcon.Response, **parent: str) -> None:
    if parent:
        raise BadRequest("Malformed request URI.")
    body = common.json_body(state, req)
    if isinstance(body, dict):
        _check_versions(req, body)
    values = _normalized(body)
    ident = values.get("node_ident") or values.get("node_uuid")
    node = resource_common.node_for_child(state, req, ident, by_name="node_ident" in values)
    common.authorize(state, req, "baremetal:port:create", node)
    portgroup = _portgroup_for(state, values["portgroup_uuid"], node["id"]) if values.get("portgroup_uuid") else None
    _check_content(values)
    if portgroup is not None and values.get("pxe_enabled") and not portgroup["standalone_ports_supported"]:
        raise Conflict(f"Port group {portgroup['uuid']} doesn't support standalone ports. This port cannot be "
                       "created as a member of that portgroup as the port's 'pxe_enabled' field was set to True.")
    row = {key: values[key] for key in COLUMNS if values.get(key) is not None}
    row.update(uuid=values.get("uuid") or uuidutils.generate_uuid(), node_id=node["id"],
               portgroup_id=portgroup["id"] if portgroup else None)
    row.setdefault("pxe_enabled", True)
    row.setdefault("is_smartnic", False)
    row.setdefault("available_for_dynamic_portgroup", True)

    def insert(conn: Any) -> int:
        if portgroup is not None:
            members = port_db.list_ports(conn, {"portgroup_id": portgroup["id"]})
            adopt = rules.check_physnet(row, portgroup, members)
            if adopt is not None:
                port_db.update_portgroup(conn, portgroup["id"], {"physical_network": adopt})
        return port_db.insert_port(conn, row)

    port_id = _write_new(state, insert, row, node)
    with state.db.read() as conn:
        port = port_db.get_port(conn, port_id=port_id)
    assert port is not None
    resp.set_header("Location", f"{links.base(req)}/v1/ports/{port['uuid']}")
    send_json(resp, PORT.body(req, port), 201)


def _write_new(state: BaremetalState, insert: Any, row: dict[str, Any], node: dict[str, Any]) -> int:
    try:
        return state.db.write(insert)
    except Exception as error:
        if is_duplicate(error):
            raise duplicate_port(state, row) from None
        with state.db.read() as conn:
            if node_db.get(conn, node_id=node["id"]) is None:  # deleted meanwhile
                raise BadRequest(f"Node {node['uuid']} could not be found.") from None
        raise


# ----------------------------------------------------------------- list


def _list(state: BaremetalState, req: falcon.Request, resp: falcon.Response, *, detail_path: bool,
          node_ident: str | None = None, portgroup_ident: str | None = None) -> None:
    common.authorize(state, req, "baremetal:port:list")
    fields, detail = return_fields(PORT, req, detail_path=detail_path)
    filters = _filters(state, req, node_ident=node_ident, portgroup_ident=portgroup_ident)
    limit, sort_key, sort_dir, marker = resource_common.list_paging(
        state, req, PORT, sort_keys=port_db.PORT_SORT_KEYS, json_fields=port_db.PORT_JSON,
        find_marker=lambda conn, uuid: port_db.get_port(conn, uuid=uuid), kind="Port")
    with state.db.read() as conn:
        rows = port_db.list_ports(conn, filters, sort_key=sort_key, sort_dir=sort_dir, limit=limit, marker=marker)
    items = [PORT.body(req, row, fields) for row in rows]
    send_json(resp, collection_body(req, "ports", items, rows, limit=limit,
                                    path="ports/detail" if detail_path else "ports", sort_key=sort_key,
                                    sort_dir=sort_dir, fields=fields, detail=detail))


def _filters(state: BaremetalState, req: falcon.Request, *, node_ident: str | None,
             portgroup_ident: str | None) -> dict[str, Any]:
    filters: dict[str, Any] = {}
    node_param = req.get_param("node") if node_ident is None else None
    node_uuid = req.get_param("node_uuid") if node_ident is None else None
    if node_uuid is not None:
        resource_common.as_uuid("node_uuid", node_uuid)
    node_ident = node_ident or node_uuid or node_param
    if node_param and not node_uuid and not req.context.at_least(1, 5) and not uuidutils.is_uuid_like(node_param):
        raise request_not_acceptable()
    group_param = req.get_param("portgroup") if portgroup_ident is None else None
    if group_param is not None and not req.context.at_least(1, 24):
        raise request_not_acceptable()
    portgroup_ident = portgroup_ident or group_param
    shard = req.get_param("shard")
    if shard is not None and not req.context.at_least(1, 82):
        raise request_not_acceptable()
    address = req.get_param("address")
    description = req.get_param("description_contains")
    if description is not None:
        if not req.context.at_least(1, 97):
            raise request_not_acceptable()
        filters["description_contains"] = description
    groups = req.get_param("conductor_groups")
    if groups is not None:
        if not req.context.at_least(1, 99):
            raise request_not_acceptable()
        if node_ident or portgroup_ident or address:
            raise BadRequest("Filtering by conductor_groups cannot be combined with node_ident, portgroup_ident, "
                             "or node address filters.")
        filters["conductor_groups"] = [group for group in groups.split(",") if group]
    if sum(1 for given in (node_ident, portgroup_ident, shard) if given) > 1:
        raise ApiError("Operation not permitted.", status=403)
    if portgroup_ident:
        filters["portgroup_id"] = _find_portgroup_id(state, req, portgroup_ident)
    elif node_ident:
        filters["node_id"] = common.find_node(state, req, node_ident)["id"]
    elif address:
        filters["address"] = resource_common.as_mac("address", address)
    elif shard:
        if not port_db.node_has_shard_column():
            return {"node_id": -1}
        filters["shard"] = [item for item in shard.split(",") if item]
    if not req.context.is_admin:
        filters["project"] = req.context.project_id or ""
    return filters


def _find_portgroup_id(state: BaremetalState, req: falcon.Request, ident: str) -> int:
    return resource_common.find_portgroup(state, req, ident)["id"]


def list_ports(state: BaremetalState, req: falcon.Request, resp: falcon.Response) -> None:
    _list(state, req, resp, detail_path=False)


def list_detail(state: BaremetalState, req: falcon.Request, resp: falcon.Response) -> None:
    _list(state, req, resp, detail_path=True)


def list_node_ports(state: BaremetalState, req: falcon.Request, resp: falcon.Response, node_ident: str) -> None:
    _list(state, req, resp, detail_path=False, node_ident=node_ident)


def list_node_ports_detail(state: BaremetalState, req: falcon.Request, resp: falcon.Response,
                           node_ident: str) -> None:
    _list(state, req, resp, detail_path=True, node_ident=node_ident)


def list_group_ports(state: BaremetalState, req: falcon.Request, resp: falcon.Response, portgroup_ident: str) -> None:
    _check_group_version(req)
    _list(state, req, resp, detail_path=False, portgroup_ident=portgroup_ident)


def list_group_ports_detail(state: BaremetalState, req: falcon.Request, resp: falcon.Response,
                            portgroup_ident: str) -> None:
    _check_group_version(req)
    _list(state, req, resp, detail_path=True, portgroup_ident=portgroup_ident)


def _check_group_version(req: falcon.Request) -> None:
    if not req.context.at_least(1, 24):
        raise NotFound("The resource could not be found.", routing=True)


# ---------------------------------------------------------- show/patch


def show(state: BaremetalState, req: falcon.Request, resp: falcon.Response, port_ident: str) -> None:
    port = find_port(state, req, port_ident)
    _authorize(state, req, "baremetal:port:get", port)
    send_json(resp, PORT.body(req, port, parse_fields(PORT, req)))


def patch(state: BaremetalState, req: falcon.Request, resp: falcon.Response, port_ident: str) -> None:
    operations = common.json_body(state, req)
    schemas.validate(schemas.PATCH, operations, "patch")
    resource_common.check_patch_fields(operations, PATCHABLE)
    for field in ("pxe_enabled", "local_link_connection", "portgroup_uuid", "physical_network", "is_smartnic",
                  "name", "description", "vendor", "category", "available_for_dynamic_portgroup", "node_ident"):
        if resource_common.is_path_updated(operations, f"/{field}"):
            _check_versions(req, {field: None})
    if resource_common.is_path_updated(operations, "/local_link_connection/network_type"):
        _check_versions(req, {"local_link_connection": {"network_type": None}})
    port = find_port(state, req, port_ident)
    _authorize(state, req, "baremetal:port:update", port)
    current = {key: copy.deepcopy(port.get(key)) for key in COLUMNS}
    current.update(node_uuid=port["node_uuid"], portgroup_uuid=port["portgroup_uuid"])
    patched = apply_patch(current, operations)
    for name in ("extra", "local_link_connection"):
        if patched.get(name) is None:
            patched[name] = {}
    new_node_ident = patched.pop("node_ident", None) or patched.get("node_uuid")
    patched["node_uuid"] = new_node_ident
    values = _normalized({key: value for key, value in patched.items() if value is not None or key in COLUMNS
                          if not (key == "address" and value is None)}, "patch")
    node = resource_common.patched_node(state, req, port, values["node_uuid"])
    portgroup_id = port["portgroup_id"]
    if resource_common.is_path_updated(operations, "/portgroup_uuid"):
        portgroup_id = None
        if values.get("portgroup_uuid"):
            portgroup_id = _portgroup_for_patch(state, values["portgroup_uuid"])
    if node["provision_state"] == "inspecting":
        raise Conflict(f'Cannot update port "{port["uuid"]}" on "{node["uuid"]}" while it is in state '
                       '"inspecting".')
    if resource_common.is_path_updated(operations, "/physical_network"):
        if values.get("physical_network") is not None and not values["physical_network"]:
            raise BadRequest("A non-empty value is required when setting physical_network")
        if portgroup_id is not None and req.context.at_least(1, 102):
            raise BadRequest("physical_network cannot be changed while the port belongs to a portgroup.")
    changes = {key: values.get(key) for key in COLUMNS}
    for key in ("pxe_enabled", "is_smartnic", "available_for_dynamic_portgroup"):
        if changes[key] is None:
            changes[key] = port[key]
    changes.update(node_id=node["id"], portgroup_id=portgroup_id)
    changes = {key: value for key, value in changes.items() if port.get(key) != value}
    if changes:
        common.conductor_call(state, node, "update_port", port_id=port["id"], values=changes)
    with state.db.read() as conn:
        updated = port_db.get_port(conn, port_id=port["id"])
    assert updated is not None
    send_json(resp, PORT.body(req, updated))


def _portgroup_for_patch(state: BaremetalState, uuid: str) -> int:
    with state.db.read() as conn:
        portgroup = port_db.get_portgroup(conn, uuid=uuid)
    if portgroup is None:
        raise BadRequest(f"Portgroup {uuid} could not be found.")
    return portgroup["id"]


# --------------------------------------------------------------- delete


def delete(state: BaremetalState, req: falcon.Request, resp: falcon.Response, port_ident: str) -> None:
    if not uuidutils.is_uuid_like(port_ident):
        raise BadRequest(f"Expected UUID for port_uuid: {port_ident}")
    port = find_port(state, req, port_ident)
    _authorize(state, req, "baremetal:port:delete", port)
    with state.db.read() as conn:
        node = node_db.get(conn, node_id=port["node_id"])
    assert node is not None
    common.conductor_call(state, node, "destroy_port", port_id=port["id"])
    send_empty(resp, 204)


ROUTES = [
    Route("/v1/ports", {"GET": list_ports, "POST": create}),
    Route("/v1/ports/detail", {"GET": list_detail}),
    Route("/v1/ports/{port_ident}", {"GET": show, "PATCH": patch, "DELETE": delete}),
    Route("/v1/nodes/{node_ident}/ports", {"GET": list_node_ports, "POST": create}),
    Route("/v1/nodes/{node_ident}/ports/detail", {"GET": list_node_ports_detail}),
    Route("/v1/portgroups/{portgroup_ident}/ports", {"GET": list_group_ports, "POST": create}),
    Route("/v1/portgroups/{portgroup_ident}/ports/detail", {"GET": list_group_ports_detail}),
]
