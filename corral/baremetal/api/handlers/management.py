"""Boot devices, NMI, interface validation, BIOS settings and RAID of a node."""

from __future__ import annotations

import re

import falcon
from oslo_utils import strutils, uuidutils

from corral.baremetal.api import common, views
from corral.baremetal.api.state import BaremetalState
from corral.baremetal.db import nodes as node_db
from corral.core.errors import BadRequest, NotFound
from corral.core.http import Endpoint, Route, send_empty, send_json


def get_boot_device(state: BaremetalState, req: falcon.Request, resp: falcon.Response, node_ident: str) -> None:
    node = common.find_node(state, req, node_ident)
    common.authorize(state, req, "baremetal:node:get_boot_device", node)
    send_json(resp, common.conductor_call(state, node, "get_boot_device"))


def set_boot_device(state: BaremetalState, req: falcon.Request, resp: falcon.Response, node_ident: str) -> None:
    node = common.find_node(state, req, node_ident)
    common.authorize(state, req, "baremetal:node:set_boot_device", node)
    body = common.json_body(state, req)
    if not isinstance(body, dict) or not isinstance(body.get("boot_device"), str):
        raise BadRequest("Missing mandatory parameter: boot_device")
    persistent = body.get("persistent", False)
    if not isinstance(persistent, bool):
        raise BadRequest(f"Invalid persistent value {persistent!r}: must be a boolean")
    common.conductor_call(state, node, "set_boot_device", device=body["boot_device"], persistent=persistent)
    send_empty(resp, 204)


def supported_boot_devices(state: BaremetalState, req: falcon.Request, resp: falcon.Response,
                           node_ident: str) -> None:
    node = common.find_node(state, req, node_ident)
    common.authorize(state, req, "baremetal:node:get_boot_device", node)
    send_json(resp, {"supported_boot_devices": common.conductor_call(state, node, "get_supported_boot_devices")})


def inject_nmi(state: BaremetalState, req: falcon.Request, resp: falcon.Response, node_ident: str) -> None:
    node = common.find_node(state, req, node_ident)
    common.authorize(state, req, "baremetal:node:inject_nmi", node)
    body = common.json_body(state, req, required=False)
    if body not in (None, {}):
        raise BadRequest("Schema error for inject_nmi: the body must be empty")
    common.conductor_call(state, node, "inject_nmi")
    send_empty(resp, 204)


def validate(state: BaremetalState, req: falcon.Request, resp: falcon.Response) -> None:
    ident = req.get_param("node") or req.get_param("node_uuid")
    if not ident:
        raise BadRequest("Missing mandatory parameter: node")
    node = common.find_node(state, req, ident)
    common.authorize(state, req, "baremetal:node:validate", node)
    send_json(resp, common.conductor_call(state, node, "validate_driver_interfaces"))


def validate_node(state: BaremetalState, req: falcon.Request, resp: falcon.Response, node_ident: str) -> None:
    node = common.find_node(state, req, node_ident)
    common.authorize(state, req, "baremetal:node:validate", node)
    send_json(resp, common.conductor_call(state, node, "validate_driver_interfaces"))


BIOS_REGISTRY_VERSION = (1, 74)
# What a BIOS registry tells about a setting (1.74); the fake BIOS has no registry.
BIOS_REGISTRY_FIELDS = ("attribute_type", "allowable_values", "lower_bound", "max_length", "min_length",
                        "read_only", "reset_required", "unique", "upper_bound")


def _bios_item(req: falcon.Request, node: dict, setting: dict, detail: bool = False) -> dict:
    item = {
        "name": setting["name"],
        "value": setting["value"],
        "created_at": views.timestamp(setting["created_at"]),
        "updated_at": views.timestamp(setting["updated_at"]),
    }
    if detail:
        item.update({field: setting.get(field) for field in BIOS_REGISTRY_FIELDS})
    item["links"] = views.links.resource(req, "nodes", node["uuid"], f"/bios/{setting['name']}")
    return item


def list_bios(state: BaremetalState, req: falcon.Request, resp: falcon.Response, node_ident: str) -> None:
    node = common.find_node(state, req, node_ident)
    common.authorize(state, req, "baremetal:node:bios:get", node)
    detail = req.get_param("detail")
    fields = req.get_param("fields")
    if (detail is not None or fields is not None) and not req.context.at_least(*BIOS_REGISTRY_VERSION):
        raise views.not_acceptable(BIOS_REGISTRY_VERSION)
    is_detail = detail is not None and strutils.bool_from_string(detail)
    with state.db.read() as conn:
        settings = node_db.bios_of(conn, node["id"])
    items = [_bios_item(req, node, setting, detail=is_detail or fields is not None) for setting in settings]
    if fields is not None:
        wanted = {field.strip() for field in fields.split(",") if field.strip()}
        unknown = wanted - {"name", "value", "created_at", "updated_at", *BIOS_REGISTRY_FIELDS}
        if unknown:
            raise BadRequest(f'Field(s) "{", ".join(sorted(unknown))}" are not valid')
        items = [{key: value for key, value in item.items() if key in wanted or key == "links"} for item in items]
    send_json(resp, {"bios": items})


