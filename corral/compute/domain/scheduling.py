"""What a boot asks Placement for, and which hosts may take it.

Resources come from the flavor (``VCPU``, ``MEMORY_MB``, ``DISK_GB``, with
``resources:<RC>=<n>`` extra specs overriding or adding classes) and traits
from ``trait:<NAME>=required|forbidden`` extra specs.

Aggregates turn into ``member_of`` as the forbidden-aggregates design
describes, with two options:

``[scheduler] placement_req_required_member_prefix``
    Each flavor extra spec whose key starts with the prefix requires an
    aggregate whose metadata has the same key and value
    (``member_of=in:<those aggregates>``); none such: no host.
``[scheduler] placement_req_default_forbidden_member_prefix``
    Unless the flavor has an extra spec starting with the prefix, every
    aggregate with a metadata key starting with it is excluded
    (``member_of=!in:<those aggregates>``): reserved hosts stay free for
    the flavors that ask for them.

Availability zones are aggregates with ``availability_zone`` metadata;
hosts in none of them are in ``[compute] default_availability_zone``.
"""

from __future__ import annotations

import datetime
import math
from dataclasses import dataclass, field
from typing import Any

from corral.core import errors
from corral.core.db import Database
from corral.compute.cells import CellMapping, is_failure
from corral.compute.db import aggregates as agg_db
from corral.compute.db import api_queries as q
from corral.compute.db import cell_queries as cq
from corral.compute.scheduler import NoValidHost, ResourceRequest

AZ_KEY = "availability_zone"
COMPUTE_BINARY = "nova-compute"


@dataclass
class BootPlan:
    request: ResourceRequest
    forced_host: str | None
    # host -> availability zone, for hosts in a zone-carrying aggregate
    host_zones: dict[str, str] = field(default_factory=dict)
    # Set when the aggregates rule out every host (a required aggregate is missing).
    impossible: str | None = None
    # The server group to enforce, and the servers of the same_host and
    # different_host hints (see corral.compute.domain.server_groups).
    group: dict[str, Any] | None = None
    same_host: list[str] = field(default_factory=list)
    different_host: list[str] = field(default_factory=list)
    # compute node uuid -> uuid of its cell, for the eligible nodes (alternates stay in one cell).
    node_cells: dict[str, str] = field(default_factory=dict)


def flavor_resources(flavor: dict[str, Any], boot_from_volume: bool) -> tuple[dict[str, int], set[str], set[str]]:
    swap_gb = math.ceil(flavor.get("swap", 0) / 1024)
    disk = (0 if boot_from_volume else flavor["root_gb"]) + flavor["ephemeral_gb"] + swap_gb
    resources = {"VCPU": flavor["vcpus"], "MEMORY_MB": flavor["memory_mb"], "DISK_GB": disk}
    required: set[str] = set()
    forbidden: set[str] = set()
    for key, value in (flavor.get("extra_specs") or {}).items():
        if key.startswith("resources:"):
            name = key.split(":", 1)[1]
            try:
                amount = int(value)
            except (TypeError, ValueError):
                raise errors.BadRequest(f"Invalid resource amount in extra spec {key}: {value}") from None
            resources[name] = amount
        elif key.startswith("trait:"):
            name = key.split(":", 1)[1]
            if value == "required":
                required.add(name)
            elif value == "forbidden":
                forbidden.add(name)
    return {rc: amount for rc, amount in resources.items() if amount > 0}, required, forbidden


def aggregate_member_of(conf: Any, aggregates: list[dict[str, Any]], extra_specs: dict[str, str]
                        ) -> tuple[list[list[str]], set[str], str | None]:
    """(required groups, forbidden aggregates, reason no host can match or None)."""
    groups: list[list[str]] = []
    impossible = None
    required_prefix = conf.scheduler.placement_req_required_member_prefix
    if required_prefix:
        for key, value in sorted(extra_specs.items()):
            if not key.startswith(required_prefix):
                continue
            matching = sorted(a["uuid"] for a in aggregates if a["metadata"].get(key) == value)
            if not matching:
                impossible = f"No aggregate has metadata {key}={value}."
            groups.append(matching)
    forbidden: set[str] = set()
    forbidden_prefix = conf.scheduler.placement_req_default_forbidden_member_prefix
    if forbidden_prefix and not any(key.startswith(forbidden_prefix) for key in extra_specs):
        forbidden = {a["uuid"] for a in aggregates if any(k.startswith(forbidden_prefix) for k in a["metadata"])}
    return groups, forbidden, impossible


