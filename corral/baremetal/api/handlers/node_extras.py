"""Node endpoints of later microversions.

Indicators (1.63), boot mode and secure boot (1.76), history (1.78),
inventory (1.81), shards (1.82), children (1.83), firmware (1.86) and
virtual media (1.89; GET from 1.93).
"""

from __future__ import annotations

import urllib.parse
from typing import Any

import falcon
from oslo_utils import strutils, uuidutils

from corral.baremetal.api import common, links, schemas, views
from corral.baremetal.api.state import BaremetalState
from corral.baremetal.db import history as history_db
from corral.baremetal.domain import states
from corral.core.errors import BadRequest, Conflict, NotFound
from corral.core.http import Endpoint, Route, send_empty, send_json

INDICATORS_VERSION = (1, 63)
BOOT_MODE_VERSION = (1, 76)
HISTORY_VERSION = (1, 78)
HISTORY_PROJECT_VERSION = (1, 113)
HISTORY_FIELDS_VERSION = (1, 115)
INVENTORY_VERSION = (1, 81)
SHARDS_VERSION = (1, 82)
CHILDREN_VERSION = (1, 83)
FIRMWARE_VERSION = (1, 86)
FIRMWARE_IDENTITY_VERSION = (1, 114)
VMEDIA_VERSION = (1, 89)
VMEDIA_GET_VERSION = (1, 93)

BOOT_MODES = ("bios", "uefi")
VMEDIA_DEVICES = ("disk", "cdrom", "floppy")
VMEDIA_URL_SCHEMES = ("http", "https", "nfs", "cifs", "smb")
UNSTABLE = states.WORKING_STATES | states.WAITING_STATES

# ----------------------------------------------------------- indicators


def _split_indicator(unique_name: str) -> tuple[str, str]:
    name, at, component = unique_name.partition("@")
    if not at:
        raise BadRequest(f'Malformed indicator name "{unique_name}"')
    return component, name


def _indicator_body(req: falcon.Request, node_ident: str, component: str, name: str,
                    details: dict[str, Any]) -> dict[str, Any]:
    unique = f"{name}@{component}"
    return {"name": unique, "component": component, "readonly": details.get("readonly", True),
            "states": list(details.get("states", [])),
            "links": links.resource(req, "nodes", node_ident, f"/management/indicators/{unique}")}


def list_indicators(state: BaremetalState, req: falcon.Request, resp: falcon.Response, node_ident: str) -> None:
    node = common.find_node(state, req, node_ident)
    common.authorize(state, req, "baremetal:node:get_indicator_state", node)
    supported = common.conductor_call(state, node, "get_supported_indicators")
    send_json(resp, {"indicators": [_indicator_body(req, node_ident, component, name, details)
                                    for component, names in supported.items()
                                    for name, details in names.items()]})


def get_indicator(state: BaremetalState, req: falcon.Request, resp: falcon.Response, node_ident: str,
                  indicator: str) -> None:
    node = common.find_node(state, req, node_ident)
    common.authorize(state, req, "baremetal:node:get_indicator_state", node)
    component, name = _split_indicator(indicator)
    send_json(resp, {"state": common.conductor_call(state, node, "get_indicator_state", component=component,
                                                    indicator=name)})


def set_indicator(state: BaremetalState, req: falcon.Request, resp: falcon.Response, node_ident: str,
                  indicator: str) -> None:
    node = common.find_node(state, req, node_ident)
    common.authorize(state, req, "baremetal:node:set_indicator_state", node)
    body = common.json_body(state, req)
    if not isinstance(body, dict) or not isinstance(body.get("state"), str):
        raise BadRequest("Missing mandatory parameter: state")
    component, name = _split_indicator(indicator)
    common.conductor_call(state, node, "set_indicator_state", component=component, indicator=name,
                          target=body["state"])
    send_empty(resp, 204)


# ------------------------------------------------------------ boot mode


