"""Hypervisors: the compute nodes of every cell (cell0 has none), with their service and usage.

A node is listed only while its host has a ``nova-compute`` service in the
same cell (upstream skips nodes whose service was deleted).  Usage is
counted from the instances on the node that are not deleted (soft-deleted
ones included, as upstream's resource tracker counts them); the host
reserves no memory of its own.  Cells are listed in mapping order and
nodes by id within a cell, as upstream pages them.  A cell that does not
answer is left out (upstream fails the request).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from corral.compute.cells import CellMapping, is_failure
from corral.compute.db import cell_queries as cq
from corral.compute.domain.scheduling import COMPUTE_BINARY
from corral.core.db import Database

STATISTICS = ("count", "current_workload", "disk_available_least", "free_disk_gb", "free_ram_mb", "local_gb",
              "local_gb_used", "memory_mb", "memory_mb_used", "running_vms", "vcpus", "vcpus_used")


@dataclass
class Hypervisor:
    cell: CellMapping
    node: dict[str, Any]
    service: dict[str, Any]
    usage: dict[str, int]
    # The servers on the node's host (uuid, display_name), when asked for.
    servers: list[dict[str, Any]] = field(default_factory=list)

    def value(self, name: str) -> int:
        """A numeric field of upstream's detailed view."""
        node, usage = self.node, self.usage
        if name == "free_ram_mb":
            return int(node["memory_mb"]) - usage.get("memory_mb_used", 0)
        if name == "free_disk_gb":
            return int(node["local_gb"]) - usage.get("local_gb_used", 0)
        if name == "disk_available_least":
            return 0
        if name in ("vcpus", "memory_mb", "local_gb"):
            return int(node[name])
        return usage.get(name, 0)


def hypervisors(state: Any, *, hostname_like: str | None = None, with_servers: bool = False) -> list[Hypervisor]:
    cells = [cell for cell in state.cells.mappings() if not cell.is_cell0]

    def work(_cell: CellMapping, database: Database) -> tuple[list[Any], ...]:
        with database.read() as conn:
            nodes = cq.compute_nodes(conn, hostname_like=hostname_like)
            services = cq.list_services(conn, binary=COMPUTE_BINARY)
            usage = cq.node_usage(conn)
            servers = cq.instances_on_hosts(conn, sorted({n["host"] for n in nodes})) if with_servers else []
            return nodes, services, [usage], servers

    answers = state.cells.scatter_gather(cells, work)
    found: list[Hypervisor] = []
    for cell in cells:
        answer = answers[cell.uuid]
        if is_failure(answer):
            continue
        nodes, services, (usage,), servers = answer  # type: ignore[misc]
        by_host = {service["host"]: service for service in services}
        for node in nodes:
            service = by_host.get(node["host"])
            if service is None:
                continue
            found.append(Hypervisor(
                cell, node, service, usage.get((node["host"], node["hypervisor_hostname"]), {}),
                [server for server in servers if server["host"] == node["host"]],
            ))
    return found


def statistics(state: Any) -> dict[str, int]:
    """Upstream's sums over the nodes whose compute service is enabled."""
    totals = dict.fromkeys(STATISTICS, 0)
    for hypervisor in hypervisors(state):
        if hypervisor.service["disabled"]:
            continue
        totals["count"] += 1
        for name in STATISTICS[1:]:
            totals[name] += hypervisor.value(name)
    return totals
