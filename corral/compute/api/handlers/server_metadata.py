"""/servers/{id}/metadata[/{key}]: upstream's server metadata API.

GET lists or shows (404 ``Metadata item was not found``); POST merges,
PUT replaces all, PUT ``/{key}`` sets one (the body's ``meta`` must name
the key: 400 ``Request body and URI mismatch``), DELETE ``/{key}``
removes one (204). Changes need the server unlocked (or an admin) and in
``active``, ``paused``, ``suspended`` or ``stopped`` with no task (409),
and stay within the project's ``metadata_items`` quota (403).
"""

from __future__ import annotations

from typing import Any

import falcon

from corral.core import errors
from corral.core.http import Route, send_empty, send_json
from corral.compute.api import policies, util
from corral.compute.api.state import ComputeState
from corral.compute.domain import quota, server_actions as actions, servers
from corral.compute.domain.servers import Found

_METADATA = {
    "type": "object",
    "patternProperties": {"^[a-zA-Z0-9-_:. ]{1,255}$": {"type": "string", "maxLength": 255}},
    "additionalProperties": False,
}
_ALL = util.Schema({"type": "object", "properties": {"metadata": _METADATA}, "required": ["metadata"],
                    "additionalProperties": False})
_ONE = util.Schema({"type": "object", "properties": {"meta": {**_METADATA, "minProperties": 1, "maxProperties": 1}},
                    "required": ["meta"], "additionalProperties": False})


def _server(state: ComputeState, req: falcon.Request, server_id: str, rule: str) -> Found:
    found = servers.find_server(state, req.context, server_id, cell_down_support=False, action="metadata")
    util.authorize(state, req, rule, {"project_id": found.mapping.project_id})
    return found


def _limit(state: ComputeState, found: Found) -> int:
    return quota.project_limits(state.conf, state.api_db, found.mapping.project_id)["metadata_items"]


def index(state: ComputeState, req: falcon.Request, resp: falcon.Response, server_id: str) -> None:
    found = _server(state, req, server_id, policies.METADATA_INDEX)
    send_json(resp, {"metadata": found.metadata})


def show(state: ComputeState, req: falcon.Request, resp: falcon.Response, server_id: str, key: str) -> None:
    found = _server(state, req, server_id, policies.METADATA_SHOW)
    if key not in found.metadata:
        raise errors.NotFound("Metadata item was not found")
    send_json(resp, {"meta": {key: found.metadata[key]}})


def _update(state: ComputeState, req: falcon.Request, found: Found, metadata: dict[str, Any], replace: bool,
            action: str) -> dict[str, str]:
    return actions.update_metadata(state, req.context, found, metadata, replace=replace, action=action,
                                   limit=_limit(state, found))


def create(state: ComputeState, req: falcon.Request, resp: falcon.Response, server_id: str) -> None:
    body = util.json_body(state, req, _ALL)
    found = _server(state, req, server_id, policies.METADATA_CREATE)
    send_json(resp, {"metadata": _update(state, req, found, body["metadata"], False, "update metadata")})


def update_all(state: ComputeState, req: falcon.Request, resp: falcon.Response, server_id: str) -> None:
    body = util.json_body(state, req, _ALL)
    found = _server(state, req, server_id, policies.METADATA_UPDATE_ALL)
    send_json(resp, {"metadata": _update(state, req, found, body["metadata"], True, "update metadata")})


def update(state: ComputeState, req: falcon.Request, resp: falcon.Response, server_id: str, key: str) -> None:
    body = util.json_body(state, req, _ONE)
    found = _server(state, req, server_id, policies.METADATA_UPDATE)
    if key not in body["meta"]:
        raise errors.BadRequest("Request body and URI mismatch")
    _update(state, req, found, body["meta"], False, "update metadata")
    send_json(resp, {"meta": body["meta"]})


def delete(state: ComputeState, req: falcon.Request, resp: falcon.Response, server_id: str, key: str) -> None:
    found = _server(state, req, server_id, policies.METADATA_DELETE)
    if key not in found.metadata:
        raise errors.NotFound("Metadata item was not found")
    actions.delete_metadata(state, req.context, found, key)
    send_empty(resp, 204)


ROUTES = [
    Route("/servers/{server_id}/metadata", {"GET": index, "POST": create, "PUT": update_all}),
    Route("/servers/{server_id}/metadata/{key}", {"GET": show, "PUT": update, "DELETE": delete}),
]