def _check_stable(node: dict[str, Any]) -> None:
    if node["provision_state"] in UNSTABLE:
        raise Conflict(f"Node is in {node['provision_state']} state. Since node is transitioning, the boot mode "
                       "will not be set as this may interfere with ongoing changes and result in erroneous "
                       "modification. Try again later.")


def _require_boot_mode_version(req: falcon.Request) -> None:
    if not req.context.at_least(*BOOT_MODE_VERSION):
        raise NotFound("This endpoint is supported starting with the API version 1.76")


def set_boot_mode(state: BaremetalState, req: falcon.Request, resp: falcon.Response, node_ident: str) -> None:
    node = common.find_node(state, req, node_ident)
    common.authorize(state, req, "baremetal:node:set_boot_mode", node)
    _require_boot_mode_version(req)
    body = common.json_body(state, req)
    target = body.get("target") if isinstance(body, dict) else None
    if target is None:
        raise BadRequest("Missing mandatory parameter: target")
    if target not in BOOT_MODES:
        raise BadRequest(f"Invalid boot mode {target} requested for node. Allowed boot modes are: "
                         f"{', '.join(BOOT_MODES)}")
    _check_stable(node)
    common.conductor_call(state, node, "set_boot_mode", mode=target)
    common.accepted(resp, f"{links.base(req)}/v1/nodes/{node_ident}/states")


def set_secure_boot(state: BaremetalState, req: falcon.Request, resp: falcon.Response, node_ident: str) -> None:
    node = common.find_node(state, req, node_ident)
    common.authorize(state, req, "baremetal:node:set_secure_boot", node)
    _require_boot_mode_version(req)
    body = common.json_body(state, req)
    target = body.get("target") if isinstance(body, dict) else None
    if target is None:
        raise BadRequest("Missing mandatory parameter: target")
    try:
        enabled = strutils.bool_from_string(target, strict=True)
    except ValueError as error:
        raise BadRequest(f"Invalid target: {error}") from None
    _check_stable(node)
    common.conductor_call(state, node, "set_secure_boot", enabled=enabled)
    common.accepted(resp, f"{links.base(req)}/v1/nodes/{node_ident}/states")


# -------------------------------------------------------------- history

STANDARD_HISTORY = ("uuid", "created_at", "severity", "event")
DETAIL_HISTORY = ("uuid", "created_at", "severity", "event_type", "event", "conductor", "user", "project", "state",
                  "target_provision_state", "duration_seconds")


def _history_body(req: falcon.Request, node: dict[str, Any], entry: dict[str, Any], detail: bool) -> dict[str, Any]:
    fields = DETAIL_HISTORY if detail else STANDARD_HISTORY
    body: dict[str, Any] = {}
    for field in fields:
        if field == "project" and not req.context.at_least(*HISTORY_PROJECT_VERSION):
            continue
        if (field in ("state", "target_provision_state", "duration_seconds")
                and not req.context.at_least(*HISTORY_FIELDS_VERSION)):
            continue
        value = entry.get(field)
        body[field] = views.timestamp(value) if field == "created_at" else value
    if not detail and body["event"] and len(body["event"]) > 255:
        body["event"] = body["event"][:251] + "..."
    body["links"] = [{"href": f"{links.base(req)}/v1/nodes/{node['uuid']}/history/{entry['uuid']}",
                      "rel": "self"}]
    return body


