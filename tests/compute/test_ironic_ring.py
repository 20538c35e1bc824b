"""Bare metal nodes spread over two compute services by the hash ring, the free ones taken over when one
stops.

The compute services run in the test (``run_once`` / the resource
update called directly) with the ironic driver against the Bare Metal
test server; their cell and Placement are the compute fixture's.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from corral.compute.db import cell_queries as cq
from corral.compute.domain.scheduling import COMPUTE_BINARY
from corral.compute.manager import ComputeManager
from corral.compute.virt.ironic import IronicDriver, nodes_for_host, resource_class_name
from tests.baremetal.conftest import BaremetalServer, baremetal, baremetal_server  # noqa: F401 - fixtures
from tests.compute.conftest import ComputeServer

HOSTS = ("metal-a", "metal-b")


def test_the_ring_gives_each_node_one_host_and_moves_only_a_leaving_host_s_nodes() -> None:
    nodes = [str(uuid.UUID(int=index * 7919 + 1)) for index in range(200)]
    three = ["c1", "c2", "c3"]
    shares = {host: set(nodes_for_host(host, three, nodes)) for host in three}
    assert set().union(*shares.values()) == set(nodes)
    assert sum(len(share) for share in shares.values()) == len(nodes)
    assert all(40 <= len(share) <= 100 for share in shares.values()), {h: len(s) for h, s in shares.items()}
    # c3 leaves: c1 and c2 keep what they had and share c3's nodes.
    for host in ("c1", "c2"):
        assert shares[host] <= set(nodes_for_host(host, ["c1", "c2"], nodes))
    assert nodes_for_host("solo", [], nodes) == sorted(nodes)
    assert resource_class_name("baremetal-gpu.large") == "CUSTOM_BAREMETAL_GPU_LARGE"
    assert resource_class_name("CUSTOM_X") == "CUSTOM_X"


def _split_uuids(count: int) -> list[str]:
    """Node UUIDs of which each host of HOSTS gets some (the ring is deterministic)."""
    while True:
        uuids = [str(uuid.uuid4()) for _ in range(count)]
        if all(nodes_for_host(host, HOSTS, uuids) for host in HOSTS):
            return uuids


@pytest.fixture
def ring_cloud(compute: ComputeServer, baremetal: BaremetalServer) -> Iterator[ComputeServer]:
    compute.setup_cloud(hosts={})
    for name, value in (("endpoint_override", baremetal.url), ("peer_list", list(HOSTS)),
                        ("api_retry_interval", 0.05)):
        compute.conf.set_override(name, value, group="ironic")
    try:
        yield compute
    finally:
        compute.conf.clear_override("endpoint_override", group="ironic")
        compute.conf.clear_override("peer_list", group="ironic")
        compute.conf.clear_override("api_retry_interval", group="ironic")


def test_nodes_spread_over_two_compute_services_and_taken_over(ring_cloud: ComputeServer,
                                                               baremetal: BaremetalServer) -> None:
    client = baremetal.client("1.82")
    uuids = _split_uuids(6)
    for index, node_uuid in enumerate(uuids):
        created = client.post("/v1/nodes", json={"uuid": node_uuid, "name": f"n{index}", "driver": "fake-hardware",
                                                 "resource_class": "baremetal"})
        assert created.status_code == 201, created.text
    # A node without a resource class is nobody's.
    assert client.post("/v1/nodes", json={"name": "bare", "driver": "fake-hardware"}).status_code == 201
    cell = ring_cloud.cells["cell1"]
    database = ring_cloud.state.cells.database(cell)
    managers = {
        host: ComputeManager(ring_cloud.conf, host, database, ring_cloud.scheduler, api_db=ring_cloud.state.api_db,
                             cell=cell, driver=IronicDriver(ring_cloud.conf))
        for host in HOSTS
    }
    for manager in managers.values():
        manager.register()
    for manager in managers.values():
        manager.update_available_resource()
    shares = {host: set(manager.nodes) for host, manager in managers.items()}
    assert shares == {host: set(nodes_for_host(host, HOSTS, uuids)) for host in HOSTS}
    assert shares["metal-a"] and shares["metal-b"] and shares["metal-a"].isdisjoint(shares["metal-b"])
    with database.read() as conn:
        rows = {node["hypervisor_hostname"]: node for node in cq.compute_nodes(conn)}
    assert set(rows) == set(uuids)
    # The compute node (and its provider) carries the node's own UUID; the unit is reserved (enrolled).
    assert all(row["uuid"] == name and row["hypervisor_type"] == "ironic" for name, row in rows.items())
    reported = ring_cloud.scheduler._providers[uuids[0]]
    assert (reported.capacity, reported.host) == ({"CUSTOM_BAREMETAL": 0}, rows[uuids[0]]["host"])
    assert {"COMPUTE_NODE", "OWNER_NOVA"} <= reported.traits

    # A server of metal-b on one of its nodes; a node carrying a server no host here knows.
    b_nodes = sorted(shares["metal-b"])
    assert len(b_nodes) >= 1
    server = str(uuid.uuid4())
    database.write(cq.create_instance, {
        "uuid": server, "project_id": "p", "user_id": "u", "memory_mb": 0, "vcpus": 0, "root_gb": 0,
        "ephemeral_gb": 0, "flavor": {}, "flavorid": "bm", "host": "metal-b", "node": b_nodes[0],
        "vm_state": "active"}, {})
    stranger = sorted(shares["metal-a"])[0]
    for node_uuid, instance in ((b_nodes[0], server), (stranger, str(uuid.uuid4()))):
        patched = client.patch(f"/v1/nodes/{node_uuid}", json=[
            {"op": "add", "path": "/instance_uuid", "value": instance}])
        assert patched.status_code == 200, patched.text
    managers["metal-a"].update_available_resource()
    assert stranger not in managers["metal-a"].nodes

    # metal-b stops (its service is reported down): metal-a takes its free nodes over at its next
    # refresh; the node carrying metal-b's server stays metal-b's, and so does the server (upstream).
    with database.read() as conn:
        service = cq.get_service(conn, host="metal-b", binary=COMPUTE_BINARY)
    assert service is not None
    database.write(cq.update_service, service["id"], forced_down=True)
    managers["metal-a"].update_available_resource()
    assert set(managers["metal-a"].nodes) == set(uuids) - {b_nodes[0], stranger}
    with database.read() as conn:
        hosts = {node["hypervisor_hostname"]: node["host"] for node in cq.compute_nodes(conn)}
        assert cq.get_instance(conn, server)["host"] == "metal-b"
    assert hosts == {**{name: "metal-a" for name in uuids}, b_nodes[0]: "metal-b"}
    assert {provider.host for name, provider in ring_cloud.scheduler._providers.items()
            if name != b_nodes[0]} == {"metal-a"}

    # metal-b is back: its nodes move back to it (the same compute nodes), nothing is duplicated.
    database.write(cq.update_service, service["id"], forced_down=False)
    managers["metal-b"].driver.set_live_peers(list(HOSTS))
    for manager in managers.values():
        manager.update_available_resource()
    with database.read() as conn:
        rows = cq.compute_nodes(conn)
    assert sorted(row["hypervisor_hostname"] for row in rows) == sorted(uuids)
    assert {row["hypervisor_hostname"]: row["host"] for row in rows if row["hypervisor_hostname"] != stranger} == {
        name: host for host in HOSTS for name in shares[host] if name != stranger}
    assert set(managers["metal-b"].nodes) == shares["metal-b"]
