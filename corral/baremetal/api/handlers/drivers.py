"""Drivers (hardware types with live conductors) and conductors (1.49)."""

from __future__ import annotations

from typing import Any

import falcon
from oslo_utils import strutils

from corral.baremetal.api import common, links, views
from corral.baremetal.api.state import BaremetalState
from corral.baremetal.db import conductors as conductor_db
from corral.baremetal.drivers.base import INTERFACE_TYPES
from corral.core.errors import BadRequest, NotAcceptable, NotFound
from corral.core.http import Endpoint, Route, send_json


def _live_hardware(state: BaremetalState) -> dict[str, dict[str, Any]]:
    """Hardware type -> {"hosts": [...], "interfaces": {type: (default, [enabled])}}."""
    with state.db.read() as conn:
        live = conductor_db.alive(conn, state.conf.conductor.heartbeat_timeout)
        rows = conductor_db.interfaces_of(conn, [conductor["id"] for conductor in live])
    found: dict[str, dict[str, Any]] = {}
    for conductor in live:
        for name in conductor["drivers"]:
            entry = found.setdefault(name, {"hosts": set(), "interfaces": {}})
            entry["hosts"].add(conductor["hostname"])
    for row in rows:
        entry = found.get(row["hardware_type"])
        if entry is None:
            continue
        default, enabled = entry["interfaces"].get(row["interface_type"], (None, []))
        if row["interface_name"] not in enabled:
            enabled.append(row["interface_name"])
        if row["default"]:
            default = row["interface_name"]
        entry["interfaces"][row["interface_type"]] = (default, enabled)
    return found


def _driver_body(req: falcon.Request, name: str, entry: dict[str, Any], detail: bool) -> dict[str, Any]:
    body: dict[str, Any] = {"hosts": sorted(entry["hosts"]), "name": name}
    if req.context.at_least(1, 30):
        body["type"] = "dynamic"
    body["links"] = links.resource(req, "drivers", name)
    body["properties"] = links.resource(req, "drivers", name, "/properties")
    if detail and req.context.at_least(1, 30):
        for interface_type in INTERFACE_TYPES:
            if interface_type == "firmware" and not req.context.at_least(1, 86):
                continue
            if not views.visible(f"{interface_type}_interface", req):
                continue
            default, enabled = entry["interfaces"].get(interface_type, (None, []))
            body[f"default_{interface_type}_interface"] = default
            body[f"enabled_{interface_type}_interfaces"] = sorted(enabled)
    return body


def list_drivers(state: BaremetalState, req: falcon.Request, resp: falcon.Response) -> None:
    common.authorize(state, req, "baremetal:driver:get")
    driver_type = req.get_param("type")
    if driver_type is not None and driver_type not in ("classic", "dynamic"):
        raise BadRequest(f"Invalid driver type {driver_type!r}: must be 'classic' or 'dynamic'")
    detail = req.get_param("detail")
    is_detail = detail is not None and strutils.bool_from_string(detail)
    fields = _fields(req)
    found = {} if driver_type == "classic" else _live_hardware(state)
    send_json(resp, {"drivers": [_selected(_driver_body(req, name, entry, is_detail or fields is not None), fields)
                                 for name, entry in sorted(found.items())]})


def _fields(req: falcon.Request) -> list[str] | None:
    """``?fields=`` on drivers (1.77)."""
    raw = req.get_param("fields")
    if raw is None:
        return None
    if not req.context.at_least(1, 77):
        raise NotAcceptable("Request not acceptable.")
    return [field.strip() for field in raw.split(",") if field.strip()]


def _selected(body: dict[str, Any], fields: list[str] | None) -> dict[str, Any]:
    if fields is None:
        return body
    unknown = set(fields) - set(body)
    if unknown:
        raise BadRequest(f'Field(s) "{", ".join(sorted(unknown))}" are not valid')
    return {key: value for key, value in body.items() if key in fields}


def show_driver(state: BaremetalState, req: falcon.Request, resp: falcon.Response, driver_name: str) -> None:
    common.authorize(state, req, "baremetal:driver:get")
    fields = _fields(req)
    entry = _live_hardware(state).get(driver_name)
    if entry is None:
        raise NotFound(f"Could not find the following driver(s) or hardware type(s): {driver_name}.")
    send_json(resp, _selected(_driver_body(req, driver_name, entry, detail=True), fields))


def driver_properties(state: BaremetalState, req: falcon.Request, resp: falcon.Response, driver_name: str) -> None:
    common.authorize(state, req, "baremetal:driver:get")
    if driver_name not in _live_hardware(state):
        raise NotFound(f"Could not find the following driver(s) or hardware type(s): {driver_name}.")
    properties: dict[str, str] = {}
    if driver_name == "redfish":
        properties = {
            "redfish_address": "The URL address to the Redfish controller. Required.",
            "redfish_system_id": "The canonical path to the ComputerSystem resource. Optional.",
            "redfish_username": "User account with admin/server-profile access privilege. Optional.",
            "redfish_password": "User account password. Optional.",
            "redfish_verify_ca": "Whether to verify the BMC's TLS certificate. Optional.",
        }
    send_json(resp, properties)