def list_history(state: BaremetalState, req: falcon.Request, resp: falcon.Response, node_ident: str) -> None:
    node = common.find_node(state, req, node_ident)
    common.authorize(state, req, "baremetal:node:history:get", node)
    detail = strutils.bool_from_string(req.get_param("detail") or "false")
    if req.get_param("sort_key") is None:
        req.params["sort_key"] = "created_at"
    limit, sort_key, sort_dir, marker = common.paging(
        state, req, sort_keys=history_db.HISTORY_SORT_KEYS, kind="Node history record",
        find_marker=lambda conn, uuid: history_db.history_entry(conn, uuid))
    with state.db.read() as conn:
        found = history_db.history_of(conn, node["id"], sort_key=sort_key, sort_dir=sort_dir, limit=limit,
                                      marker=marker)
    body: dict[str, Any] = {"history": [_history_body(req, node, entry, detail) for entry in found]}
    if found and len(found) == limit:
        query = urllib.parse.urlencode({"limit": limit, "marker": found[-1]["uuid"], "sort_key": sort_key,
                                        "sort_dir": sort_dir})
        body["next"] = f"{links.base(req)}/v1/nodes/{node_ident}/history?{query}"
    send_json(resp, body)


def show_history(state: BaremetalState, req: falcon.Request, resp: falcon.Response, node_ident: str,
                 event: str) -> None:
    node = common.find_node(state, req, node_ident)
    common.authorize(state, req, "baremetal:node:history:get", node)
    entry = None
    if uuidutils.is_uuid_like(event):
        with state.db.read() as conn:
            entry = history_db.history_entry(conn, event)
    if entry is None or entry["node_id"] != node["id"]:
        raise NotFound(f"Node history record {event} could not be found.")
    send_json(resp, _history_body(req, node, entry, detail=True))


# ------------------------------------------------------------ inventory


def show_inventory(state: BaremetalState, req: falcon.Request, resp: falcon.Response, node_ident: str) -> None:
    node = common.find_node(state, req, node_ident)
    common.authorize(state, req, "baremetal:node:inventory:get", node)
    with state.db.read() as conn:
        found = history_db.inventory_of(conn, node["id"])
    if found is None:
        raise NotFound(f"Node inventory record for node {node['uuid']} could not be found.")
    send_json(resp, {"inventory": found["inventory_data"], "plugin_data": found["plugin_data"]})


# ------------------------------------------------------ shards, children


def list_shards(state: BaremetalState, req: falcon.Request, resp: falcon.Response) -> None:
    common.authorize(state, req, "baremetal:shards:get")
    with state.db.read() as conn:
        send_json(resp, {"shards": history_db.shards(conn)})


def list_children(state: BaremetalState, req: falcon.Request, resp: falcon.Response, node_ident: str) -> None:
    node = common.find_node(state, req, node_ident)
    project = None if common.allowed(state, req, "baremetal:node:list_all") else req.context.project_id
    with state.db.read() as conn:
        children = history_db.children_of(conn, node["uuid"], project)
    send_json(resp, {"children": children,
                     "links": {"href": f"{links.base(req)}/v1/nodes?parent_node={node['uuid']}",
                               "rel": "children"}})


# ------------------------------------------------------------- firmware

FIRMWARE_FIELDS = ("component", "initial_version", "current_version", "last_version_flashed")
FIRMWARE_IDENTITY = ("vendor", "model", "serial_number")


def list_firmware(state: BaremetalState, req: falcon.Request, resp: falcon.Response, node_ident: str) -> None:
    node = common.find_node(state, req, node_ident)
    common.authorize(state, req, "baremetal:node:firmware:get", node)
    fields = FIRMWARE_FIELDS
    if req.context.at_least(*FIRMWARE_IDENTITY_VERSION):
        fields = FIRMWARE_FIELDS + FIRMWARE_IDENTITY
    with state.db.read() as conn:
        components = history_db.firmware_of(conn, node["id"])
    items = []
    for component in components:
        item: dict[str, Any] = {"created_at": views.timestamp(component["created_at"]),
                                "updated_at": views.timestamp(component["updated_at"])}
        item.update({field: component.get(field) for field in fields})
        items.append(item)
    send_json(resp, {"firmware": items})


# -------------------------------------------------------- virtual media