def host_zones(aggregates: list[dict[str, Any]]) -> dict[str, str]:
    zones: dict[str, str] = {}
    for aggregate in aggregates:
        zone = aggregate["metadata"].get(AZ_KEY)
        if zone:
            for host in aggregate["hosts"]:
                zones.setdefault(host, zone)
    return zones


def known_zones(conf: Any, api_db: Database) -> set[str]:
    with api_db.read() as conn:
        aggregates = agg_db.all_aggregates(conn)
    return {conf.compute.default_availability_zone} | set(host_zones(aggregates).values())


def build_resource_request(state: Any, boot: Any) -> BootPlan:
    flavor = boot.flavor
    resources, required, forbidden = flavor_resources(flavor, boot_from_volume=not boot.image_id)
    with state.api_db.read() as conn:
        aggregates = agg_db.all_aggregates(conn)
    groups, forbidden_aggs, impossible = aggregate_member_of(state.conf, aggregates, flavor.get("extra_specs") or {})
    # Upstream: max_attempts - 1 alternates per server, none when the host is forced
    # (a build failure is then not rescheduled).
    alternates = 0 if boot.forced_host else state.conf.scheduler.max_attempts - 1
    request = ResourceRequest(
        resources=resources, required_traits=required, forbidden_traits=forbidden,
        member_of=groups, forbidden_aggregates=forbidden_aggs, alternates=alternates,
    )
    return BootPlan(request, boot.forced_host, host_zones(aggregates), impossible,
                    group=boot.group, same_host=list(boot.same_host), different_host=list(boot.different_host))


def service_is_up(conf: Any, service: dict[str, Any], now: datetime.datetime) -> bool:
    if service["forced_down"]:
        return False
    seen = service["last_seen_up"] or service["updated_at"] or service["created_at"]
    return seen is not None and (now - seen).total_seconds() <= conf.compute.service_down_time


def eligible_nodes(state: Any, plan: BootPlan, availability_zone: str | None) -> dict[str, tuple[str, str]]:
    """Compute nodes whose host is mapped, up, enabled and in the requested zone."""
    with state.api_db.read() as conn:
        mapped = {row.host for row in q.host_mappings(conn)}
    now = q.utcnow()

    def work(_cell: CellMapping, database: Database) -> list[tuple[str, str, str]]:
        with database.read() as conn:
            services = cq.list_services(conn, binary=COMPUTE_BINARY)
            usable = {
                s["host"] for s in services if not s["disabled"] and service_is_up(state.conf, s, now)
            }
            return [
                (node["uuid"], node["host"], node["hypervisor_hostname"])
                for node in cq.compute_nodes(conn) if node["host"] in usable
            ]

    cells = [cell for cell in state.cells.mappings() if not cell.is_cell0 and not cell.disabled]
    answers = state.cells.scatter_gather(cells, work)
    default_zone = state.conf.compute.default_availability_zone
    nodes: dict[str, tuple[str, str]] = {}
    for cell_uuid, answer in answers.items():
        if is_failure(answer):
            continue
        for node_uuid, host, nodename in answer:
            if host not in mapped:
                continue
            if plan.forced_host is not None and host != plan.forced_host:
                continue
            if availability_zone and plan.host_zones.get(host, default_zone) != availability_zone:
                continue
            nodes[node_uuid] = (host, nodename)
            plan.node_cells[node_uuid] = cell_uuid
    if plan.impossible:
        raise NoValidHost(plan.impossible)
    return nodes
