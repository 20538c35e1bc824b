"""The scheduler client over Placement's HTTP API.

Candidates come from ``GET /allocation_candidates``; the chosen one is
claimed with ``PUT /allocations/{consumer}`` and ``consumer_generation:
null`` (a new consumer).  A 409 (another claim took the room, or the
provider changed) moves on to the next candidate; when all candidates of
one answer are spent the query is asked again, up to ``[scheduler]
max_attempts`` times.  Among candidates, the host with the most free RAM
comes first (upstream's default RAM weigher spreads the same way), weighed
together with the request's host weights (see :func:`rank`).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import requests
from oslo_config import cfg

from corral.core import local_calls
from corral.core.service_auth import ServiceCredentials
from corral.compute.scheduler import (
    ComputeNodeReport,
    NoValidHost,
    ResourceRequest,
    SchedulerUnavailable,
    Selection,
    pick_alternates,
    rank,
)

LOG = logging.getLogger(__name__)

PLACEMENT_VERSION = "placement 1.36"


class PlacementScheduler:
    def __init__(self, conf: cfg.ConfigOpts) -> None:
        self._conf = conf
        endpoint = conf.placement.endpoint or f"http://127.0.0.1:{conf.placement.local_port}/placement"
        self._endpoint = endpoint.rstrip("/")
        self._local = threading.local()
        self._credentials: ServiceCredentials | None = None

    # ----------------------------------------------------------- plumbing

    def _session(self) -> requests.Session:
        session = getattr(self._local, "session", None)
        if session is None:
            session = requests.Session()
            session.headers.update({
                "OpenStack-API-Version": PLACEMENT_VERSION,
                "Accept": "application/json",
            })
            # Placement served by this very process: called in this thread (see corral.core.local_calls).
            local = None if self._conf.placement.endpoint else local_calls.app_for(self._conf)
            if local is not None:
                session.mount(self._endpoint, local_calls.LocalAdapter(local))
            self._local.session = session
        return session

    def _auth_headers(self) -> dict[str, str]:
        try:
            if self._credentials is None:
                self._credentials = ServiceCredentials(self._conf, "placement")
            return self._credentials.headers()
        except Exception as error:  # noqa: BLE001 - any failure to get credentials stops scheduling alike
            raise SchedulerUnavailable(f"no credentials for Placement: {error}") from error

    def _call(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        for attempt in (1, 2):
            try:
                response = self._session().request(
                    method, self._endpoint + path, timeout=self._conf.placement.request_timeout,
                    headers=self._auth_headers(), **kwargs
                )
            except requests.RequestException as error:
                raise SchedulerUnavailable(f"Placement at {self._endpoint} cannot be reached: {error}") from error
            if response.status_code != 401 or attempt == 2 or self._credentials is None:
                return response
            # The token was revoked or the keys rotated: a new one, once.
            self._credentials.refused()
        return response

    def _expect(self, response: requests.Response, *statuses: int) -> requests.Response:
        if response.status_code not in statuses:
            raise SchedulerUnavailable(
                f"Placement answered {response.status_code} to {response.request.method} "
                f"{response.request.path_url}: {response.text[:500]}"
            )
        return response

    # ---------------------------------------------------------- scheduling

    def _candidates(self, request: ResourceRequest) -> list[tuple[str, dict[str, dict[str, int]]]]:
        params = request.query(self._conf.scheduler.max_placement_results)
        body = self._expect(self._call("GET", "/allocation_candidates", params=params), 200).json()
        summaries = body.get("provider_summaries", {})
        # Each node's allocation requests, in Placement's order.
        found: dict[str, list[dict[str, dict[str, int]]]] = {}
        free_ram: list[tuple[str, int]] = []
        for candidate in body.get("allocation_requests", []):
            allocations = {rp: item["resources"] for rp, item in candidate["allocations"].items()}
            roots = {summaries.get(rp, {}).get("root_provider_uuid", rp) for rp in allocations}
            node = next((root for root in roots if root in request.eligible_nodes), None)
            if node is None:
                continue
            if node not in found:
                memory = summaries.get(node, {}).get("resources", {}).get("MEMORY_MB", {})
                free_ram.append((node, memory.get("capacity", 0) - memory.get("used", 0)))
            found.setdefault(node, []).append(allocations)
        return [(node, allocations) for node in rank(request, free_ram) for allocations in found[node]]

    def select_and_claim(self, request: ResourceRequest, consumer_uuid: str, project_id: str,
                         user_id: str) -> Selection:
        if not request.eligible_nodes:
            raise NoValidHost("There are not enough hosts available.")
        for _attempt in range(self._conf.scheduler.max_attempts):
            candidates = self._candidates(request)
            if not candidates:
                raise NoValidHost("There are not enough hosts available.")
            for node, allocations in candidates:
                if self.claim(consumer_uuid, allocations, project_id, user_id):
                    host, nodename = request.eligible_nodes[node]
                    return Selection(host, nodename, node, allocations,
                                     pick_alternates(request, node, candidates))
        raise NoValidHost("Every candidate was taken by concurrent requests.")

    def claim(self, consumer_uuid: str, allocations: dict[str, dict[str, int]], project_id: str,
              user_id: str) -> bool:
        body = {
            "allocations": {rp: {"resources": resources} for rp, resources in allocations.items()},
            "project_id": project_id,
            "user_id": user_id,
            "consumer_generation": None,
        }
        response = self._call("PUT", f"/allocations/{consumer_uuid}", json=body)
        if response.status_code == 204:
            return True
        if response.status_code == 409:
            LOG.debug("claim for %s lost a race: %s", consumer_uuid, response.text[:300])
            return False
        self._expect(response, 204)
        return False

    def release(self, consumer_uuid: str) -> None:
        response = self._call("DELETE", f"/allocations/{consumer_uuid}")
        self._expect(response, 204, 404)

    def usages(self, project_id: str) -> dict[str, int]:
        body = self._expect(self._call("GET", "/usages", params={"project_id": project_id}), 200).json()
        return {rc: int(amount) for rc, amount in body.get("usages", {}).items()}

    # ------------------------------------------------------------ reporting

    def report_compute_node(self, report: ComputeNodeReport) -> None:
        generation = self._ensure_provider(report.uuid, report.nodename)
        for resource_class in report.inventories:
            if resource_class.startswith("CUSTOM_"):
                self._expect(self._call("PUT", f"/resource_classes/{resource_class}"), 201, 204)
        inventories = report.inventories
        for _attempt in range(5):
            response = self._call(
                "PUT", f"/resource_providers/{report.uuid}/inventories",
                json={"resource_provider_generation": generation, "inventories": inventories},
            )
            if response.status_code == 200:
                generation = response.json()["resource_provider_generation"]
                break
            if response.status_code != 409:
                self._expect(response, 200)
            if "placement.inventory.inuse" in response.text:
                # A node reserved while in use (bare metal): what is allocated is out of reach
                # already, so the reservation stops at what is left.
                inventories = self._reserved_within_usage(report.uuid, inventories)
            generation = self._generation(report.uuid)
        if report.traits:
            self._set_traits(report.uuid, report.traits)

    def _reserved_within_usage(self, uuid: str, inventories: dict[str, dict[str, Any]]
                               ) -> dict[str, dict[str, Any]]:
        usages = self._expect(self._call("GET", f"/resource_providers/{uuid}/usages"), 200).json()["usages"]
        lowered = {}
        for resource_class, inventory in inventories.items():
            room = int(inventory["total"]) - int(usages.get(resource_class, 0))
            lowered[resource_class] = {**inventory, "reserved": max(0, min(int(inventory.get("reserved", 0)), room))}
        return lowered

    def _ensure_provider(self, uuid: str, name: str) -> int:
        response = self._call("GET", f"/resource_providers/{uuid}")
        if response.status_code == 200:
            return int(response.json()["generation"])
        self._expect(response, 404)
        created = self._call("POST", "/resource_providers", json={"uuid": uuid, "name": name})
        if created.status_code == 409:
            return self._generation(uuid)
        return int(self._expect(created, 200, 201).json()["generation"]) if created.content else self._generation(uuid)

    def _generation(self, uuid: str) -> int:
        return int(self._expect(self._call("GET", f"/resource_providers/{uuid}"), 200).json()["generation"])

    def _set_traits(self, uuid: str, traits: frozenset[str]) -> None:
        for trait in traits:
            if trait.startswith("CUSTOM_"):
                self._expect(self._call("PUT", f"/traits/{trait}"), 201, 204)
        for _attempt in range(5):
            response = self._call(
                "PUT", f"/resource_providers/{uuid}/traits",
                json={"resource_provider_generation": self._generation(uuid), "traits": sorted(traits)},
            )
            if response.status_code == 200:
                return
            if response.status_code != 409:
                self._expect(response, 200)

    def set_provider_aggregates(self, provider_uuid: str, aggregate_uuids: set[str]) -> None:
        for _attempt in range(5):
            current = self._call("GET", f"/resource_providers/{provider_uuid}/aggregates")
            if current.status_code == 404:
                return
            body = self._expect(current, 200).json()
            response = self._call(
                "PUT", f"/resource_providers/{provider_uuid}/aggregates",
                json={"aggregates": sorted(aggregate_uuids),
                      "resource_provider_generation": body["resource_provider_generation"]},
            )
            if response.status_code == 200:
                return
            if response.status_code != 409:
                self._expect(response, 200)
