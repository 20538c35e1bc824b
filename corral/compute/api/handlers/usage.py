"""/os-simple-tenant-usage (upstream's ``simple_tenant_usage.py``).

``GET /os-simple-tenant-usage`` (admins): every project's usage over
``start``..``end`` (default now..now; ``end`` is cut at now), with each
server's usage when ``detailed=1``.  ``GET /os-simple-tenant-usage/{project}``
(the project or admins): that project's, always detailed, ``{}`` when it
used nothing.  From 2.40 ``limit`` and ``marker`` page over servers, with
``tenant_usages_links`` / ``tenant_usage_links``.
"""

from __future__ import annotations

import datetime
from typing import Any
from urllib.parse import parse_qs

import falcon

from corral.core import errors
from corral.core.http import Route, send_json
from corral.compute.api import links, policies, util, validation
from corral.compute.api.state import ComputeState
from corral.compute.db.api_queries import utcnow
from corral.compute.domain import usage as domain

PAGING = (2, 40)

_FORMATS = ("%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M:%S.%f", "%Y-%m-%d %H:%M:%S.%f")
_STRINGS = validation.multi({"type": "string"})
_INDEX_QUERY = validation.QuerySchema({"start": _STRINGS, "end": _STRINGS, "detailed": _STRINGS})
_SHOW_QUERY = validation.QuerySchema({"start": _STRINGS, "end": _STRINGS})
_INDEX_QUERY_V240 = validation.QuerySchema(
    {"start": _STRINGS, "end": _STRINGS, "detailed": _STRINGS, **validation.PAGINATION})
_SHOW_QUERY_V240 = validation.QuerySchema({"start": _STRINGS, "end": _STRINGS, **validation.PAGINATION})


def _parse_time(value: str | None, now: datetime.datetime) -> datetime.datetime:
    if not value:
        return now
    for fmt in _FORMATS:
        try:
            return datetime.datetime.strptime(value, fmt)
        except ValueError:
            continue
    raise errors.BadRequest("Invalid datetime string: Datetime is in invalid format")


def _period(req: falcon.Request, now: datetime.datetime) -> tuple[domain.Period, bool]:
    # As upstream, the first value of each parameter, straight from the query string.
    values = parse_qs(req.query_string or "")
    start = _parse_time(values.get("start", [None])[0], now)
    # Upstream reads the clock again for a missing end, a moment after the start.
    stop = _parse_time(values.get("end", [None])[0], now + datetime.timedelta(microseconds=1))
    if not start < stop:
        raise errors.BadRequest("Invalid start time. The start time cannot occur after the end time.")
    detailed = values.get("detailed", ["0"])[0] == "1"
    return domain.Period(start, min(stop, now)), detailed


def _paging(state: ComputeState, req: falcon.Request, values: dict[str, list[str]]) -> tuple[int, str | None]:
    max_limit = state.conf.api.max_limit
    if not req.context.at_least(*PAGING):
        return max_limit, None
    requested = validation.last(values, "limit")
    limit = max_limit if requested is None else min(max_limit, validation.count(requested))
    return limit, validation.last(values, "marker")


def _times(summary: dict[str, Any]) -> dict[str, Any]:
    """Timestamps as upstream serialises them ('2012-10-08T21:10:44.587336')."""
    shown = dict(summary, start=util.iso_micro(summary["start"]), stop=util.iso_micro(summary["stop"]))
    if "server_usages" in shown:
        shown["server_usages"] = [
            dict(info, started_at=util.iso_micro(info["started_at"]), ended_at=util.iso_micro(info["ended_at"]))
            for info in shown["server_usages"]
        ]
    return shown


def _usages(state: ComputeState, req: falcon.Request, values: dict[str, list[str]], project_id: str | None,
            detailed: bool | None = None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    now = utcnow()
    period, asked_detail = _period(req, now)
    limit, marker = _paging(state, req, values)
    try:
        return domain.tenant_usages(state, period, project_id=project_id,
                                    detailed=asked_detail if detailed is None else detailed,
                                    limit=limit, marker=marker, now=now)
    except domain.MarkerNotFound:
        raise errors.BadRequest(f"Marker {marker} could not be found.") from None


def _links(state: ComputeState, req: falcon.Request, collection: str, server_usages: list[dict[str, Any]],
           values: dict[str, list[str]]) -> list[dict[str, str]] | None:
    if not req.context.at_least(*PAGING) or not server_usages:
        return None
    max_limit = state.conf.api.max_limit
    requested = validation.last(values, "limit")
    expected = max_limit if requested is None else min(validation.count(requested), max_limit)
    if not expected or len(server_usages) != expected:
        return None
    return links.next_link(state, req, collection, server_usages[-1]["instance_id"])


def index(state: ComputeState, req: falcon.Request, resp: falcon.Response) -> None:
    paged = req.context.at_least(*PAGING)
    values = (_INDEX_QUERY_V240 if paged else _INDEX_QUERY).validate(req)
    util.authorize(state, req, policies.USAGE_LIST, {"project_id": req.context.project_id})
    summaries, server_usages = _usages(state, req, values, None)
    body: dict[str, Any] = {"tenant_usages": [_times(summary) for summary in summaries]}
    next_link = _links(state, req, "os-simple-tenant-usage", server_usages, values)
    if next_link:
        body["tenant_usages_links"] = next_link
    send_json(resp, body)


def show(state: ComputeState, req: falcon.Request, resp: falcon.Response, project_id: str) -> None:
    paged = req.context.at_least(*PAGING)
    values = (_SHOW_QUERY_V240 if paged else _SHOW_QUERY).validate(req)
    util.authorize(state, req, policies.USAGE_SHOW, {"project_id": project_id})
    summaries, server_usages = _usages(state, req, values, project_id, detailed=True)
    body: dict[str, Any] = {"tenant_usage": _times(summaries[0]) if summaries else {}}
    next_link = _links(state, req, f"os-simple-tenant-usage/{project_id}", server_usages, values)
    if next_link:
        body["tenant_usage_links"] = next_link
    send_json(resp, body)


ROUTES = [
    Route("/os-simple-tenant-usage", {"GET": index}),
    Route("/os-simple-tenant-usage/{project_id}", {"GET": show}),
]
