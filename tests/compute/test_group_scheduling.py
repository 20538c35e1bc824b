"""Server group policies and host hints enforced when scheduling, on every backend.

The concurrent cases make every boot read the group before any of them is
placed (a barrier in the scheduler), which is the race upstream's late
check in the compute service exists for: without the check at claim time
they would all pick the same host.
"""

from __future__ import annotations

import collections
import concurrent.futures
import threading
from typing import Any

import pytest

from corral.compute.db import api_queries as q
from corral.compute.manager import ComputeManager
from corral.compute.scheduler import ResourceRequest, Selection
from corral.compute.scheduler.fake import FakeScheduler
from tests.compute.conftest import IMAGE, ComputeServer

USER_A = "user-a:project-a"
NO_VALID_HOST = "No valid host was found. There are not enough hosts available."


class RacingScheduler(FakeScheduler):
    """Holds the first ``parties`` claims until all of them have read the group."""

    def __init__(self, parties: int) -> None:
        super().__init__()
        self.parties = parties
        self.barrier = threading.Barrier(parties, timeout=60)
        self.calls = 0
        self._calls_lock = threading.Lock()

    def select_and_claim(self, request: ResourceRequest, consumer_uuid: str, project_id: str,
                         user_id: str) -> Selection:
        with self._calls_lock:
            self.calls += 1
            racing = self.calls <= self.parties
        if racing:
            self.barrier.wait()
        return super().select_and_claim(request, consumer_uuid, project_id, user_id)


def _add_hosts(compute: ComputeServer, hosts: dict[str, tuple[str, int]]) -> None:
    """Compute hosts: name -> (cell, MiB of RAM)."""
    for host, (cell, memory_mb) in hosts.items():
        manager = ComputeManager(compute.conf, host, compute.state.cells.database(compute.cells[cell]),
                                 compute.scheduler, api_db=compute.state.api_db, cell=compute.cells[cell])
        manager.driver.memory_mb = memory_mb
        manager.register()
        compute.managers[host] = manager


def _group(cloud: ComputeServer, policy: str, rules: dict[str, int] | None = None) -> str:
    body: dict[str, Any] = {"name": policy, "policy": policy}
    if rules:
        body["rules"] = rules
    resp = cloud.client("2.64", token=USER_A).post("/v2.1/os-server-groups", json={"server_group": body})
    assert resp.status_code == 200, resp.text
    return str(resp.json()["server_group"]["id"])


def _boot(url_client: Any, hints: dict[str, Any], name: str = "vm") -> str:
    body = {"name": name, "flavorRef": "1", "imageRef": IMAGE, "networks": "none"}
    resp = url_client.post("/v2.1/servers", json={"server": body, "os:scheduler_hints": hints})
    assert resp.status_code == 202, resp.text
    return str(resp.json()["server"]["id"])


def _placement(cloud: ComputeServer, server: str) -> tuple[str, str | None]:
    shown = cloud.client("2.73").get(f"/v2.1/servers/{server}").json()["server"]
    return shown["status"], shown["OS-EXT-SRV-ATTR:host"]


def _boot_all(cloud: ComputeServer, hints: dict[str, Any], count: int) -> list[str]:
    return [_boot(cloud.client("2.73", token=USER_A), hints, name=f"vm{index}") for index in range(count)]


def _boot_at_once(cloud: ComputeServer, hints: dict[str, Any], count: int) -> list[str]:
    with concurrent.futures.ThreadPoolExecutor(max_workers=count) as pool:
        futures = [pool.submit(_boot, cloud.client("2.73", token=USER_A), hints, f"vm{index}")
                   for index in range(count)]
        return [future.result(timeout=120) for future in futures]


def _in_cell0(cloud: ComputeServer, server: str) -> bool:
    with cloud.state.api_db.read() as conn:
        mapping = q.instance_mapping(conn, server)
    return bool(mapping.cell_id == cloud.cells["cell0"].id)


def test_anti_affinity_spreads_then_no_valid_host(cloud: ComputeServer) -> None:
    group = _group(cloud, "anti-affinity")
    first, second, third = _boot_all(cloud, {"group": group}, 3)
    cloud.run_computes()
    placed = [_placement(cloud, server) for server in (first, second)]
    assert {status for status, _host in placed} == {"ACTIVE"}
    assert {host for _status, host in placed} == {"host-cell1", "host-cell2"}
    assert _placement(cloud, third) == ("ERROR", None)
    fault = cloud.client("2.73", token=USER_A).get(f"/v2.1/servers/{third}").json()["server"]["fault"]
    assert fault["code"] == 500 and fault["message"] == NO_VALID_HOST
    assert _in_cell0(cloud, third)
    # Members in ERROR are still members (not deleted), as upstream lists them.
    members = cloud.client("2.73", token=USER_A).get(f"/v2.1/os-server-groups/{group}").json()["server_group"]
    assert members["members"] == [first, second, third]
    # Deleting a member frees its host for the group.
    first_host = _placement(cloud, first)[1]
    assert cloud.client("2.73", token=USER_A).delete(f"/v2.1/servers/{first}").status_code == 204
    fourth = _boot(cloud.client("2.73", token=USER_A), {"group": group})
    assert _placement(cloud, fourth) == ("BUILD", first_host)


def test_max_server_per_host(cloud: ComputeServer) -> None:
    group = _group(cloud, "anti-affinity", {"max_server_per_host": 2})
    servers = _boot_all(cloud, {"group": group}, 5)
    hosts = collections.Counter(_placement(cloud, server)[1] for server in servers)
    assert hosts == {"host-cell1": 2, "host-cell2": 2, None: 1}
    assert _placement(cloud, servers[-1]) == ("ERROR", None)


