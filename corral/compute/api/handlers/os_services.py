"""/os-services: list (with minimal records for down cells at 2.69), enable/disable, force down."""

from __future__ import annotations

from typing import Any

import falcon

from corral.core import errors
from corral.core.http import Endpoint, Route, send_empty, send_json
from corral.compute.api import policies, util
from corral.compute.api.state import ComputeState
from corral.compute.db import aggregates as agg_db
from corral.compute.domain import services as domain
from corral.compute.domain.scheduling import COMPUTE_BINARY, host_zones

FORCED_DOWN = (2, 11)
UUID_IDS = (2, 53)
CELL_DOWN_SUPPORT = (2, 69)

_UPDATE = util.Schema({
    "type": "object",
    "properties": {
        "status": {"type": "string", "enum": ["enabled", "disabled"]},
        "disabled_reason": {"type": "string", "minLength": 1, "maxLength": 255},
        "forced_down": {"type": "boolean"},
    },
    "additionalProperties": False,
})
_LEGACY_UPDATE = util.Schema({
    "type": "object",
    "properties": {
        "host": {"type": "string", "minLength": 1, "maxLength": 255},
        "binary": {"type": "string", "minLength": 1, "maxLength": 255},
        "disabled_reason": {"type": "string", "minLength": 1, "maxLength": 255},
        "forced_down": {"type": "boolean"},
    },
    "required": ["host", "binary"],
    "additionalProperties": False,
})


def _zones(state: ComputeState) -> dict[str, str]:
    with state.api_db.read() as conn:
        return host_zones(agg_db.all_aggregates(conn))


def _view(state: ComputeState, req: falcon.Request, row: dict[str, Any], zones: dict[str, str]) -> dict[str, Any]:
    conf = state.conf
    if row["binary"] == COMPUTE_BINARY:
        zone = zones.get(row["host"], conf.compute.default_availability_zone)
    else:
        zone = conf.compute.internal_service_availability_zone
    view: dict[str, Any] = {
        "id": row["uuid"] if req.context.at_least(*UUID_IDS) else row["id"],
        "binary": row["binary"],
        "host": row["host"],
        "zone": zone,
        "status": "disabled" if row["disabled"] else "enabled",
        "state": "up" if domain.is_up(conf, row) else "down",
        "updated_at": util.iso_micro(row["updated_at"]),
        "disabled_reason": row["disabled_reason"],
    }
    if req.context.at_least(*FORCED_DOWN):
        view["forced_down"] = bool(row["forced_down"])
    return view


def index(state: ComputeState, req: falcon.Request, resp: falcon.Response) -> None:
    util.authorize(state, req, policies.SERVICES_LIST)
    entries = domain.list_services(
        state,
        host=util.last_value(req, "host"),
        binary=util.last_value(req, "binary"),
        minimal_for_down=req.context.at_least(*CELL_DOWN_SUPPORT),
    )
    zones = _zones(state)
    services = []
    for entry in entries:
        if entry.row is None:
            services.append({"binary": entry.binary, "host": entry.host, "status": "UNKNOWN"})
        else:
            services.append(_view(state, req, entry.row, zones))
    send_json(resp, {"services": services})


def update(state: ComputeState, req: falcon.Request, resp: falcon.Response, service_id: str) -> None:
    """PUT /os-services/{uuid} (2.53+)."""
    util.authorize(state, req, policies.SERVICES_UPDATE)
    body = util.json_body(state, req, _UPDATE)
    if not body:
        raise errors.BadRequest("No updates were requested. Fields 'status' or 'forced_down' should be specified.")
    if "disabled_reason" in body and body.get("status") != "disabled":
        raise errors.BadRequest("Specifying 'disabled_reason' with status other than 'disabled' is invalid.")
    cell, row = domain.find_service(state, uuid=service_id)
    values: dict[str, Any] = {}
    if "status" in body:
        values["disabled"] = body["status"] == "disabled"
        values["disabled_reason"] = body.get("disabled_reason") if values["disabled"] else None
    if "forced_down" in body:
        values["forced_down"] = body["forced_down"]
    updated = domain.update_service(state, cell, row["id"], **values)
    send_json(resp, {"service": _view(state, req, updated, _zones(state))})


def legacy_action(state: ComputeState, req: falcon.Request, resp: falcon.Response, action: str) -> None:
    """PUT /os-services/{enable,disable,disable-log-reason,force-down} (before 2.53)."""
    util.authorize(state, req, policies.SERVICES_UPDATE)
    body = util.json_body(state, req, _LEGACY_UPDATE)
    values: dict[str, Any]
    if action == "enable":
        values = {"disabled": False, "disabled_reason": None}
    elif action == "disable":
        values = {"disabled": True}
    elif action == "disable-log-reason":
        if "disabled_reason" not in body:
            raise errors.BadRequest("Missing disabled reason field")
        values = {"disabled": True, "disabled_reason": body["disabled_reason"]}
    elif action == "force-down" and req.context.at_least(*FORCED_DOWN):
        if "forced_down" not in body:
            raise errors.BadRequest("Missing forced_down field")
        values = {"forced_down": body["forced_down"]}
    else:
        raise errors.NotFound("Unknown action")
    cell, row = domain.find_service(state, host=body["host"], binary=body["binary"])
    updated = domain.update_service(state, cell, row["id"], **values)
    service: dict[str, Any] = {"host": updated["host"], "binary": updated["binary"]}
    if action == "force-down":
        service["forced_down"] = bool(updated["forced_down"])
    else:
        service["status"] = "disabled" if updated["disabled"] else "enabled"
        if action == "disable-log-reason":
            service["disabled_reason"] = updated["disabled_reason"]
    send_json(resp, {"service": service})


def delete(state: ComputeState, req: falcon.Request, resp: falcon.Response, service_id: str) -> None:
    util.authorize(state, req, policies.SERVICES_DELETE)
    cell, row = domain.find_service(state, uuid=service_id)

    def work(_cell: Any, database: Any) -> None:
        from corral.compute.db import cell_queries as cq

        database.write(cq.delete_service, row["id"])

    state.cells.run_in_cell(cell, work)
    send_empty(resp, 204)


def put(state: ComputeState, req: falcon.Request, resp: falcon.Response, service_id: str) -> None:
    # Before 2.53 the last path segment names an action, from 2.53 a service.
    if req.context.at_least(*UUID_IDS):
        update(state, req, resp, service_id)
    else:
        legacy_action(state, req, resp, service_id)


ROUTES = [
    Route("/os-services", {"GET": index}),
    Route("/os-services/{service_id}", {"PUT": put, "DELETE": Endpoint(delete, min_version=UUID_IDS)}),
]
