"""A compute host cut off: its servers are reported unknown, not lost, and its free nodes served by the other.

compute1 and compute2 run the ironic driver with ``[ironic] peer_list =
compute1, compute2`` against the lab's Bare Metal service. The compute
and API hosts are restarted with short heartbeat settings (an extra
configuration file: ``report_interval`` 1, ``service_down_time`` 5,
``update_resources_interval`` 1) so that the test takes seconds.

Three fake-hardware nodes of a resource class of the test's own, all of
which the hash ring gives to compute1, take two servers; compute1's link is
cut. As upstream's: the servers keep their status and host, with
``host_status`` UNKNOWN; compute1 is ``down``; the free node is taken over
by compute2 (same hypervisor and provider, now compute2's), which deploys
a new server onto it; the nodes carrying compute1's servers stay
compute1's. Once the link is back compute1 is up again and nothing is
duplicated: no hypervisor, provider, server or service twice.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from corral.compute.virt.ironic import nodes_for_host, resource_class_name
from tests.multihost.lab import Lab, wait_for, wait_healthy
from tests.support.images import active_image

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]

VICTIM, OTHER = "compute1", "compute2"
COMPUTES = (VICTIM, OTHER)
SERVICE_DOWN_TIME = 5
FAST = f"""[DEFAULT]
update_resources_interval = 1

[compute]
report_interval = 1
service_down_time = {SERVICE_DOWN_TIME}

