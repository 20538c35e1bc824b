"""/os-server-groups: create, list, show, delete (upstream's ``server_groups.py``).

Before 2.64 a group shows ``policies`` (a list of one) and an empty
``metadata``; from 2.64 ``policy`` and ``rules`` (``max_server_per_host``
for anti-affinity).  The soft policies exist from 2.15, ``project_id``
and ``user_id`` in the representation from 2.13.  Members are the servers
booted into the group that are not deleted.  Groups count against the
project's ``server_groups`` quota.
"""

from __future__ import annotations

import copy
import uuid as uuidlib
from typing import Any

import falcon
from sqlalchemy.engine import Connection

from corral.core import errors
from corral.core.http import Route, send_empty, send_json
from corral.compute.api import policies, util, validation
from corral.compute.api.state import ComputeState
from corral.compute.db import server_groups as db
from corral.compute.domain import quota
from corral.compute.domain import server_groups as domain

PROJECT_AND_USER = (2, 13)
SOFT_POLICIES = (2, 15)
POLICY_AND_RULES = (2, 64)

_NAME = {"type": "string", "format": "name", "minLength": 1, "maxLength": 255}
_CREATE_V21: dict[str, Any] = {
    "type": "object",
    "properties": {
        "server_group": {
            "type": "object",
            "properties": {
                "name": _NAME,
                "policies": {
                    # Exactly one policy (a single string from 2.64).
                    "type": "array",
                    "items": [{"type": "string", "enum": ["anti-affinity", "affinity"]}],
                    "uniqueItems": True,
                    "minItems": 1,
                    "maxItems": 1,
                    "additionalItems": False,
                },
            },
            "required": ["name", "policies"],
            "additionalProperties": False,
        },
    },
    "required": ["server_group"],
    "additionalProperties": False,
}
_CREATE_V215 = copy.deepcopy(_CREATE_V21)
_CREATE_V215["properties"]["server_group"]["properties"]["policies"]["items"][0]["enum"] += [
    "soft-anti-affinity", "soft-affinity"]
_CREATE_V264 = copy.deepcopy(_CREATE_V215)
_GROUP_V264 = _CREATE_V264["properties"]["server_group"]
del _GROUP_V264["properties"]["policies"]
_GROUP_V264["required"] = ["name", "policy"]
_GROUP_V264["properties"]["policy"] = {"type": "string", "enum": list(domain.POLICIES)}
_GROUP_V264["properties"]["rules"] = {
    "type": "object",
    "properties": {
        "max_server_per_host": {"type": ["integer", "string"], "pattern": "^[0-9]*$", "minimum": 1, "minLength": 1},
    },
    "additionalProperties": False,
}
_CREATE = [((2, 1), util.Schema(_CREATE_V21)), (SOFT_POLICIES, util.Schema(_CREATE_V215)),
           (POLICY_AND_RULES, util.Schema(_CREATE_V264))]
_INDEX_QUERY = validation.QuerySchema({
    "all_projects": validation.multi({"type": "string"}),
    "limit": validation.multi(validation.NON_NEGATIVE_INTEGER),
    "offset": validation.multi(validation.NON_NEGATIVE_INTEGER),
})


def _schema(req: falcon.Request) -> util.Schema:
    chosen = _CREATE[0][1]
    for version, schema in _CREATE:
        if req.context.at_least(*version):
            chosen = schema
    return chosen


def _view(req: falcon.Request, group: dict[str, Any], members: list[str]) -> dict[str, Any]:
    view: dict[str, Any] = {"id": group["uuid"], "name": group["name"]}
    if req.context.at_least(*POLICY_AND_RULES):
        view["policy"] = group["policy"]
        view["rules"] = domain.typed_rules(group["rules"])
    else:
        view["policies"] = [group["policy"]]
        view["metadata"] = {}
    view["members"] = members
    if req.context.at_least(*PROJECT_AND_USER):
        view["project_id"] = group["project_id"]
        view["user_id"] = group["user_id"]
    return view


def not_found(group_id: str) -> errors.NotFound:
    return errors.NotFound(f"Instance group {group_id} could not be found.")


