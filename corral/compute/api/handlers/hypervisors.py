"""/os-hypervisors (upstream's ``hypervisors.py``), admins only.

* ``GET /os-hypervisors``, ``/detail``: paged from 2.33 (``limit``,
  ``marker``, ``hypervisors_links``); from 2.53 ids are uuids and the
  ``hypervisor_hostname_pattern`` and ``with_servers`` parameters replace
  the ``/{pattern}/search`` and ``/{pattern}/servers`` routes.
* ``GET /os-hypervisors/{id}``: an integer id before 2.53, a uuid after
  (400 "Invalid uuid" otherwise); ``with_servers`` from 2.53.
* ``GET /os-hypervisors/statistics`` and ``/{id}/uptime``.
* ``cpu_info`` is a JSON string before 2.28 and an object from 2.28.
"""

from __future__ import annotations

import json
from typing import Any

import falcon

from corral.core import errors
from corral.core.http import Endpoint, Route, send_json
from corral.compute.api import links, policies, util, validation
from corral.compute.api.errors import format_error
from corral.compute.api.state import ComputeState
from corral.compute.domain import hypervisors as domain
from corral.compute.domain import services as service_domain

CPU_INFO_OBJECT = (2, 28)
PAGING = (2, 33)
UUID_IDS = (2, 53)
LAST_OLD_ROUTES = (2, 52)

_DETAIL_NUMBERS = ("vcpus", "memory_mb", "local_gb", "vcpus_used", "memory_mb_used", "local_gb_used", "free_ram_mb",
                   "free_disk_gb", "current_workload", "running_vms", "disk_available_least")
_PAGED_QUERY = validation.QuerySchema(dict(validation.PAGINATION))
_QUERY_V253 = validation.QuerySchema({
    "limit": validation.single(validation.NON_NEGATIVE_INTEGER),
    "marker": validation.single({"type": "string"}),
    "hypervisor_hostname_pattern": validation.single(
        {"type": "string", "pattern": "^[a-zA-Z0-9-._]*$", "minLength": 1, "maxLength": 255}),
    "with_servers": validation.single(validation.BOOLEAN),
})
_SHOW_QUERY_V253 = validation.QuerySchema({"with_servers": validation.single(validation.BOOLEAN)})


def _not_found(ident: str) -> errors.NotFound:
    return errors.NotFound(f"Hypervisor with ID '{ident}' could not be found.")


def _view(state: ComputeState, req: falcon.Request, hypervisor: domain.Hypervisor, *, detail: bool,
          servers: bool = False) -> dict[str, Any]:
    uuids = req.context.at_least(*UUID_IDS)
    node, service = hypervisor.node, hypervisor.service
    view: dict[str, Any] = {
        "id": node["uuid"] if uuids else node["id"],
        "hypervisor_hostname": node["hypervisor_hostname"],
        "state": "up" if service_domain.is_up(state.conf, service) else "down",
        "status": "disabled" if service["disabled"] else "enabled",
    }
    if detail:
        view.update({
            "hypervisor_type": node["hypervisor_type"],
            "hypervisor_version": node["hypervisor_version"],
            "host_ip": node["host_ip"],
            "service": {"id": service["uuid"] if uuids else service["id"], "host": node["host"],
                        "disabled_reason": service["disabled_reason"]},
        })
        for name in _DETAIL_NUMBERS:
            view[name] = hypervisor.value(name)
        if req.context.at_least(*CPU_INFO_OBJECT):
            view["cpu_info"] = json.loads(node["cpu_info"]) if node["cpu_info"] else {}
        else:
            view["cpu_info"] = node["cpu_info"]
    if servers and hypervisor.servers:
        view["servers"] = [{"name": s["display_name"], "uuid": s["uuid"]} for s in hypervisor.servers]
    return view


def _after_marker(found: list[domain.Hypervisor], marker: str) -> list[domain.Hypervisor] | None:
    """The nodes after the marker (a uuid, or an id in the first cell that has it); None: no such node."""
    by_uuid = validation.is_uuid_like(marker)
    for index, hypervisor in enumerate(found):
        node = hypervisor.node
        if (by_uuid and node["uuid"] == marker) or (not by_uuid and str(node["id"]) == marker.strip()):
            # Upstream goes on from the marker's cell: the rest of it and the following cells.
            return found[index + 1:]
    return None


def _list(state: ComputeState, req: falcon.Request, resp: falcon.Response, *, detail: bool) -> None:
    context = req.context
    util.authorize(state, req, policies.HYPERVISORS_LIST_DETAIL if detail else policies.HYPERVISORS_LIST, {})
    paged = context.at_least(*PAGING)
    values: dict[str, list[str]] = {}
    if context.at_least(*UUID_IDS):
        values = _QUERY_V253.validate(req)
    elif paged:
        values = _PAGED_QUERY.validate(req)
    # Before 2.53 these are ignored, as upstream strips unknown parameters.
    pattern: str | None = None
    with_servers = False
    if context.at_least(*UUID_IDS):
        pattern = validation.last(values, "hypervisor_hostname_pattern")
        with_servers = validation.strict_bool(validation.last(values, "with_servers") or False, "with_servers")
    limit = marker = None
    if paged:
        requested = validation.last(values, "limit")
        limit = state.conf.api.max_limit
        if requested is not None:
            limit = min(limit, validation.count(requested))
        marker = validation.last(values, "marker")
    if pattern is not None:
        if "limit" in values or marker:
            raise errors.BadRequest(
                "Paging over hypervisors with the hypervisor_hostname_pattern query parameter is not supported."
            )
        found = domain.hypervisors(state, hostname_like=f"%{pattern}%", with_servers=with_servers)
        if not found:
            raise errors.NotFound(f"No hypervisor matching '{pattern}' could be found.")
        paged = False
    else:
        found = domain.hypervisors(state, with_servers=with_servers)
        if marker is not None:
            after = _after_marker(found, marker)
            if after is None:
                raise errors.BadRequest(f"marker [{marker}] not found")
            found = after
        if limit is not None:
            found = found[:limit]
    body: dict[str, Any] = {
        "hypervisors": [_view(state, req, h, detail=detail, servers=with_servers) for h in found],
    }
    if paged and found and limit and len(found) == limit:
        marker_id = body["hypervisors"][-1]["id"]
        body["hypervisors_links"] = links.next_link(
            state, req, "os-hypervisors/detail" if detail else "os-hypervisors", str(marker_id)
        )
    send_json(resp, body)


