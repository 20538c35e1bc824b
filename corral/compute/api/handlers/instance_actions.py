"""/servers/{id}/os-instance-actions[/{request_id}]: what was asked of a server, with its events.

As upstream: newest first; from 2.21 a deleted server's actions are
shown too; events are shown to admins (with ``traceback``, and ``host``
from 2.62) and, from 2.51, to the server's project without them; from
2.58 ``updated_at``, paging (``limit``, ``marker`` a request id, with a
``links`` next page) and ``changes-since`` (``changes-before`` from
2.66); from 2.62 each event's ``hostId``.
"""

from __future__ import annotations

import datetime
from typing import Any
from urllib.parse import urlencode

import falcon

from corral.core import errors
from corral.core.http import Route, send_json
from corral.compute.api import links, policies, util, views
from corral.compute.api.state import ComputeState
from corral.compute.cells import CellMapping
from corral.compute.db import api_queries as q
from corral.compute.db import cell_queries as cq
from corral.compute.db import server_records as records
from corral.compute.domain import servers

DELETED_SERVERS = (2, 21)
EVENTS_FOR_OWNERS = (2, 51)
PAGING = (2, 58)
HOST_IN_EVENTS = (2, 62)
CHANGES_BEFORE = (2, 66)

ACTION_KEYS = ("action", "instance_uuid", "request_id", "user_id", "project_id", "start_time", "message")


def _server(state: ComputeState, req: falcon.Request, server_id: str) -> tuple[Any, CellMapping]:
    """The server's mapping and cell; 404 for other projects' and (before 2.21) deleted servers."""
    context = req.context
    with state.api_db.read() as conn:
        mapping = q.instance_mapping(conn, server_id)
    if mapping is None or mapping.cell_id is None or not (context.is_admin or context.project_id == mapping.project_id):
        raise servers.not_found(server_id)
    cell = state.cells.by_id(mapping.cell_id)
    read_deleted = context.at_least(*DELETED_SERVERS)

    def exists(_cell: CellMapping, database: Any) -> bool:
        with database.read() as conn:
            return cq.get_instance(conn, server_id, read_deleted=read_deleted) is not None

    if not state.cells.run_in_cell(cell, exists):
        raise servers.not_found(server_id)
    return mapping, cell


def _time(value: Any) -> str | None:
    if isinstance(value, str):
        value = datetime.datetime.fromisoformat(value)
    return util.iso_micro(value)


def _action_view(req: falcon.Request, action: dict[str, Any]) -> dict[str, Any]:
    view = {key: action.get(key) for key in ACTION_KEYS}
    view["start_time"] = _time(action["start_time"])
    if req.context.at_least(*PAGING):
        view["updated_at"] = _time(action["updated_at"])
    return view


def _parse_time(value: str, name: str) -> datetime.datetime:
    try:
        parsed = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise errors.BadRequest(
            f"Invalid input for query parameters {name}. Value: {value}. '{value}' is not a 'date-time'"
        ) from None
    if parsed.tzinfo is not None:
        parsed = parsed.astimezone(datetime.timezone.utc).replace(tzinfo=None)
    return parsed


def _query(req: falcon.Request) -> dict[str, str]:
    allowed = {"limit", "marker", "changes-since"} | ({"changes-before"} if req.context.at_least(*CHANGES_BEFORE)
                                                        else set())
    values = util.query_values(req)
    for name, given in values.items():
        if name not in allowed:
            raise errors.BadRequest(
                "Invalid input for query parameters. Additional properties are not allowed "
                f"('{name}' was unexpected)")
        if len(given) > 1:
            raise errors.BadRequest(f"Invalid input for query parameters {name}. Value: {given}. "
                                    f"{given} is not of type 'string'")
    return {name: given[0] for name, given in values.items()}


def index(state: ComputeState, req: falcon.Request, resp: falcon.Response, server_id: str) -> None:
    context = req.context
    paging = context.at_least(*PAGING)
    query = _query(req) if paging else {}
    mapping, cell = _server(state, req, server_id)
    util.authorize(state, req, policies.ACTIONS_LIST, {"project_id": mapping.project_id})
    since = _parse_time(query["changes-since"], "changes-since") if "changes-since" in query else None
    before = _parse_time(query["changes-before"], "changes-before") if "changes-before" in query else None
    if since and before and before < since:
        raise errors.BadRequest("The value of changes-since must be less than or equal to changes-before.")
    limit = None
    if paging:
        max_limit = state.conf.api.max_limit
        limit = util.parse_int(query.get("limit"), "limit")
        limit = max_limit if limit is None else min(limit, max_limit)
    marker = query.get("marker")

    def read(_cell: CellMapping, database: Any) -> list[dict[str, Any]]:
        with database.read() as conn:
            after = None
            if marker is not None:
                after = records.get_action(conn, server_id, marker)
                if after is None:
                    raise errors.BadRequest(f"Marker {marker} could not be found.")
            return records.list_actions(conn, server_id, limit=limit, after=after, changes_since=since,
                                        changes_before=before)

    listed = [_action_view(req, action) for action in state.cells.run_in_cell(cell, read)]
    body: dict[str, Any] = {"instanceActions": listed}
    if paging and limit is not None and listed and len(listed) >= limit and limit > 0:
        params = [(k, v) for k, v in query.items() if k != "marker"] + [("marker", listed[-1]["request_id"])]
        href = links.collection_url(state, req, f"servers/{server_id}/os-instance-actions") + "?" + urlencode(params)
        body["links"] = [{"rel": "next", "href": href}]
    send_json(resp, body)


def show(state: ComputeState, req: falcon.Request, resp: falcon.Response, server_id: str, request_id: str) -> None:
    context = req.context
    mapping, cell = _server(state, req, server_id)
    target = {"project_id": mapping.project_id}
    util.authorize(state, req, policies.ACTIONS_SHOW, target)

    def read(_cell: CellMapping, database: Any) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
        with database.read() as conn:
            action = records.get_action(conn, server_id, request_id)
            return action, records.action_events(conn, action["id"]) if action else []

    action, events = state.cells.run_in_cell(cell, read)
    if action is None:
        raise errors.NotFound(f"Action {request_id} not found")
    view = _action_view(req, action)
    show_events = show_traceback = show_host = False
    if util.allows(state, req, policies.ACTIONS_EVENTS, target):
        show_events = show_traceback = True
        show_host = context.at_least(*HOST_IN_EVENTS)
    elif context.at_least(*EVENTS_FOR_OWNERS):
        show_events = True
    if show_events:
        project = action["project_id"] or mapping.project_id
        view["events"] = []
        for event in events:
            shown: dict[str, Any] = {
                "event": event["event"], "start_time": _time(event["start_time"]),
                "finish_time": _time(event["finish_time"]), "result": event["result"],
            }
            if show_traceback:
                shown["traceback"] = event["traceback"]
            if show_host:
                shown["host"] = event["host"]
            if context.at_least(*HOST_IN_EVENTS):
                shown["hostId"] = views.host_id(project, event["host"])
            view["events"].append(shown)
    send_json(resp, {"instanceAction": view})


ROUTES = [
    Route("/servers/{server_id}/os-instance-actions", {"GET": index}),
    Route("/servers/{server_id}/os-instance-actions/{request_id}", {"GET": show}),
]