def test_affinity_packs_on_the_first_members_host(cloud: ComputeServer) -> None:
    group = _group(cloud, "affinity")
    servers = _boot_all(cloud, {"group": group}, 3)
    hosts = {_placement(cloud, server)[1] for server in servers}
    assert len(hosts) == 1 and hosts != {None}
    # Once that host is full (disabled here), no other host may take a member.
    (host,) = hosts
    admin = cloud.client("2.73")
    service = next(s for s in admin.get("/v2.1/os-services").json()["services"] if s["host"] == host)
    assert admin.put(f"/v2.1/os-services/{service['id']}", json={"status": "disabled"}).status_code == 200
    refused = _boot(cloud.client("2.73", token=USER_A), {"group": group})
    assert _placement(cloud, refused) == ("ERROR", None)
    # A server outside the group still boots, on the other host.
    outside = cloud.boot(version="2.73")
    assert _placement(cloud, outside)[1] not in (host, None)


@pytest.mark.parametrize(("policy", "expected"), [("soft-affinity", [4]), ("soft-anti-affinity", [2, 2])])
def test_soft_policies_weigh(cloud: ComputeServer, policy: str, expected: list[int]) -> None:
    group = _group(cloud, policy)
    servers = _boot_all(cloud, {"group": group}, 4)
    hosts = collections.Counter(_placement(cloud, server)[1] for server in servers)
    assert None not in hosts
    assert sorted(hosts.values(), reverse=True) == expected


def test_same_host_and_different_host_hints(cloud: ComputeServer) -> None:
    anchor = cloud.boot(version="2.73")
    anchor_host = _placement(cloud, anchor)[1]
    client = cloud.client("2.73", token=USER_A)
    for _index in range(2):
        near = _boot(client, {"same_host": [anchor]})
        assert _placement(cloud, near)[1] == anchor_host
        far = _boot(client, {"different_host": anchor})
        assert _placement(cloud, far)[1] not in (anchor_host, None)
    nowhere = _boot(client, {"same_host": anchor, "different_host": [anchor]})
    assert _placement(cloud, nowhere) == ("ERROR", None)
    unknown = _boot(client, {"same_host": "6c8a8a63-0000-4000-8000-000000000000"})
    assert _placement(cloud, unknown) == ("ERROR", None)
    bad = client.post("/v2.1/servers", json={
        "server": {"name": "x", "flavorRef": "1", "imageRef": IMAGE, "networks": "none"},
        "os:scheduler_hints": {"different_host": "nope"}})
    assert bad.status_code == 400


def test_concurrent_boots_into_anti_affinity_never_share_a_host(compute: ComputeServer) -> None:
    scheduler = RacingScheduler(parties=2)
    compute.setup_cloud(scheduler=scheduler, hosts={})
    # One host much larger: both boots choose it.
    _add_hosts(compute, {"big": ("cell1", 262144), "small": ("cell2", 16384)})
    group = _group(compute, "anti-affinity")
    servers = _boot_at_once(compute, {"group": group}, 2)
    hosts = sorted(_placement(compute, server)[1] or "" for server in servers)
    assert hosts == ["big", "small"]
    # The claim on "big" by one of them was refused and retried elsewhere.
    assert scheduler.calls == 3


def test_concurrent_boots_beyond_the_hosts_leave_one_in_error(compute: ComputeServer) -> None:
    scheduler = RacingScheduler(parties=3)
    compute.setup_cloud(scheduler=scheduler, hosts={})
    _add_hosts(compute, {"big": ("cell1", 262144), "small": ("cell2", 16384)})
    group = _group(compute, "anti-affinity")
    servers = _boot_at_once(compute, {"group": group}, 3)
    placements = collections.Counter(_placement(compute, server) for server in servers)
    assert placements == {("BUILD", "big"): 1, ("BUILD", "small"): 1, ("ERROR", None): 1}
    assert scheduler.calls > 3
    # The one in error released whatever it claimed.
    assert sum(1 for server in servers if scheduler.allocations_of(server)) == 2


def test_concurrent_boots_into_affinity_share_the_host(compute: ComputeServer) -> None:
    scheduler = RacingScheduler(parties=2)
    compute.setup_cloud(scheduler=scheduler, hosts={})
    # Equal hosts: once one is claimed the other has more free RAM and is chosen.
    _add_hosts(compute, {"left": ("cell1", 65536), "right": ("cell2", 65536)})
    group = _group(compute, "affinity")
    servers = _boot_at_once(compute, {"group": group}, 2)
    hosts = {_placement(compute, server)[1] for server in servers}
    assert len(hosts) == 1 and hosts <= {"left", "right"}
    assert scheduler.calls == 3


def test_many_concurrent_boots_without_a_barrier(compute: ComputeServer) -> None:
    compute.setup_cloud(hosts={"h1": ("cell1", frozenset()), "h2": ("cell2", frozenset()),
                               "h3": ("cell1", frozenset())})
    group = _group(compute, "anti-affinity")
    servers = _boot_at_once(compute, {"group": group}, 6)
    placements = [_placement(compute, server) for server in servers]
    hosts = [host for _status, host in placements if host is not None]
    assert sorted(hosts) == ["h1", "h2", "h3"]
    assert [status for status, host in placements if host is None] == ["ERROR"] * 3