def show_bios(state: BaremetalState, req: falcon.Request, resp: falcon.Response, node_ident: str,
              setting_name: str) -> None:
    node = common.find_node(state, req, node_ident)
    common.authorize(state, req, "baremetal:node:bios:get", node)
    with state.db.read() as conn:
        settings = {setting["name"]: setting for setting in node_db.bios_of(conn, node["id"])}
    if setting_name not in settings:
        raise NotFound(f"Node {node['uuid']} doesn't have a BIOS setting '{setting_name}'")
    detail = req.context.at_least(*BIOS_REGISTRY_VERSION)
    send_json(resp, {setting_name: _bios_item(req, node, settings[setting_name], detail=detail)})


def set_raid(state: BaremetalState, req: falcon.Request, resp: falcon.Response, node_ident: str) -> None:
    node = common.find_node(state, req, node_ident)
    common.authorize(state, req, "baremetal:node:set_raid_state", node)
    body = common.json_body(state, req)
    if not isinstance(body, dict) or ("logical_disks" in body and not isinstance(body["logical_disks"], list)):
        raise BadRequest("Invalid target RAID configuration: 'logical_disks' must be a list")
    common.conductor_call(state, node, "set_target_raid_config", config=body)
    send_empty(resp, 204)


def list_vifs(state: BaremetalState, req: falcon.Request, resp: falcon.Response, node_ident: str) -> None:
    node = common.find_node(state, req, node_ident)
    common.authorize(state, req, "baremetal:node:vif:list", node)
    send_json(resp, {"vifs": common.conductor_call(state, node, "vif_list")})


def attach_vif(state: BaremetalState, req: falcon.Request, resp: falcon.Response, node_ident: str) -> None:
    node = common.find_node(state, req, node_ident)
    common.authorize(state, req, "baremetal:node:vif:attach", node)
    body = common.json_body(state, req)
    if not isinstance(body, dict) or "id" not in body:
        raise BadRequest("Schema error for vif: 'id' is a required property")
    if not isinstance(body["id"], str):
        raise BadRequest(f"Schema error for vif: {body['id']!r} is not of type 'string'")
    if not _uuid_or_name(body["id"]):
        raise BadRequest(f"Expected UUID or name for id: {body['id']}")
    vif_info = {key: value for key, value in body.items()}
    if req.context.at_least(1, 67):
        if "port_uuid" in vif_info and "portgroup_uuid" in vif_info:
            raise BadRequest("Cannot specify both port_uuid and portgroup_uuid")
    else:
        # Choosing the port or port group arrived in 1.67; older requests cannot.
        vif_info.pop("port_uuid", None)
        vif_info.pop("portgroup_uuid", None)
    common.conductor_call(state, node, "vif_attach", vif_info=vif_info)
    send_empty(resp, 204)


def detach_vif(state: BaremetalState, req: falcon.Request, resp: falcon.Response, node_ident: str,
               vif_id: str) -> None:
    node = common.find_node(state, req, node_ident)
    common.authorize(state, req, "baremetal:node:vif:detach", node)
    if not _uuid_or_name(vif_id):
        raise BadRequest(f"Expected UUID or name for vif_id: {vif_id}")
    common.conductor_call(state, node, "vif_detach", vif_id=vif_id)
    send_empty(resp, 204)


def _uuid_or_name(value: str) -> bool:
    return uuidutils.is_uuid_like(value) or re.match(r"^[a-zA-Z0-9-._~]+$", value) is not None


ROUTES = [
    Route("/v1/nodes/{node_ident}/vifs", {"GET": Endpoint(list_vifs, min_version=(1, 28)),
                                         "POST": Endpoint(attach_vif, min_version=(1, 28))}),
    Route("/v1/nodes/{node_ident}/vifs/{vif_id}", {"DELETE": Endpoint(detach_vif, min_version=(1, 28))}),
    Route("/v1/nodes/{node_ident}/management/boot_device", {"GET": get_boot_device, "PUT": set_boot_device}),
    Route("/v1/nodes/{node_ident}/management/boot_device/supported", {"GET": supported_boot_devices}),
    Route("/v1/nodes/{node_ident}/management/inject_nmi", {"PUT": Endpoint(inject_nmi, min_version=(1, 29))}),
    Route("/v1/nodes/validate", {"GET": validate}),
    Route("/v1/nodes/{node_ident}/validate", {"GET": validate_node}),
    Route("/v1/nodes/{node_ident}/bios", {"GET": Endpoint(list_bios, min_version=(1, 40))}),
    Route("/v1/nodes/{node_ident}/bios/{setting_name}", {"GET": Endpoint(show_bios, min_version=(1, 40))}),
    Route("/v1/nodes/{node_ident}/states/raid", {"PUT": Endpoint(set_raid, min_version=(1, 12))}),
]
