"""/limits and /os-quota-sets."""

from __future__ import annotations

from typing import Any

import falcon
from sqlalchemy.engine import Connection

from corral.core import errors
from corral.core.http import Route, send_empty, send_json
from corral.compute.api import policies, util
from corral.compute.api.state import ComputeState
from corral.compute.db import api_queries as q
from corral.compute.domain import quota

_UPDATE = util.Schema({
    "type": "object",
    "properties": {
        "quota_set": {
            "type": "object",
            "properties": {
                **{name: {"type": ["integer", "string"], "pattern": "^-?[0-9]+$", "minimum": -1,
                          "maximum": util.MAX_INT}
                   for name in (*quota.BASE_RESOURCES, *quota.FILE_RESOURCES, *quota.NETWORK_RESOURCES)},
                "force": {"type": ["boolean", "string"]},
            },
            "additionalProperties": False,
        },
    },
    "required": ["quota_set"],
    "additionalProperties": False,
})


def limits(state: ComputeState, req: falcon.Request, resp: falcon.Response) -> None:
    context = req.context
    util.authorize(state, req, policies.LIMITS)
    project_id = context.project_id
    requested = util.last_value(req, "tenant_id")
    if requested and requested != project_id:
        util.authorize(state, req, policies.LIMITS_OTHER_PROJECT)
        project_id = requested
    assert project_id is not None
    limit = quota.project_limits(state.conf, state.api_db, project_id)
    usage = quota.count_usage(state.api_db, state.cells, project_id).counts
    version = context.version
    absolute: dict[str, int] = {
        "maxServerGroupMembers": limit["server_group_members"],
        "maxServerGroups": limit["server_groups"],
        "maxServerMeta": limit["metadata_items"],
        "maxTotalCores": limit["cores"],
        "maxTotalInstances": limit["instances"],
        "maxTotalKeypairs": limit["key_pairs"],
        "maxTotalRAMSize": limit["ram"],
        "totalCoresUsed": usage["cores"],
        "totalInstancesUsed": usage["instances"],
        "totalRAMUsed": usage["ram"],
        "totalServerGroupsUsed": quota.server_groups_in_use(state.api_db, project_id),
    }
    if version < (2, 57):
        absolute["maxPersonality"] = limit["injected_files"]
        absolute["maxPersonalitySize"] = limit["injected_file_content_bytes"]
    if version < (2, 39):
        absolute["maxImageMeta"] = limit["metadata_items"]
    if version < (2, 36):
        absolute.update({
            "maxSecurityGroupRules": limit["security_group_rules"],
            "maxSecurityGroups": limit["security_groups"],
            "maxTotalFloatingIps": limit["floating_ips"],
            "totalFloatingIpsUsed": 0,
            "totalSecurityGroupsUsed": 0,
        })
    send_json(resp, {"limits": {"absolute": absolute, "rate": []}})


def _quota_set(req: falcon.Request, values: dict[str, Any]) -> dict[str, Any]:
    return {name: values[name] for name in quota.resources_for(req.context.version)}


def show(state: ComputeState, req: falcon.Request, resp: falcon.Response, project_id: str) -> None:
    util.authorize(state, req, policies.QUOTA_SHOW, {"project_id": project_id})
    limit = quota.project_limits(state.conf, state.api_db, project_id)
    send_json(resp, {"quota_set": {"id": project_id, **_quota_set(req, limit)}})


def _detail_values(state: ComputeState, project_id: str) -> dict[str, Any]:
    limit = quota.project_limits(state.conf, state.api_db, project_id)
    usage = quota.count_usage(state.api_db, state.cells, project_id).counts
    usage["server_groups"] = quota.server_groups_in_use(state.api_db, project_id)
    return {name: {"in_use": usage.get(name, 0), "limit": value, "reserved": 0} for name, value in limit.items()}


def detail(state: ComputeState, req: falcon.Request, resp: falcon.Response, project_id: str) -> None:
    util.authorize(state, req, policies.QUOTA_DETAIL, {"project_id": project_id})
    send_json(resp, {"quota_set": {"id": project_id, **_quota_set(req, _detail_values(state, project_id))}})


def defaults(state: ComputeState, req: falcon.Request, resp: falcon.Response, project_id: str) -> None:
    util.authorize(state, req, policies.QUOTA_DEFAULTS, {"project_id": project_id})
    send_json(resp, {"quota_set": {"id": project_id, **_quota_set(req, quota.default_limits(state.conf))}})


def update(state: ComputeState, req: falcon.Request, resp: falcon.Response, project_id: str) -> None:
    util.authorize(state, req, policies.QUOTA_UPDATE, {"project_id": project_id})
    body = dict(util.json_body(state, req, _UPDATE)["quota_set"])
    force = str(body.pop("force", False)).lower() == "true"
    wanted = {name: util.bounded_int(value, name, minimum=-1) for name, value in body.items()}
    allowed = set(quota.resources_for(req.context.version))
    unknown = sorted(set(wanted) - allowed)
    if unknown:
        raise errors.BadRequest(f"Bad key(s) {', '.join(unknown)} in quota_set")
    if not force:
        usage = quota.count_usage(state.api_db, state.cells, project_id).counts
        usage["server_groups"] = quota.server_groups_in_use(state.api_db, project_id)
        for name, value in wanted.items():
            used = usage.get(name, 0)
            if value != -1 and value < used:
                raise errors.BadRequest(
                    f"Quota limit {value} for {name} must be greater than or equal to already used and reserved {used}."
                )

    def work(conn: Connection) -> None:
        for name, value in wanted.items():
            q.set_project_quota(conn, project_id, name, value)

    state.api_db.write(work)
    send_json(resp, {"quota_set": _quota_set(req, quota.project_limits(state.conf, state.api_db, project_id))})


def delete(state: ComputeState, req: falcon.Request, resp: falcon.Response, project_id: str) -> None:
    util.authorize(state, req, policies.QUOTA_DELETE, {"project_id": project_id})
    state.api_db.write(lambda conn: q.delete_project_quotas(conn, project_id))
    send_empty(resp, 202)


ROUTES = [
    Route("/limits", {"GET": limits}),
    Route("/os-quota-sets/{project_id}", {"GET": show, "PUT": update, "DELETE": delete}),
    Route("/os-quota-sets/{project_id}/detail", {"GET": detail}),
    Route("/os-quota-sets/{project_id}/defaults", {"GET": defaults}),
]
