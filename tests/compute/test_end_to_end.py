"""End to end through Corral's own Placement over HTTP.

Flavors with resources and traits, aggregates carrying reservation
metadata as in the forbidden-aggregates design (required and default
forbidden member prefixes), boots that land only where allowed, claims
released on delete, capacity and quotas enforced, server group policies
held also when boots race for the same host.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Iterator
from typing import Any

import pytest

from corral.core import migrations
from corral.core.db import create_engine, truncate_all
from corral.core.server import ThreadedServer
from corral.compute.scheduler.placement import PlacementScheduler
from corral.placement.api.app import build_state as placement_state
from corral.placement.api.app import load_standard_names
from corral.placement.api.app import make_app as placement_app
from corral.placement.db.schema import TREE as PLACEMENT_TREE
from corral.placement.db.tables import metadata as placement_metadata
from tests.compute.conftest import IMAGE, ComputeServer
from tests.support.databases import DatabaseFactory
from tests.support.http import ApiClient

USER_A = "user-a:project-a"
PREFIX = "reservation:"
HOSTS = {
    "host-a": ("cell1", frozenset()),
    "host-gpu": ("cell2", frozenset({"CUSTOM_GPU"})),
    "host-reserved": ("cell1", frozenset()),
}


class PlacementSide:
    def __init__(self, compute: ComputeServer, database_factory: DatabaseFactory) -> None:
        url = database_factory.new_url("placement")
        engine = create_engine(url)
        migrations.upgrade(engine, PLACEMENT_TREE)
        engine.dispose()
        compute.conf.set_override("connection", url, group="placement_database")
        self.state = placement_state(compute.conf)
        self.server = ThreadedServer(placement_app(compute.conf, self.state)).start()
        self.client = ApiClient(self.server.url, {"X-Auth-Token": "admin", "OpenStack-API-Version": "placement 1.36"})

    def reset(self) -> None:
        truncate_all(self.state.db, placement_metadata)
        load_standard_names(self.state)
        # Placement remembers project and user ids; the rows were just deleted.
        self.state.cache.clear()

    def stop(self) -> None:
        self.server.stop()
        self.state.db.dispose()


@pytest.fixture(scope="session")
def placement_side(compute_server: ComputeServer, database_factory: DatabaseFactory) -> Iterator[PlacementSide]:
    side = PlacementSide(compute_server, database_factory)
    yield side
    side.stop()


@pytest.fixture
def e2e(compute: ComputeServer, placement_side: PlacementSide) -> Iterator[tuple[ComputeServer, PlacementSide]]:
    placement_side.reset()
    conf = compute.conf
    conf.set_override("endpoint", placement_side.server.url, group="placement")
    conf.set_override("placement_req_required_member_prefix", PREFIX, group="scheduler")
    conf.set_override("placement_req_default_forbidden_member_prefix", PREFIX, group="scheduler")
    conf.set_override("vcpus", 4, group="fake_driver")
    compute.setup_cloud(scheduler=PlacementScheduler(conf), hosts=HOSTS)
    yield compute, placement_side
    for name, group in (("endpoint", "placement"), ("placement_req_required_member_prefix", "scheduler"),
                        ("placement_req_default_forbidden_member_prefix", "scheduler"), ("vcpus", "fake_driver")):
        conf.clear_override(name, group=group)


def _flavor(compute: ComputeServer, flavor_id: str, specs: dict[str, str], vcpus: int = 1) -> None:
    admin = compute.client("2.69")
    body = {"name": f"flavor-{flavor_id}", "ram": 256, "vcpus": vcpus, "disk": 1, "id": flavor_id}
    assert admin.post("/v2.1/flavors", json={"flavor": body}).status_code == 200
    if specs:
        assert admin.post(f"/v2.1/flavors/{flavor_id}/os-extra_specs", json={"extra_specs": specs}).status_code == 200


def _reserve(compute: ComputeServer, host: str, reservation: str) -> dict[str, Any]:
    admin = compute.client("2.69")
    aggregate = admin.post("/v2.1/os-aggregates", json={"aggregate": {"name": f"resv-{reservation}"}}).json()
    aggregate_id = aggregate["aggregate"]["id"]
    resp = admin.post(f"/v2.1/os-aggregates/{aggregate_id}/action", json={"add_host": {"host": host}})
    assert resp.status_code == 200, resp.text
    resp = admin.post(f"/v2.1/os-aggregates/{aggregate_id}/action",
                      json={"set_metadata": {"metadata": {f"{PREFIX}{reservation}": "true"}}})
    assert resp.status_code == 200
    return dict(resp.json()["aggregate"])


def _host_of(compute: ComputeServer, server: str) -> str | None:
    body = compute.client("2.69").get(f"/v2.1/servers/{server}").json()["server"]
    return body["OS-EXT-SRV-ATTR:host"]


def test_nodes_are_reported_to_placement(e2e: tuple[ComputeServer, PlacementSide]) -> None:
    compute, placement = e2e
    providers = placement.client.get("/resource_providers").json()["resource_providers"]
    assert sorted(p["name"] for p in providers) == sorted(HOSTS)
    gpu = next(p for p in providers if p["name"] == "host-gpu")
    traits = placement.client.get(f"/resource_providers/{gpu['uuid']}/traits").json()["traits"]
    assert "CUSTOM_GPU" in traits
    inventory = placement.client.get(f"/resource_providers/{gpu['uuid']}/inventories").json()["inventories"]
    assert inventory["VCPU"]["total"] == 4


def test_reserved_hosts_only_take_their_reservation(e2e: tuple[ComputeServer, PlacementSide]) -> None:
    compute, placement = e2e
    aggregate = _reserve(compute, "host-reserved", "abc")
    providers = placement.client.get("/resource_providers?member_of=" + aggregate["uuid"]).json()
    assert [p["name"] for p in providers["resource_providers"]] == ["host-reserved"]
    _flavor(compute, "resv", {f"{PREFIX}abc": "true"})
    reserved = [compute.boot(name=f"r{i}", flavorRef="resv") for i in range(2)]
    assert {_host_of(compute, s) for s in reserved} == {"host-reserved"}
    general = [compute.boot(name=f"g{i}") for i in range(4)]
    assert "host-reserved" not in {_host_of(compute, s) for s in general}
    _flavor(compute, "other-resv", {f"{PREFIX}nope": "true"})
    orphan = compute.boot(name="orphan", flavorRef="other-resv")
    assert compute.client("2.69").get(f"/v2.1/servers/{orphan}").json()["server"]["status"] == "ERROR"


def test_required_traits_pick_the_gpu_host(e2e: tuple[ComputeServer, PlacementSide]) -> None:
    compute, _placement = e2e
    _flavor(compute, "gpu", {"trait:CUSTOM_GPU": "required"})
    servers = [compute.boot(name=f"gpu{i}", flavorRef="gpu") for i in range(2)]
    assert {_host_of(compute, s) for s in servers} == {"host-gpu"}
    _flavor(compute, "nogpu", {"trait:CUSTOM_GPU": "forbidden"})
    plain = [compute.boot(name=f"n{i}", flavorRef="nogpu") for i in range(2)]
    assert "host-gpu" not in {_host_of(compute, s) for s in plain}


def test_claims_and_release(e2e: tuple[ComputeServer, PlacementSide]) -> None:
    compute, placement = e2e
    server = compute.boot()
    compute.run_computes()
    allocations = placement.client.get(f"/allocations/{server}").json()
    (resources,) = [a["resources"] for a in allocations["allocations"].values()]
    assert resources == {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1}
    assert allocations["project_id"] == "project-a"
    usages = placement.client.get("/usages?project_id=project-a").json()["usages"]
    assert usages["VCPU"] == 1
    assert compute.client("2.69", token=USER_A).delete(f"/v2.1/servers/{server}").status_code == 204
    assert placement.client.get(f"/allocations/{server}").json()["allocations"] == {}


def test_capacity_runs_out(e2e: tuple[ComputeServer, PlacementSide]) -> None:
    compute, _placement = e2e
    # host-reserved is forbidden to plain flavors: 2 hosts x 4 vCPUs.
    _flavor(compute, "big", {}, vcpus=4)
    admin = compute.client("2.69")
    admin.put("/v2.1/os-quota-sets/project-a", json={"quota_set": {"cores": 100}})
    _reserve(compute, "host-reserved", "keep-out")
    placed = [compute.boot(name=f"big{i}", flavorRef="big") for i in range(2)]
    assert {_host_of(compute, s) for s in placed} == {"host-a", "host-gpu"}
    third = compute.boot(name="big-3", flavorRef="big")
    assert admin.get(f"/v2.1/servers/{third}").json()["server"]["status"] == "ERROR"


def test_quota_enforced(e2e: tuple[ComputeServer, PlacementSide]) -> None:
    compute, _placement = e2e
    compute.client("2.69").put("/v2.1/os-quota-sets/project-a", json={"quota_set": {"instances": 2}})
    compute.boot(name="q1")
    compute.boot(name="q2")
    refused = compute.client("2.69", token=USER_A).post("/v2.1/servers", json={"server": {
        "name": "q3", "flavorRef": "1", "imageRef": IMAGE, "networks": "none"}})
    assert refused.status_code == 403
    assert "Quota exceeded for instances" in refused.json()["forbidden"]["message"]


def test_availability_zones(e2e: tuple[ComputeServer, PlacementSide]) -> None:
    compute, _placement = e2e
    admin = compute.client("2.69")
    aggregate = admin.post("/v2.1/os-aggregates", json={"aggregate": {"name": "zone-b", "availability_zone": "az-b"}})
    aggregate_id = aggregate.json()["aggregate"]["id"]
    admin.post(f"/v2.1/os-aggregates/{aggregate_id}/action", json={"add_host": {"host": "host-gpu"}})
    server = compute.boot(availability_zone="az-b")
    body = admin.get(f"/v2.1/servers/{server}").json()["server"]
    assert body["OS-EXT-SRV-ATTR:host"] == "host-gpu"
    assert body["OS-EXT-AZ:availability_zone"] == "az-b"
    services = admin.get("/v2.1/os-services?host=host-gpu").json()["services"]
    assert services[0]["zone"] == "az-b"
    default_zone = [compute.boot(name=f"d{i}", availability_zone="nova") for i in range(2)]
    assert "host-gpu" not in {_host_of(compute, s) for s in default_zone}


def _group(compute: ComputeServer, policy: str) -> str:
    body = {"server_group": {"name": policy, "policy": policy}}
    resp = compute.client("2.64", token=USER_A).post("/v2.1/os-server-groups", json=body)
    assert resp.status_code == 200, resp.text
    return str(resp.json()["server_group"]["id"])


def _boot_in(compute: ComputeServer, group: str, name: str) -> str:
    body = {"server": {"name": name, "flavorRef": "1", "imageRef": IMAGE, "networks": "none"},
            "os:scheduler_hints": {"group": group}}
    resp = compute.client("2.73", token=USER_A).post("/v2.1/servers", json=body)
    assert resp.status_code == 202, resp.text
    return str(resp.json()["server"]["id"])


def test_server_group_policies_through_placement(e2e: tuple[ComputeServer, PlacementSide]) -> None:
    compute, placement = e2e
    spread = _group(compute, "anti-affinity")
    servers = [_boot_in(compute, spread, f"a{index}") for index in range(4)]
    hosts = [_host_of(compute, server) for server in servers]
    assert sorted(hosts[:3]) == sorted(HOSTS) and hosts[3] is None
    # The one left without a host holds no allocation.
    assert placement.client.get(f"/allocations/{servers[3]}").json()["allocations"] == {}
    packed = _group(compute, "soft-affinity")
    together = {_host_of(compute, _boot_in(compute, packed, f"s{index}")) for index in range(3)}
    assert len(together) == 1 and None not in together


def test_concurrent_anti_affinity_boots_through_placement(e2e: tuple[ComputeServer, PlacementSide]) -> None:
    compute, placement = e2e
    group = _group(compute, "anti-affinity")
    with concurrent.futures.ThreadPoolExecutor(max_workers=6) as pool:
        servers = list(pool.map(lambda index: _boot_in(compute, group, f"c{index}"), range(6)))
    hosts = [_host_of(compute, server) for server in servers]
    assert sorted(host for host in hosts if host is not None) == sorted(HOSTS)
    assert hosts.count(None) == 3
    allocated = [s for s in servers if placement.client.get(f"/allocations/{s}").json()["allocations"]]
    assert len(allocated) == 3