# Upstream's RAID logical disk properties (ironic.common.raid's schema), as
# every RAID interface but "no-raid" reports them.
LOGICAL_DISK_PROPERTIES = {
    "raid_level": "RAID level for the logical disk. Valid values are 'JBOD', '0', '1', '2', '5', '6', '1+0', "
                  "'5+0' and '6+0'. Required.",
    "size_gb": "Size in GiB (Integer) for the logical disk. Use 'MAX' as size_gb if this logical disk is supposed "
               "to use the rest of the space available. Required.",
    "volume_name": "Name of the volume to be created. If this is not specified, it will be auto-generated. "
                   "Optional.",
    "is_root_volume": "Specifies whether this disk is a root volume. By default, this is False. Optional.",
    "share_physical_disks": "Specifies whether other logical disks can share physical disks with this logical "
                            "disk. By default, this is False. Optional.",
    "disk_type": "The type of disk preferred. Valid values are 'hdd' and 'ssd'. If this is not specified, disk "
                 "type will not be a selection criterion for choosing backing physical disks. Optional.",
    "interface_type": "The interface type of disk. Valid values are 'sata', 'scsi' and 'sas'. If this is not "
                      "specified, interface type will not be a selection criterion for choosing backing physical "
                      "disks. Optional.",
    "number_of_physical_disks": "Number of physical disks to use for this logical disk. By default, the driver "
                                "uses the minimum number of disks required for that RAID level. Optional.",
    "controller": "Controller to use for this logical disk. If not specified, the driver will choose a suitable "
                  "RAID controller on the bare metal node. Optional.",
    "physical_disks": "The physical disks to use for this logical disk. If not specified, the driver will choose "
                      "suitable physical disks to use. Optional.",
}


def raid_logical_disk_properties(state: BaremetalState, req: falcon.Request, resp: falcon.Response,
                                 driver_name: str) -> None:
    """``GET /v1/drivers/{driver}/raid/logical_disk_properties`` (1.12): what a logical disk may say."""
    if not req.context.at_least(1, 12):
        raise NotAcceptable("Request not acceptable.")
    common.authorize(state, req, "baremetal:driver:get")
    entry = _live_hardware(state).get(driver_name)
    if entry is None:
        raise NotFound(f"The driver '{driver_name}' is unknown.")
    default_raid = entry["interfaces"]["raid"][0]
    if default_raid == "no-raid":
        raise BadRequest(f"Driver {driver_name} does not support raid (disabled or not implemented).")
    send_json(resp, LOGICAL_DISK_PROPERTIES)


# --------------------------------------------------------- conductors


def _conductor_body(req: falcon.Request, conductor: dict[str, Any], alive: bool, detail: bool,
                    fields: list[str] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "hostname": conductor["hostname"],
        "conductor_group": conductor["conductor_group"] or "",
        "alive": alive,
    }
    if detail:
        body["created_at"] = views.timestamp(conductor["created_at"])
        body["updated_at"] = views.timestamp(conductor["updated_at"])
        body["drivers"] = conductor["drivers"]
    body["links"] = links.resource(req, "conductors", conductor["hostname"])
    if fields is not None:
        body = {key: value for key, value in body.items() if key in fields or key == "links"}
    return body


def list_conductors(state: BaremetalState, req: falcon.Request, resp: falcon.Response) -> None:
    common.authorize(state, req, "baremetal:conductor:get")
    detail = req.get_param("detail")
    is_detail = detail is not None and strutils.bool_from_string(detail)
    with state.db.read() as conn:
        everyone = conductor_db.all_conductors(conn)
        alive = {c["hostname"] for c in conductor_db.alive(conn, state.conf.conductor.heartbeat_timeout)}
    send_json(resp, {"conductors": [
        _conductor_body(req, conductor, conductor["hostname"] in alive, is_detail) for conductor in everyone
    ]})


def show_conductor(state: BaremetalState, req: falcon.Request, resp: falcon.Response, hostname: str) -> None:
    common.authorize(state, req, "baremetal:conductor:get")
    with state.db.read() as conn:
        conductor = conductor_db.get(conn, hostname)
        alive = {c["hostname"] for c in conductor_db.alive(conn, state.conf.conductor.heartbeat_timeout)}
    if conductor is None:
        raise NotFound(f"Conductor {hostname} could not be found.")
    send_json(resp, _conductor_body(req, conductor, hostname in alive, detail=True))


ROUTES = [
    Route("/v1/drivers", {"GET": list_drivers}),
    Route("/v1/drivers/{driver_name}", {"GET": show_driver}),
    Route("/v1/drivers/{driver_name}/properties", {"GET": driver_properties}),
    Route("/v1/drivers/{driver_name}/raid/logical_disk_properties", {"GET": raid_logical_disk_properties}),
    Route("/v1/conductors", {"GET": Endpoint(list_conductors, min_version=(1, 49))}),
    Route("/v1/conductors/{hostname}", {"GET": Endpoint(show_conductor, min_version=(1, 49))}),
]
