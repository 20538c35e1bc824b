"""/os-aggregates: host aggregates, their hosts and metadata.

Host membership is mirrored to Placement (each of the host's compute node
providers is put in exactly the aggregates that hold the host), which is
what makes aggregate metadata usable as ``member_of`` when scheduling.
"""

from __future__ import annotations

import uuid as uuidlib
from typing import Any

import falcon
from sqlalchemy.engine import Connection

from corral.core import errors
from corral.core.http import Route, send_empty, send_json
from corral.compute.api import policies, util
from corral.compute.api.state import ComputeState
from corral.compute.cells import CellMapping, is_failure
from corral.compute.db import aggregates as db
from corral.compute.db import api_queries as q
from corral.compute.db import cell_queries as cq
from corral.compute.domain.scheduling import AZ_KEY
from corral.compute.scheduler import SchedulerUnavailable

UUID_IN_VIEW = (2, 41)

_NAME = {"type": "string", "minLength": 1, "maxLength": 255, "pattern": r"^[^\n\r]*\S[^\n\r]*$"}
_CREATE = util.Schema({
    "type": "object",
    "properties": {
        "aggregate": {
            "type": "object",
            "properties": {"name": _NAME, "availability_zone": {"type": ["string", "null"], "minLength": 1,
                                                                "maxLength": 255}},
            "required": ["name"],
            "additionalProperties": False,
        },
    },
    "required": ["aggregate"],
    "additionalProperties": False,
})
_UPDATE = util.Schema({
    "type": "object",
    "properties": {
        "aggregate": {
            "type": "object",
            "properties": {"name": _NAME, "availability_zone": {"type": ["string", "null"], "minLength": 1,
                                                                "maxLength": 255}},
            "minProperties": 1,
            "additionalProperties": False,
        },
    },
    "required": ["aggregate"],
    "additionalProperties": False,
})
_HOST = {"type": "object", "properties": {"host": {"type": "string", "minLength": 1, "maxLength": 255}},
         "required": ["host"], "additionalProperties": False}
_ACTION = util.Schema({
    "type": "object",
    "properties": {
        "add_host": _HOST,
        "remove_host": _HOST,
        "set_metadata": {
            "type": "object",
            "properties": {"metadata": {"type": "object", "patternProperties": {
                "^[a-zA-Z0-9-_:. ]{1,255}$": {"type": ["string", "null"], "maxLength": 255}},
                "additionalProperties": False}},
            "required": ["metadata"],
            "additionalProperties": False,
        },
    },
    "minProperties": 1,
    "maxProperties": 1,
    "additionalProperties": False,
})


def _view(req: falcon.Request, aggregate: dict[str, Any]) -> dict[str, Any]:
    view = {
        "id": aggregate["id"],
        "name": aggregate["name"],
        "availability_zone": aggregate["metadata"].get(AZ_KEY),
        "hosts": aggregate["hosts"],
        "metadata": aggregate["metadata"],
        "created_at": aggregate["created_at"].isoformat() if aggregate["created_at"] else None,
        "updated_at": aggregate["updated_at"].isoformat() if aggregate["updated_at"] else None,
        "deleted": False,
        "deleted_at": None,
    }
    if req.context.at_least(*UUID_IN_VIEW):
        view["uuid"] = aggregate["uuid"]
    return view


def _get(conn: Connection, aggregate_id: str) -> dict[str, Any]:
    try:
        ident = int(aggregate_id)
    except ValueError:
        raise errors.NotFound(f"Aggregate {aggregate_id} could not be found.") from None
    aggregate = db.get_aggregate(conn, ident)
    if aggregate is None:
        raise errors.NotFound(f"Aggregate {aggregate_id} could not be found.")
    return aggregate


def _check_zone_conflicts(conn: Connection, aggregate: dict[str, Any], zone: str | None, hosts: list[str]) -> None:
    """A host may be in one availability zone only."""
    if not zone:
        return
    for other in db.all_aggregates(conn):
        other_zone = other["metadata"].get(AZ_KEY)
        if other["id"] == aggregate["id"] or not other_zone or other_zone == zone:
            continue
        clash = sorted(set(other["hosts"]) & set(hosts))
        if clash:
            raise errors.BadRequest(
                f"Cannot update aggregate {aggregate['id']}. Reason: One or more hosts already in availability "
                f"zone(s) [{other_zone!r}]."
            )


def index(state: ComputeState, req: falcon.Request, resp: falcon.Response) -> None:
    util.authorize(state, req, policies.AGGREGATES_INDEX)
    with state.api_db.read() as conn:
        aggregates = db.all_aggregates(conn)
    send_json(resp, {"aggregates": [_view(req, a) for a in aggregates]})


def create(state: ComputeState, req: falcon.Request, resp: falcon.Response) -> None:
    util.authorize(state, req, policies.AGGREGATES_CREATE)
    body = util.json_body(state, req, _CREATE)["aggregate"]
    name = body["name"].strip()
    zone = body.get("availability_zone")

    def work(conn: Connection) -> dict[str, Any]:
        if db.name_taken(conn, name):
            raise errors.Conflict(f"Aggregate {name} already exists.")
        ident = db.create_aggregate(conn, str(uuidlib.uuid4()), name)
        if zone:
            db.set_metadata(conn, ident, {AZ_KEY: zone})
        found = db.get_aggregate(conn, ident)
        assert found is not None
        return found

    send_json(resp, {"aggregate": _view(req, state.api_db.write(work))})


