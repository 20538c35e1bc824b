"""/servers/{id}/tags[/{tag}] (2.26): upstream's server tags API.

List, replace (PUT, at most 50), add one (PUT ``/{tag}``: 201 with a
``Location``, 204 when it was there), check one (GET ``/{tag}``: 204 or
404), delete one or all (204). A tag is 1 to 60 characters without ``/``
or ``,``. Changes need the server in ``active``, ``paused``,
``suspended`` or ``stopped`` (409); as upstream, tags ignore the lock.
"""

from __future__ import annotations

from typing import Any

import falcon
import jsonschema

from corral.core import errors
from corral.core.http import Endpoint, Route, read_body, send_empty, send_json, parse_json
from corral.compute.api import links, policies, util
from corral.compute.api.state import ComputeState
from corral.compute.db import server_records as records
from corral.compute.domain import server_actions as actions, servers
from corral.compute.domain.servers import Found

TAGS = (2, 26)
_TAG = {"type": "string", "pattern": "^[^,/]*$", "minLength": 1, "maxLength": 60}
_ALL = util.Schema({"title": "Server tags", "type": "object",
                    "properties": {"tags": {"type": "array", "items": _TAG, "maxItems": actions.MAX_TAG_COUNT}},
                    "required": ["tags"], "additionalProperties": False})


def _server(state: ComputeState, req: falcon.Request, server_id: str, rule: str) -> Found:
    found = servers.find_server(state, req.context, server_id, cell_down_support=False, action="tags")
    util.authorize(state, req, rule, {"project_id": found.mapping.project_id})
    return found


def _tags(found: Found) -> list[str]:
    return list((found.instance or {}).get(servers.TAGS_KEY) or [])


def index(state: ComputeState, req: falcon.Request, resp: falcon.Response, server_id: str) -> None:
    found = _server(state, req, server_id, policies.TAGS_INDEX)
    send_json(resp, {"tags": _tags(found)})


def show(state: ComputeState, req: falcon.Request, resp: falcon.Response, server_id: str, tag: str) -> None:
    found = _server(state, req, server_id, policies.TAGS_SHOW)
    if tag not in _tags(found):
        raise errors.NotFound(f"Server {server_id} has no tag '{tag}'")
    send_empty(resp, 204)


def update_all(state: ComputeState, req: falcon.Request, resp: falcon.Response, server_id: str) -> None:
    body = util.json_body(state, req, _ALL)
    found = _server(state, req, server_id, policies.TAGS_UPDATE_ALL)
    actions.check_tag_state(found, "update tags")
    wanted = list(dict.fromkeys(body["tags"]))

    def work(conn: Any, uuid: str) -> list[str]:
        records.replace_tags(conn, uuid, wanted)
        return records.tags_of(conn, [uuid])[uuid]

    send_json(resp, {"tags": actions.change_tags(state, found, work)})


def update(state: ComputeState, req: falcon.Request, resp: falcon.Response, server_id: str, tag: str) -> None:
    data = read_body(req, state.conf.api.max_request_body_size)
    if data.strip() and parse_json(data) is not None:
        # Upstream's schema for this body is 'null'.
        raise errors.BadRequest(f"Invalid input for field/attribute Server tag. Value: {data.decode(errors='replace')}. "
                                f"{data.decode(errors='replace')} is not of type 'null'")
    found = _server(state, req, server_id, policies.TAGS_UPDATE)
    actions.check_tag_state(found, "update tag")
    try:
        jsonschema.validate(tag, _TAG)
    except jsonschema.ValidationError as error:
        raise errors.BadRequest(
            f"Tag '{tag}' is invalid. It must be a non empty string without characters '/' and ','. "
            f"Validation error message: {error.message}"
        ) from None

    def work(conn: Any, uuid: str) -> bool:
        existing = records.tags_of(conn, [uuid])[uuid]
        if len(existing) >= actions.MAX_TAG_COUNT:
            raise errors.BadRequest(f"The number of tags exceeded the per-server limit {actions.MAX_TAG_COUNT}")
        if tag in existing:
            return False
        records.add_tags(conn, uuid, [tag])
        return True

    if actions.change_tags(state, found, work):
        resp.set_header("Location", links.resource_links(state, req, "servers", server_id)[0]["href"]
                        + f"/tags/{tag}")
        send_empty(resp, 201)
    else:
        send_empty(resp, 204)


def delete(state: ComputeState, req: falcon.Request, resp: falcon.Response, server_id: str, tag: str) -> None:
    found = _server(state, req, server_id, policies.TAGS_DELETE)
    actions.check_tag_state(found, "delete tag")

    def work(conn: Any, uuid: str) -> None:
        if not records.delete_tag(conn, uuid, tag):
            raise errors.NotFound(f"Instance {uuid} has no tag '{tag}'")

    actions.change_tags(state, found, work)
    send_empty(resp, 204)


def delete_all(state: ComputeState, req: falcon.Request, resp: falcon.Response, server_id: str) -> None:
    found = _server(state, req, server_id, policies.TAGS_DELETE_ALL)
    actions.check_tag_state(found, "delete tags")
    actions.change_tags(state, found, lambda conn, uuid: records.delete_tag(conn, uuid))
    send_empty(resp, 204)


def _v226(handler: Any) -> Endpoint:
    return Endpoint(handler, min_version=TAGS)


ROUTES = [
    Route("/servers/{server_id}/tags", {"GET": _v226(index), "PUT": _v226(update_all), "DELETE": _v226(delete_all)}),
    Route("/servers/{server_id}/tags/{tag}", {"GET": _v226(show), "PUT": _v226(update), "DELETE": _v226(delete)}),
]
