"""Scheduling through Placement, behind a small interface.

:class:`SchedulerClient` is all the rest of Compute knows: pick a host for
a :class:`ResourceRequest` and claim its resources for a consumer, release
a consumer's resources, and report compute nodes (providers, inventories,
aggregates).  :class:`~corral.compute.scheduler.placement.PlacementScheduler`
talks to a Placement API over HTTP; :class:`~corral.compute.scheduler.fake.FakeScheduler`
keeps the same state in memory for unit tests.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol


class NoValidHost(Exception):
    """No host has room for the request (upstream's wording in the message)."""

    def __init__(self, reason: str = "") -> None:
        message = "No valid host was found. " + (reason or "There are not enough hosts available.")
        super().__init__(message)
        self.reason = reason


class SchedulerUnavailable(Exception):
    """Placement could not be reached or answered with an unexpected error."""


@dataclass
class ResourceRequest:
    """What a server needs from Placement, already resolved from flavor and aggregates."""

    resources: dict[str, int]
    required_traits: set[str] = field(default_factory=set)
    forbidden_traits: set[str] = field(default_factory=set)
    # Each inner list is one member_of=in:... (the provider must be in one of them);
    # all lists must hold.
    member_of: list[list[str]] = field(default_factory=list)
    # member_of=!in:...
    forbidden_aggregates: set[str] = field(default_factory=set)
    # Providers that may be chosen: compute node uuid -> (host, nodename),
    # the nodes of hosts that are up and enabled (and the forced host).
    eligible_nodes: dict[str, tuple[str, str]] = field(default_factory=dict)
    # A raw weight per host added to the RAM weight once normalised and
    # multiplied (the soft server group policies); hosts not named weigh 0.
    host_weights: dict[str, float] = field(default_factory=dict)
    host_weight_multiplier: float = 0.0
    # How many other nodes to return with the one claimed, best first
    # (upstream's alternates: [scheduler] max_attempts - 1, none for a
    # forced host), for the compute service to retry a failed build on.
    alternates: int = 0

    def query(self, limit: int) -> list[tuple[str, str]]:
        """Query parameters of GET /allocation_candidates."""
        params = [("resources", ",".join(f"{rc}:{amount}" for rc, amount in sorted(self.resources.items())))]
        traits = sorted(self.required_traits) + [f"!{trait}" for trait in sorted(self.forbidden_traits)]
        if traits:
            params.append(("required", ",".join(traits)))
        for group in self.member_of:
            params.append(("member_of", "in:" + ",".join(sorted(group))))
        if self.forbidden_aggregates:
            params.append(("member_of", "!in:" + ",".join(sorted(self.forbidden_aggregates))))
        params.append(("limit", str(limit)))
        return params


def normalize(values: list[float]) -> list[float]:
    """Upstream's weight normalisation: to [0, 1], all 0 when every value is the same."""
    if not values:
        return []
    low, high = min(values), max(values)
    if low == high:
        return [0.0] * len(values)
    return [(value - low) / (high - low) for value in values]


def rank(request: ResourceRequest, candidates: list[tuple[str, int]]) -> list[str]:
    """Candidate nodes ([(node uuid, free RAM MiB)]) best first.

    As upstream's weighers add up: the normalised free RAM (the RAM
    weigher, multiplier 1) plus the normalised host weight times its
    multiplier.  Ties go to the better host weight, then more free RAM,
    then the node name.
    """
    hosts = [request.eligible_nodes[node][0] for node, _free in candidates]
    ram = normalize([float(free) for _node, free in candidates])
    extra = normalize([request.host_weights.get(host, 0.0) for host in hosts])
    scored = []
    for index, (node, free) in enumerate(candidates):
        score = ram[index] + request.host_weight_multiplier * extra[index]
        scored.append((-score, -extra[index], -free, request.eligible_nodes[node][1], node))
    scored.sort()
    return [item[-1] for item in scored]


@dataclass(frozen=True)
class Selection:
    host: str
    nodename: str
    provider_uuid: str
    allocations: dict[str, dict[str, int]]
    # Unclaimed nodes that also fit, best first (see ResourceRequest.alternates).
    alternates: tuple[Selection, ...] = ()


def pick_alternates(request: ResourceRequest, chosen: str,
                    ranked: list[tuple[str, dict[str, dict[str, int]]]]) -> tuple[Selection, ...]:
    """Up to ``request.alternates`` nodes other than ``chosen`` from ranked (node, allocations), one each."""
    found: list[Selection] = []
    seen = {chosen}
    for node, allocations in ranked:
        if len(found) >= request.alternates:
            break
        if node in seen:
            continue
        seen.add(node)
        host, nodename = request.eligible_nodes[node]
        found.append(Selection(host, nodename, node, allocations))
    return tuple(found)


@dataclass(frozen=True)
class ComputeNodeReport:
    host: str
    nodename: str
    uuid: str
    # resource class -> {"total", "reserved", "allocation_ratio", "min_unit", "max_unit", "step_size"}
    inventories: dict[str, dict[str, Any]]
    traits: frozenset[str] = frozenset()


class SchedulerClient(Protocol):
    def select_and_claim(
        self, request: ResourceRequest, consumer_uuid: str, project_id: str, user_id: str
    ) -> Selection:
        """Claim resources for ``consumer_uuid`` on one host; raises NoValidHost."""

    def claim(self, consumer_uuid: str, allocations: dict[str, dict[str, int]], project_id: str,
              user_id: str) -> bool:
        """Claim exactly these allocations for a consumer that has none; False when they no longer fit."""

    def release(self, consumer_uuid: str) -> None:
        """Drop every allocation of ``consumer_uuid`` (a no-op when it has none)."""

    def report_compute_node(self, report: ComputeNodeReport) -> None:
        """Create or update the node's resource provider, inventories and traits."""

    def set_provider_aggregates(self, provider_uuid: str, aggregate_uuids: set[str]) -> None:
        """Make the node's provider a member of exactly these aggregates (if it exists)."""

    def usages(self, project_id: str) -> dict[str, int]:
        """The project's resource usage across providers."""


def make_scheduler(conf: Any) -> SchedulerClient:
    from corral.compute.scheduler.placement import PlacementScheduler

    return PlacementScheduler(conf)