def index(state: ComputeState, req: falcon.Request, resp: falcon.Response) -> None:
    _list(state, req, resp, detail=False)


def detail(state: ComputeState, req: falcon.Request, resp: falcon.Response) -> None:
    _list(state, req, resp, detail=True)


def _find(state: ComputeState, req: falcon.Request, ident: str, *, with_servers: bool = False) -> domain.Hypervisor:
    if req.context.at_least(*UUID_IDS):
        if not validation.is_uuid_like(ident):
            raise errors.BadRequest(f"Invalid uuid {ident}")
        matches = [h for h in domain.hypervisors(state, with_servers=with_servers) if h.node["uuid"] == ident]
    else:
        text = ident.strip()
        if not text.lstrip("-").isdigit() or len(text) > 20:
            raise _not_found(ident)
        matches = [h for h in domain.hypervisors(state, with_servers=with_servers) if h.node["id"] == int(text)]
    if not matches:
        raise _not_found(ident)
    return matches[0]


def show(state: ComputeState, req: falcon.Request, resp: falcon.Response, hypervisor_id: str) -> None:
    with_servers = False
    if req.context.at_least(*UUID_IDS):
        values = _SHOW_QUERY_V253.validate(req)
        with_servers = validation.strict_bool(validation.last(values, "with_servers") or False, "with_servers")
    util.authorize(state, req, policies.HYPERVISORS_SHOW, {})
    hypervisor = _find(state, req, hypervisor_id, with_servers=with_servers)
    send_json(resp, {"hypervisor": _view(state, req, hypervisor, detail=True, servers=with_servers)})


def uptime(state: ComputeState, req: falcon.Request, resp: falcon.Response, hypervisor_id: str) -> None:
    util.authorize(state, req, policies.HYPERVISORS_UPTIME, {})
    hypervisor = _find(state, req, hypervisor_id)
    if not service_domain.is_up(state.conf, hypervisor.service):
        raise errors.BadRequest(f"Compute service of {hypervisor.node['host']} is unavailable at this time.")
    # Upstream's fake driver (and most drivers) cannot tell a host's uptime: an
    # answer, not a failure, so it is not logged as one.
    body, content_type = format_error(req, errors.ApiError("The requested functionality is not supported.", status=501))
    resp.status = 501
    resp.content_type = content_type
    resp.data = body


def statistics(state: ComputeState, req: falcon.Request, resp: falcon.Response) -> None:
    util.authorize(state, req, policies.HYPERVISORS_STATISTICS, {})
    send_json(resp, {"hypervisor_statistics": domain.statistics(state)})


def _matching(state: ComputeState, pattern: str, with_servers: bool) -> list[domain.Hypervisor]:
    found = domain.hypervisors(state, hostname_like=f"%{pattern}%", with_servers=with_servers)
    if not found:
        raise errors.NotFound(f"No hypervisor matching '{pattern}' could be found.")
    return found


def search(state: ComputeState, req: falcon.Request, resp: falcon.Response, hypervisor_id: str) -> None:
    """Before 2.53: hypervisors whose hostname contains the pattern (the path's id segment)."""
    util.authorize(state, req, policies.HYPERVISORS_SEARCH, {})
    found = _matching(state, hypervisor_id, with_servers=False)
    send_json(resp, {"hypervisors": [_view(state, req, h, detail=False) for h in found]})


def servers(state: ComputeState, req: falcon.Request, resp: falcon.Response, hypervisor_id: str) -> None:
    """Before 2.53: the same, with the servers of each."""
    util.authorize(state, req, policies.HYPERVISORS_SERVERS, {})
    found = _matching(state, hypervisor_id, with_servers=True)
    send_json(resp, {"hypervisors": [_view(state, req, h, detail=False, servers=True) for h in found]})


ROUTES = [
    Route("/os-hypervisors", {"GET": index}),
    Route("/os-hypervisors/detail", {"GET": detail}),
    Route("/os-hypervisors/statistics", {"GET": statistics}),
    Route("/os-hypervisors/{hypervisor_id}", {"GET": show}),
    Route("/os-hypervisors/{hypervisor_id}/uptime", {"GET": uptime}),
    Route("/os-hypervisors/{hypervisor_id}/search", {"GET": Endpoint(search, max_version=LAST_OLD_ROUTES)}),
    Route("/os-hypervisors/{hypervisor_id}/servers", {"GET": Endpoint(servers, max_version=LAST_OLD_ROUTES)}),
]
