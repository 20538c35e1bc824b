"""An in-memory Placement for unit tests of Compute (same interface as the HTTP client)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from corral.compute.scheduler import ComputeNodeReport, NoValidHost, ResourceRequest, Selection, pick_alternates, rank


@dataclass
class _Provider:
    uuid: str
    name: str
    host: str
    capacity: dict[str, int]
    traits: frozenset[str]
    aggregates: set[str] = field(default_factory=set)


class FakeScheduler:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._providers: dict[str, _Provider] = {}
        # consumer -> (project, {provider uuid: {rc: amount}})
        self._allocations: dict[str, tuple[str, dict[str, dict[str, int]]]] = {}
        self.requests: list[ResourceRequest] = []

    def report_compute_node(self, report: ComputeNodeReport) -> None:
        capacity = {
            rc: int((inv["total"] - inv.get("reserved", 0)) * inv.get("allocation_ratio", 1.0))
            for rc, inv in report.inventories.items()
        }
        with self._lock:
            known = self._providers.get(report.uuid)
            aggregates = known.aggregates if known else set()
            self._providers[report.uuid] = _Provider(
                report.uuid, report.nodename, report.host, capacity, report.traits, aggregates
            )

    def set_provider_aggregates(self, provider_uuid: str, aggregate_uuids: set[str]) -> None:
        with self._lock:
            provider = self._providers.get(provider_uuid)
            if provider is not None:
                provider.aggregates = set(aggregate_uuids)

    def _used(self, provider_uuid: str) -> dict[str, int]:
        used: dict[str, int] = {}
        for _project, allocations in self._allocations.values():
            for rc, amount in allocations.get(provider_uuid, {}).items():
                used[rc] = used.get(rc, 0) + amount
        return used

    def _fits(self, provider: _Provider, request: ResourceRequest) -> bool:
        if provider.uuid not in request.eligible_nodes:
            return False
        if not request.required_traits <= provider.traits or request.forbidden_traits & provider.traits:
            return False
        if any(not (set(group) & provider.aggregates) for group in request.member_of):
            return False
        if request.forbidden_aggregates & provider.aggregates:
            return False
        used = self._used(provider.uuid)
        return all(
            provider.capacity.get(rc, 0) - used.get(rc, 0) >= amount for rc, amount in request.resources.items()
        )

    def select_and_claim(self, request: ResourceRequest, consumer_uuid: str, project_id: str,
                         user_id: str) -> Selection:
        with self._lock:
            self.requests.append(request)
            fitting = [p for p in self._providers.values() if self._fits(p, request)]
            if not fitting:
                raise NoValidHost()
            free_ram = [
                (p.uuid, p.capacity.get("MEMORY_MB", 0) - self._used(p.uuid).get("MEMORY_MB", 0)) for p in fitting
            ]
            ranked = rank(request, free_ram)
            chosen = self._providers[ranked[0]]
            allocations = {chosen.uuid: dict(request.resources)}
            self._allocations[consumer_uuid] = (project_id, allocations)
            host, nodename = request.eligible_nodes[chosen.uuid]
            others = [(node, {node: dict(request.resources)}) for node in ranked]
            return Selection(host, nodename, chosen.uuid, allocations, pick_alternates(request, chosen.uuid, others))

    def claim(self, consumer_uuid: str, allocations: dict[str, dict[str, int]], project_id: str,
              user_id: str) -> bool:
        with self._lock:
            if consumer_uuid in self._allocations:
                return False
            for provider_uuid, resources in allocations.items():
                provider = self._providers.get(provider_uuid)
                used = self._used(provider_uuid)
                if provider is None or any(provider.capacity.get(rc, 0) - used.get(rc, 0) < amount
                                           for rc, amount in resources.items()):
                    return False
            self._allocations[consumer_uuid] = (project_id, {rp: dict(r) for rp, r in allocations.items()})
            return True

    def release(self, consumer_uuid: str) -> None:
        with self._lock:
            self._allocations.pop(consumer_uuid, None)

    def usages(self, project_id: str) -> dict[str, int]:
        total: dict[str, int] = {}
        with self._lock:
            for project, allocations in self._allocations.values():
                if project != project_id:
                    continue
                for resources in allocations.values():
                    for rc, amount in resources.items():
                        total[rc] = total.get(rc, 0) + amount
        return total

    def allocations_of(self, consumer_uuid: str) -> dict[str, Any]:
        with self._lock:
            found = self._allocations.get(consumer_uuid)
            return {} if found is None else dict(found[1])
