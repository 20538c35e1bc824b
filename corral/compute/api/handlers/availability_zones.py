"""/os-availability-zone and /os-availability-zone/detail (upstream's ``availability_zone.py``).

Zones come from the services of every cell: a compute service is in its
host's aggregate zone or ``[compute] default_availability_zone``, any
other service in ``[compute] internal_service_availability_zone``.  A zone
is available when one of its services is enabled.  The list leaves the
internal zone out; the detail (admins) shows the enabled services of each
available zone by host, and ``null`` hosts for the others.
"""

from __future__ import annotations

from typing import Any

import falcon

from corral.core.http import Route, send_json
from corral.compute.api import policies, util
from corral.compute.api.state import ComputeState
from corral.compute.db import aggregates as agg_db
from corral.compute.domain import services as service_domain
from corral.compute.domain.scheduling import COMPUTE_BINARY, host_zones


def _zoned_services(state: ComputeState) -> list[tuple[str, dict[str, Any]]]:
    """(zone, service row) for every service of the cells that answer."""
    with state.api_db.read() as conn:
        zones = host_zones(agg_db.all_aggregates(conn))
    conf = state.conf.compute
    found = []
    for entry in service_domain.list_services(state, host=None, binary=None, minimal_for_down=False):
        row = entry.row
        if row is None:
            continue
        if row["binary"] == COMPUTE_BINARY:
            zone = zones.get(row["host"], conf.default_availability_zone)
        else:
            zone = conf.internal_service_availability_zone
        found.append((zone, row))
    return found


def _split(services: list[tuple[str, dict[str, Any]]]) -> tuple[list[str], list[str]]:
    available = {zone for zone, row in services if not row["disabled"]}
    unavailable = {zone for zone, row in services if row["disabled"]} - available
    return sorted(available), sorted(unavailable)


def index(state: ComputeState, req: falcon.Request, resp: falcon.Response) -> None:
    util.authorize(state, req, policies.AVAILABILITY_ZONE_LIST, {})
    available, unavailable = _split(_zoned_services(state))
    internal = state.conf.compute.internal_service_availability_zone
    info = [
        {"zoneName": zone, "zoneState": {"available": is_available}, "hosts": None}
        for zones, is_available in ((available, True), (unavailable, False))
        for zone in zones if zone != internal
    ]
    send_json(resp, {"availabilityZoneInfo": info})


def detail(state: ComputeState, req: falcon.Request, resp: falcon.Response) -> None:
    util.authorize(state, req, policies.AVAILABILITY_ZONE_DETAIL, {})
    services = _zoned_services(state)
    available, unavailable = _split(services)
    hosts: dict[str, dict[str, dict[str, Any]]] = {}
    for zone, row in services:
        if row["disabled"]:
            continue
        hosts.setdefault(zone, {}).setdefault(row["host"], {})[row["binary"]] = {
            "available": service_domain.is_up(state.conf, row),
            "active": True,
            "updated_at": util.iso_micro(row["updated_at"]),
        }
    info = [{"zoneName": zone, "zoneState": {"available": True}, "hosts": hosts.get(zone, {})} for zone in available]
    info += [{"zoneName": zone, "zoneState": {"available": False}, "hosts": None} for zone in unavailable]
    send_json(resp, {"availabilityZoneInfo": info})


ROUTES = [
    Route("/os-availability-zone", {"GET": index}),
    Route("/os-availability-zone/detail", {"GET": detail}),
]