def show(state: ComputeState, req: falcon.Request, resp: falcon.Response, aggregate_id: str) -> None:
    util.authorize(state, req, policies.AGGREGATES_SHOW)
    with state.api_db.read() as conn:
        aggregate = _get(conn, aggregate_id)
    send_json(resp, {"aggregate": _view(req, aggregate)})


def update(state: ComputeState, req: falcon.Request, resp: falcon.Response, aggregate_id: str) -> None:
    util.authorize(state, req, policies.AGGREGATES_UPDATE)
    body = util.json_body(state, req, _UPDATE)["aggregate"]

    def work(conn: Connection) -> dict[str, Any]:
        aggregate = _get(conn, aggregate_id)
        if "name" in body:
            name = body["name"].strip()
            if db.name_taken(conn, name, other_than=aggregate["id"]):
                raise errors.Conflict(f"Aggregate {name} already exists.")
            db.rename_aggregate(conn, aggregate["id"], name)
        if "availability_zone" in body:
            _check_zone_conflicts(conn, aggregate, body["availability_zone"], aggregate["hosts"])
            db.set_metadata(conn, aggregate["id"], {AZ_KEY: body["availability_zone"]})
        found = db.get_aggregate(conn, aggregate["id"])
        assert found is not None
        return found

    send_json(resp, {"aggregate": _view(req, state.api_db.write(work))})


def delete(state: ComputeState, req: falcon.Request, resp: falcon.Response, aggregate_id: str) -> None:
    util.authorize(state, req, policies.AGGREGATES_DELETE)

    def work(conn: Connection) -> None:
        aggregate = _get(conn, aggregate_id)
        if aggregate["hosts"]:
            raise errors.BadRequest(
                f"Cannot remove aggregate {aggregate_id}. Reason: Host aggregate is not empty."
            )
        db.delete_aggregate(conn, aggregate["id"])

    state.api_db.write(work)
    send_empty(resp, 200)


# ---------------------------------------------------------------- actions


def _host_cell(state: ComputeState, host: str) -> CellMapping:
    with state.api_db.read() as conn:
        mapping = q.host_mapping(conn, host)
    if mapping is None:
        raise errors.NotFound(f"Compute host {host} could not be found.")
    return state.cells.by_id(mapping.cell_id)


def sync_host_to_placement(state: ComputeState, host: str) -> None:
    """Put the host's compute node providers in exactly the aggregates that hold the host."""
    cell = _host_cell(state, host)

    def nodes(_cell: CellMapping, database: Any) -> list[dict[str, Any]]:
        with database.read() as conn:
            return cq.compute_nodes(conn, host)

    answer = state.cells.scatter_gather([cell], nodes)[cell.uuid]
    if is_failure(answer):
        raise errors.ApiError(f"The cell of host {host} cannot be reached.", status=503)
    with state.api_db.read() as conn:
        wanted = {a["uuid"] for a in db.all_aggregates(conn) if host in a["hosts"]}
    try:
        for node in answer:  # type: ignore[union-attr]
            state.scheduler.set_provider_aggregates(node["uuid"], wanted)
    except SchedulerUnavailable as error:
        raise errors.ApiError(f"Placement could not be updated: {error}", status=503) from error


def action(state: ComputeState, req: falcon.Request, resp: falcon.Response, aggregate_id: str) -> None:
    body = util.json_body(state, req, _ACTION)
    (name, args) = next(iter(body.items()))
    rule = {"add_host": policies.AGGREGATES_ADD_HOST, "remove_host": policies.AGGREGATES_REMOVE_HOST,
            "set_metadata": policies.AGGREGATES_SET_METADATA}[name]
    util.authorize(state, req, rule)
    host = args.get("host")
    if name == "add_host":
        _host_cell(state, host)

    def work(conn: Connection) -> dict[str, Any]:
        aggregate = _get(conn, aggregate_id)
        if name == "add_host":
            if host in aggregate["hosts"]:
                raise errors.Conflict(f"The aggregate {aggregate_id} already has host {host}.")
            _check_zone_conflicts(conn, aggregate, aggregate["metadata"].get(AZ_KEY), [host])
            db.add_host(conn, aggregate["id"], host)
        elif name == "remove_host":
            if not db.remove_host(conn, aggregate["id"], host):
                raise errors.NotFound(f"Cannot remove host {host} in aggregate {aggregate_id}: not found.")
        else:
            metadata = args["metadata"]
            if AZ_KEY in metadata:
                _check_zone_conflicts(conn, aggregate, metadata[AZ_KEY], aggregate["hosts"])
            db.set_metadata(conn, aggregate["id"], metadata)
        found = db.get_aggregate(conn, aggregate["id"])
        assert found is not None
        return found

    aggregate = state.api_db.write(work)
    if name in ("add_host", "remove_host"):
        sync_host_to_placement(state, host)
    send_json(resp, {"aggregate": _view(req, aggregate)})


ROUTES = [
    Route("/os-aggregates", {"GET": index, "POST": create}),
    Route("/os-aggregates/{aggregate_id}", {"GET": show, "PUT": update, "DELETE": delete}),
    Route("/os-aggregates/{aggregate_id}/action", {"POST": action}),
]