VMEDIA_SCHEMA = {
    "type": "object",
    "properties": {
        "device_type": {"type": "string", "enum": list(VMEDIA_DEVICES)},
        "image_url": {"type": "string"},
        "image_download_source": {"type": "string", "enum": ["http", "local", "swift"]},
    },
    "required": ["device_type", "image_url"],
    "additionalProperties": False,
}


def get_vmedia(state: BaremetalState, req: falcon.Request, resp: falcon.Response, node_ident: str) -> None:
    node = common.find_node(state, req, node_ident)
    common.authorize(state, req, "baremetal:node:vmedia:get", node)
    send_json(resp, common.conductor_call(state, node, "get_virtual_media"))


def attach_vmedia(state: BaremetalState, req: falcon.Request, resp: falcon.Response, node_ident: str) -> None:
    body = common.json_body(state, req)
    schemas.validate(VMEDIA_SCHEMA, body, "vmedia")
    scheme = urllib.parse.urlparse(body["image_url"]).scheme
    if scheme not in VMEDIA_URL_SCHEMES:
        raise BadRequest(f"Unsupported or missing URL scheme: {scheme}")
    node = common.find_node(state, req, node_ident)
    common.authorize(state, req, "baremetal:node:vmedia:attach", node)
    common.conductor_call(state, node, "attach_virtual_media", device_type=body["device_type"],
                          image_url=body["image_url"],
                          image_download_source=body.get("image_download_source", "local"))
    send_empty(resp, 204)


def detach_vmedia(state: BaremetalState, req: falcon.Request, resp: falcon.Response, node_ident: str) -> None:
    raw = req.get_param("device_types")
    device_types = None
    if raw:
        device_types = list(dict.fromkeys(item.strip().lower() for item in raw.split(",") if item.strip()))
        invalid = [item for item in device_types if item not in VMEDIA_DEVICES]
        if invalid:
            raise BadRequest(f"Invalid device type(s) {', '.join(invalid)} (valid are {', '.join(VMEDIA_DEVICES)})")
    node = common.find_node(state, req, node_ident)
    common.authorize(state, req, "baremetal:node:vmedia:detach", node)
    common.conductor_call(state, node, "detach_virtual_media", device_types=device_types)
    send_empty(resp, 204)


def _from(version: tuple[int, int], handler: object) -> Endpoint:
    return Endpoint(handler, min_version=version)  # type: ignore[arg-type]


ROUTES = [
    Route("/v1/nodes/{node_ident}/management/indicators",
          {"GET": _from(INDICATORS_VERSION, list_indicators)}),
    Route("/v1/nodes/{node_ident}/management/indicators/{indicator}",
          {"GET": _from(INDICATORS_VERSION, get_indicator), "PUT": _from(INDICATORS_VERSION, set_indicator)}),
    Route("/v1/nodes/{node_ident}/states/boot_mode", {"PUT": set_boot_mode}),
    Route("/v1/nodes/{node_ident}/states/secure_boot", {"PUT": set_secure_boot}),
    Route("/v1/nodes/{node_ident}/history", {"GET": _from(HISTORY_VERSION, list_history)}),
    Route("/v1/nodes/{node_ident}/history/{event}", {"GET": _from(HISTORY_VERSION, show_history)}),
    Route("/v1/nodes/{node_ident}/inventory", {"GET": _from(INVENTORY_VERSION, show_inventory)}),
    Route("/v1/shards", {"GET": _from(SHARDS_VERSION, list_shards)}),
    Route("/v1/nodes/{node_ident}/children", {"GET": _from(CHILDREN_VERSION, list_children)}),
    Route("/v1/nodes/{node_ident}/firmware", {"GET": _from(FIRMWARE_VERSION, list_firmware)}),
    Route("/v1/nodes/{node_ident}/vmedia", {"GET": _from(VMEDIA_GET_VERSION, get_vmedia),
                                           "POST": _from(VMEDIA_VERSION, attach_vmedia),
                                           "DELETE": _from(VMEDIA_VERSION, detach_vmedia)}),
]