def _visible(state: ComputeState, req: falcon.Request, group_id: str) -> dict[str, Any]:
    """The group, if the caller's project owns it (any group for admins)."""
    context = req.context
    with state.api_db.read() as conn:
        group = db.get_group(conn, group_id, None if context.is_admin else context.project_id)
    if group is None:
        raise not_found(group_id)
    return group


# ---------------------------------------------------------------- create


def create(state: ComputeState, req: falcon.Request, resp: falcon.Response) -> None:
    context = req.context
    project_id = context.project_id
    assert project_id is not None
    body = util.json_body(state, req, _schema(req))["server_group"]
    util.authorize(state, req, policies.SERVER_GROUPS_CREATE, {"project_id": project_id})
    limit = quota.project_limits(state.conf, state.api_db, project_id)["server_groups"]
    with state.api_db.read() as conn:
        _check_quota(conn, project_id, limit)
    rules: dict[str, str] | None = None
    if context.at_least(*POLICY_AND_RULES):
        policy = body["policy"]
        requested = body.get("rules", {})
        if policy != "anti-affinity" and requested:
            raise errors.BadRequest("Only anti-affinity policy supports rules.")
        rules = {
            name: str(util.bounded_int(value, name, minimum=1)) for name, value in requested.items()
        }
    else:
        policy = body["policies"][0]
    group_uuid = str(uuidlib.uuid4())

    def work(conn: Connection) -> dict[str, Any]:
        db.create_group(conn, uuid=group_uuid, name=body["name"], project_id=project_id, user_id=context.user_id,
                        policy=policy, rules=rules)
        # Checked again with the new group counted: concurrent creates cannot both take the last one.
        _check_quota(conn, project_id, limit, adding=0)
        found = db.get_group(conn, group_uuid)
        assert found is not None
        return found

    group = state.api_db.write(work)
    send_json(resp, {"server_group": _view(req, group, [])})


def _check_quota(conn: Connection, project_id: str, limit: int, adding: int = 1) -> None:
    if limit >= 0 and db.count_groups(conn, project_id) + adding > limit:
        raise quota.OverQuota("Quota exceeded, too many server groups.")


# ------------------------------------------------------ list, show, delete


def index(state: ComputeState, req: falcon.Request, resp: falcon.Response) -> None:
    context = req.context
    util.authorize(state, req, policies.SERVER_GROUPS_INDEX, {"project_id": context.project_id})
    values = _INDEX_QUERY.validate(req)
    every_project = "all_projects" in values and context.is_admin
    if every_project:
        util.authorize(state, req, policies.SERVER_GROUPS_INDEX_ALL_PROJECTS, {"project_id": context.project_id})
    with state.api_db.read() as conn:
        groups = db.list_groups(conn, None if every_project else context.project_id)
    offset = validation.count(validation.last(values, "offset") or 0)
    max_limit = state.conf.api.max_limit
    limit = min(max_limit, validation.count(validation.last(values, "limit") or 0) or max_limit)
    groups = groups[offset:offset + limit]
    live = domain.live_members(state, [uuid for group in groups for uuid in group["members"]])
    send_json(resp, {"server_groups": [
        _view(req, group, [uuid for uuid in group["members"] if uuid in live]) for group in groups
    ]})


def show(state: ComputeState, req: falcon.Request, resp: falcon.Response, group_id: str) -> None:
    group = _visible(state, req, group_id)
    util.authorize(state, req, policies.SERVER_GROUPS_SHOW, {"project_id": group["project_id"]})
    live = domain.live_members(state, group["members"])
    send_json(resp, {"server_group": _view(req, group, [uuid for uuid in group["members"] if uuid in live])})


def delete(state: ComputeState, req: falcon.Request, resp: falcon.Response, group_id: str) -> None:
    group = _visible(state, req, group_id)
    util.authorize(state, req, policies.SERVER_GROUPS_DELETE, {"project_id": group["project_id"]})
    if not state.api_db.write(db.delete_group, group["id"]):
        raise not_found(group_id)
    send_empty(resp, 204)


ROUTES = [
    Route("/os-server-groups", {"GET": index, "POST": create}),
    Route("/os-server-groups/{group_id}", {"GET": show, "DELETE": delete}),
]