[ironic]
api_retry_interval = 0.5
"""


class Cloud:
    def __init__(self, lab: Lab) -> None:
        self.url = lab.url
        self.session = requests.Session()
        self.session.headers.update({"X-Auth-Token": lab.token(), "OpenStack-API-Version": "compute 2.69",
                                     "X-OpenStack-Ironic-API-Version": "1.82"})

    def call(self, method: str, path: str, expect: tuple[int, ...] = (200,), **kwargs: Any) -> Any:
        answer = self.session.request(method, f"{self.url}{path}", timeout=30, **kwargs)
        assert answer.status_code in expect, (method, path, answer.status_code, answer.text)
        return answer.json() if answer.content else None

    def node(self, node_uuid: str) -> dict[str, Any]:
        return self.call("GET", f"/baremetal/v1/nodes/{node_uuid}")  # type: ignore[no-any-return]

    def server(self, server_id: str) -> dict[str, Any]:
        return self.call("GET", f"/compute/v2.1/servers/{server_id}")["server"]  # type: ignore[no-any-return]

    def services(self) -> dict[str, str]:
        listed = self.call("GET", "/compute/v2.1/os-services?binary=nova-compute")["services"]
        return {service["host"]: service["state"] for service in listed}

    def hypervisors(self, nodes: list[str]) -> dict[str, str]:
        """node -> the host of the compute service serving it, for ``nodes``."""
        listed = self.call("GET", "/compute/v2.1/os-hypervisors/detail")["hypervisors"]
        found = [(h["hypervisor_hostname"], h["service"]["host"]) for h in listed if h["hypervisor_hostname"] in nodes]
        assert len(found) == len({name for name, _host in found}), found
        return dict(found)

    def inventory(self, node_uuid: str, resource_class: str) -> dict[str, Any] | None:
        answer = self.session.get(f"{self.url}/placement/resource_providers/{node_uuid}/inventories", timeout=30)
        return answer.json()["inventories"].get(resource_class) if answer.status_code == 200 else None

    def boot(self, name: str, flavor: str, image: str) -> str:
        body = {"server": {"name": name, "flavorRef": flavor, "imageRef": image, "networks": "none"}}
        return str(self.call("POST", "/compute/v2.1/servers", expect=(202,), json=body)["server"]["id"])

    def wait_active(self, server_ids: list[str]) -> dict[str, dict[str, Any]]:
        def active() -> dict[str, dict[str, Any]] | None:
            shown = {server_id: self.server(server_id) for server_id in server_ids}
            assert all(server["status"] in ("BUILD", "ACTIVE") for server in shown.values()), shown
            return shown if all(server["status"] == "ACTIVE" for server in shown.values()) else None

        return wait_for("the servers to be active", active, timeout=90, interval=0.5)


def _node_uuids(count: int) -> list[str]:
    """Node UUIDs the hash ring over both compute hosts gives to the victim."""
    found: list[str] = []
    while len(found) < count:
        candidate = str(uuid.uuid4())
        if nodes_for_host(VICTIM, COMPUTES, [candidate]):
            found.append(candidate)
    return found


def _enroll(cloud: Cloud, node_uuids: list[str], resource_class: str) -> None:
    for node_uuid in node_uuids:
        cloud.call("POST", "/baremetal/v1/nodes", expect=(201,), json={
            "uuid": node_uuid, "name": f"cut-{node_uuid[:8]}", "driver": "fake-hardware",
            "deploy_interface": "fake", "rescue_interface": "fake", "resource_class": resource_class})
        cloud.call("PUT", f"/baremetal/v1/nodes/{node_uuid}/states/provision", expect=(202,),
                   json={"target": "manage"})
    wait_for("the nodes to be manageable", lambda: all(
        cloud.node(n)["provision_state"] == "manageable" for n in node_uuids), timeout=60, interval=0.3)
    for node_uuid in node_uuids:
        cloud.call("PUT", f"/baremetal/v1/nodes/{node_uuid}/states/power", expect=(202,),
                   json={"target": "power off"})
    wait_for("the nodes to be off", lambda: all(
        cloud.node(n)["power_state"] == "power off" for n in node_uuids), timeout=60, interval=0.3)
    for node_uuid in node_uuids:
        cloud.call("PUT", f"/baremetal/v1/nodes/{node_uuid}/states/provision", expect=(202,),
                   json={"target": "provide"})
    wait_for("the nodes to be available", lambda: all(
        cloud.node(n)["provision_state"] == "available" for n in node_uuids), timeout=90, interval=0.3)


def _server_errors(lab: Lab) -> float:
    """5xx answers of the Compute API on both API hosts (their Prometheus metrics)."""
    total = 0.0
    for host in ("api1", "api2"):
        for (name, labels), value in lab.metrics(host).items():
            found = dict(labels)
            if name == "corral_http_requests_total" and found.get("service") == "compute" \
                    and found.get("status", "").startswith("5"):
                total += value
    return total


@pytest.fixture
def fast_services(healthy_lab: Lab, tmp_path: Path) -> Iterator[Lab]:
    extra = tmp_path / "fast-services.conf"
    extra.write_text(FAST)
    extra.chmod(0o644)

    # Every host that judges a compute service up or down, together (an API host takes seconds to stop).
    healthy_lab.restart_all([*COMPUTES, "api1", "api2"], str(extra))
    wait_healthy(healthy_lab)
    try:
        yield healthy_lab
    finally:
        healthy_lab.restore(VICTIM)
        healthy_lab.restart_all([*COMPUTES, "api1", "api2"])
        wait_healthy(healthy_lab)


def test_compute_host_cut_off(fast_services: Lab, measurements: dict[str, Any]) -> None:
    lab = fast_services
    cloud = Cloud(lab)
    tag = uuid.uuid4().hex[:8]
    resource_class = f"cut-{tag}"
    wait_for("both compute services up", lambda: all(
        cloud.services().get(host) == "up" for host in COMPUTES), timeout=60, interval=0.5)
    image = active_image(f"{lab.url}/image", {"X-Auth-Token": cloud.session.headers["X-Auth-Token"]},
                         name=f"cut-{tag}", visibility="public")["id"]
    flavor = cloud.call("POST", "/compute/v2.1/flavors", json={"flavor": {
        "name": f"bm-{tag}", "ram": 1024, "vcpus": 1, "disk": 10}})["flavor"]["id"]
    cloud.call("POST", f"/compute/v2.1/flavors/{flavor}/os-extra_specs", json={"extra_specs": {
        f"resources:{resource_class_name(resource_class)}": "1", "resources:VCPU": "0",
        "resources:MEMORY_MB": "0", "resources:DISK_GB": "0"}})
    nodes = _node_uuids(3)
    _enroll(cloud, nodes, resource_class)
    wait_for(f"the nodes to be {VICTIM}'s hypervisors, offered by Placement", lambda: cloud.hypervisors(nodes) == {
        node: VICTIM for node in nodes} and all(
        (cloud.inventory(node, resource_class_name(resource_class)) or {}).get("reserved") == 0 for node in nodes),
        timeout=60, interval=0.5)

    servers = [cloud.boot(f"cut-{tag}-{index}", flavor, image) for index in range(2)]
    before = cloud.wait_active(servers)
    assert {server["OS-EXT-SRV-ATTR:host"] for server in before.values()} == {VICTIM}
    carrying = {server["OS-EXT-SRV-ATTR:hypervisor_hostname"] for server in before.values()}
    (free,) = set(nodes) - carrying
    errors_before = _server_errors(lab)

    cut_at = lab.cut(VICTIM)
    wait_for(f"{VICTIM} reported down", lambda: cloud.services()[VICTIM] == "down", timeout=60, interval=0.2)
    down_at = time.monotonic()
    # Not lost: each server keeps its last status and its host; nobody knows whether the host runs it.
    for server_id, server in before.items():
        shown = cloud.server(server_id)
        assert (shown["status"], shown["OS-EXT-SRV-ATTR:host"], shown["host_status"]) == (
            "ACTIVE", VICTIM, "UNKNOWN"), shown
        assert shown["OS-EXT-SRV-ATTR:hypervisor_hostname"] == server["OS-EXT-SRV-ATTR:hypervisor_hostname"]
    listed = cloud.call("GET", f"/compute/v2.1/servers/detail?all_tenants=1&name=cut-{tag}")["servers"]
    assert {(s["id"], s["status"], s["host_status"]) for s in listed} == {
        (server_id, "ACTIVE", "UNKNOWN") for server_id in servers}

    # The free node is taken over by the other compute service: the same hypervisor and provider.
    wait_for(f"{OTHER} to take {free} over", lambda: cloud.hypervisors(nodes).get(free) == OTHER,
             timeout=60, interval=0.2)
    taken_at = time.monotonic()
    inventory = cloud.inventory(free, resource_class_name(resource_class))
    assert inventory is not None and (inventory["total"], inventory["reserved"]) == (1, 0)
    # The nodes carrying the victim's servers stay its own (upstream's ring never moves them).
    assert cloud.hypervisors(nodes) == {**{node: VICTIM for node in carrying}, free: OTHER}
    # A new server goes to the only free node, deployed by the other compute service.
    third = cloud.boot(f"cut-{tag}-2", flavor, image)
    deployed = cloud.wait_active([third])[third]
    assert (deployed["OS-EXT-SRV-ATTR:host"], deployed["OS-EXT-SRV-ATTR:hypervisor_hostname"]) == (OTHER, free)
    assert deployed["host_status"] == "UP"
    assert cloud.node(free)["instance_uuid"] == third
    assert all(cloud.server(server_id)["host_status"] == "UNKNOWN" for server_id in servers)

    restored_at = lab.restore(VICTIM)
    wait_for(f"{VICTIM} up again", lambda: cloud.services()[VICTIM] == "up", timeout=60, interval=0.2)
    back_at = time.monotonic()
    wait_for("the servers' host up again", lambda: all(
        cloud.server(server_id)["host_status"] == "UP" for server_id in servers), timeout=30, interval=0.2)
    # Nothing twice: the node carrying compute2's server stays compute2's.
    time.sleep(3)  # a few resource updates of both services
    assert cloud.hypervisors(nodes) == {**{node: VICTIM for node in carrying}, free: OTHER}
    listed = cloud.call("GET", f"/compute/v2.1/servers/detail?all_tenants=1&name=cut-{tag}")["servers"]
    assert sorted((s["id"], s["OS-EXT-SRV-ATTR:host"], s["status"]) for s in listed) == sorted(
        [(server_id, VICTIM, "ACTIVE") for server_id in servers] + [(third, OTHER, "ACTIVE")])
    services = cloud.call("GET", "/compute/v2.1/os-services?binary=nova-compute")["services"]
    assert sorted(service["host"] for service in services) == sorted(COMPUTES)
    assert sorted(rp["uuid"] for rp in cloud.call("GET", "/placement/resource_providers")["resource_providers"]
                  if rp["uuid"] in nodes) == sorted(nodes)
    # Every node's unit is used once, by its server's allocation.
    assert [cloud.call("GET", f"/placement/resource_providers/{node}/usages")["usages"] for node in nodes] == [
        {resource_class_name(resource_class): 1}] * len(nodes)
    assert _server_errors(lab) == errors_before

    measurements["compute host cut: cut -> service down (s)"] = round(down_at - cut_at, 1)
    measurements["compute host cut: cut -> free node taken over (s)"] = round(taken_at - cut_at, 1)
    measurements["compute host cut: restored -> service up (s)"] = round(back_at - restored_at, 1)
    measurements["compute host cut: report interval / service down time (s)"] = f"1 / {SERVICE_DOWN_TIME}"

    for server_id in [*servers, third]:
        cloud.call("DELETE", f"/compute/v2.1/servers/{server_id}", expect=(204,))
    wait_for("the nodes to be free", lambda: all(
        (node := cloud.node(n))["provision_state"] == "available" and not node["instance_uuid"] for n in nodes),
        timeout=90, interval=0.5)
    for node_uuid in nodes:
        cloud.call("DELETE", f"/baremetal/v1/nodes/{node_uuid}", expect=(204,))
    cloud.call("DELETE", f"/compute/v2.1/flavors/{flavor}", expect=(202,))
    cloud.call("DELETE", f"/image/v2/images/{image}", expect=(204,))
