"""Auto-discovery: an agent's inventory that matches no node enrolls its machine (``[auto_discovery]``).

The test plays the agent of a machine Corral does not know and posts to
``POST /v1/continue_inspection`` as in test_inspection.py.
"""

from __future__ import annotations

import copy
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from tests.baremetal.support import faultstring, wait_for, wait_for_state
from tests.baremetal.test_inspection import DATA, INVENTORY, MAC_ACTIVE, MAC_IDLE, overridden, port_macs, post
from tests.baremetal.test_provisioning import provision


@pytest.fixture
def discovery(baremetal) -> Iterator[Any]:
    with overridden(baremetal, "auto_discovery", enabled=True, driver="fake-hardware"):
        yield baremetal


def nodes(client) -> list[dict[str, Any]]:
    return client.get("/v1/nodes?detail=True").json()["nodes"]


def processed(client, ident: str) -> dict[str, Any]:
    """The node once the conductor let it go: the data processed (a discovered node stays in enroll)."""
    def check() -> dict[str, Any] | None:
        node = client.get(f"/v1/nodes/{ident}").json()
        return node if node["reservation"] is None else None

    return wait_for(check)


def lookup(baremetal, mac: str) -> requests.Response:
    return requests.get(f"{baremetal.url}/v1/lookup?addresses={mac}", timeout=30,
                        headers={"X-OpenStack-Ironic-API-Version": "1.62"})


def test_off_by_default_an_unknown_machine_is_not_found(baremetal) -> None:
    client = baremetal.client()
    assert baremetal.conf.auto_discovery.enabled is False
    assert baremetal.conf.auto_discovery.driver is None
    response = post(baremetal, DATA)
    assert response.status_code == 404
    assert faultstring(response) == "The resource could not be found."
    assert nodes(client) == []
    assert client.get("/v1/ports").json()["ports"] == []


def test_an_unknown_machine_is_enrolled(discovery) -> None:
    client = discovery.client()
    response = post(discovery, DATA)
    assert response.status_code == 202, response.text
    node_uuid = response.json()["uuid"]
    node = processed(client, node_uuid)
    # Upstream's new node: enroll, the configured driver, nothing else named; the inspect interface that
    # processes the agent's data.
    assert (node["provision_state"], node["target_provision_state"], node["driver"]) == (
        "enroll", None, "fake-hardware")
    assert (node["name"], node["resource_class"], node["conductor_group"], node["driver_info"]) == (
        None, None, "", {})
    assert node["inspect_interface"] == "agent"
    assert node["last_error"] is None and node["maintenance"] is False
    # The hooks ran as for any inspection; the machine is powered off after it.
    properties = node["properties"]
    assert (properties["cpus"], properties["memory_mb"], properties["local_gb"], properties["cpu_arch"]) == (
        2, 2048, 4, "x86_64")
    assert node["power_state"] == "power off"
    # Not an inspection of a known node: its timestamps stay unset, as upstream's.
    assert node["inspection_started_at"] is None and node["inspection_finished_at"] is None
    # add_ports = pxe without a PXE NIC known: the NIC with an address.
    assert port_macs(client, node_uuid) == {MAC_ACTIVE: True}
    found = client.get(f"/v1/nodes/{node_uuid}/inventory").json()
    assert found["inventory"] == INVENTORY
    assert found["plugin_data"]["auto_discovered"] is True
    assert found["plugin_data"]["macs"] == [MAC_ACTIVE]
    assert "logs" not in found["plugin_data"]
    # The same machine again: its node is found by the port, and it is not waiting for inspection.
    again = post(discovery, DATA)
    assert again.status_code == 404, again.text
    assert [item["uuid"] for item in nodes(client)] == [node_uuid]
    # The agent's lookup finds no node in enroll (without fast track), nor the unknown NIC's.
    assert lookup(discovery, MAC_ACTIVE).status_code == 404
    assert lookup(discovery, MAC_IDLE.lower()).status_code == 404
    # From enroll on, the usual path: manage.
    assert provision(client, node_uuid, "manage").status_code == 202
    wait_for_state(client, node_uuid, "manageable")


def test_newer_agents_get_the_new_node_and_a_token(discovery) -> None:
    client = discovery.client()
    response = post(discovery, DATA, version="1.84")
    assert response.status_code == 202, response.text
    answer = response.json()
    assert answer["config"]["agent_token_required"] is True
    assert len(answer["config"]["agent_token"]) > 20
    node = processed(client, answer["node"]["uuid"])
    assert node["provision_state"] == "enroll"
    assert node["properties"]["memory_mb"] == 2048


def test_lookup_of_an_unknown_machine_is_not_found_with_discovery(discovery) -> None:
    # Only the inspection callback enrolls; lookup answers as ever.
    assert lookup(discovery, MAC_ACTIVE).status_code == 404
    assert nodes(discovery.client()) == []


def test_rules_see_the_flag_and_fill_the_bmc_address(discovery) -> None:
    client = discovery.client()
    rule = {"conditions": [{"op": "is-true", "args": {"value": "{plugin_data[auto_discovered]}"}}],
            "actions": [{"op": "set-attribute", "args": {"path": "/driver_info/redfish_address",
                                                         "value": "https://{inventory[bmc_address]}"}},
                        {"op": "set-attribute", "args": {"path": "/name", "value": "found-{inventory[hostname]}"}}]}
    assert client.post("/v1/inspection_rules", json=rule).status_code == 201
    data = copy.deepcopy(DATA)
    data["inventory"]["bmc_address"] = "192.0.2.30"
    response = post(discovery, data)
    assert response.status_code == 202, response.text
    node = processed(client, response.json()["uuid"])
    assert node["driver_info"] == {"redfish_address": "https://192.0.2.30"}
    assert node["name"] == "found-ipa-ramdisk"


def test_a_failure_leaves_the_node_in_enroll_with_its_error(discovery) -> None:
    client = discovery.client()
    response = post(discovery, {**DATA, "error": "collector logs failed: no journal"})
    assert response.status_code == 202, response.text
    node_uuid = response.json()["uuid"]
    node = processed(client, node_uuid)
    # As upstream: the node is kept, in enroll, last_error saying why; the ramdisk's error stops the hooks
    # before ports are made.
    assert node["provision_state"] == "enroll"
    assert node["last_error"] == (f"Failed to inspect node {node_uuid}: Ramdisk reported error: collector logs "
                                  "failed: no journal")
    assert node["properties"] == {}
    assert port_macs(client, node_uuid) == {}
    assert client.get(f"/v1/nodes/{node_uuid}/inventory").json()["inventory"] == INVENTORY
    history = client.get(f"/v1/nodes/{node_uuid}/history").json()["history"]
    assert [entry["severity"] for entry in history] == ["ERROR"]


@pytest.mark.parametrize(("inventory", "error", "ports"), [
    # Found by nothing but a BMC address no node has: enrolled, and the data has no NIC to use.
    ({"interfaces": [{"name": "eth0", "mac_address": "not-a-mac"}], "bmc_address": "192.0.2.40"},
     "No suitable interfaces found in [{'name': 'eth0', 'mac_address': 'not-a-mac'}]", {}),
    # A hook after ports fails: the ports are made all the same, as upstream's ports hook makes them first.
    ({**INVENTORY, "cpu": {"architecture": "x86_64"}},
     "No CPU count in the inventory: cpu is {'architecture': 'x86_64'}", {MAC_ACTIVE: True}),
])
def test_data_the_hooks_refuse_still_enrolls(discovery, inventory, error, ports) -> None:
    client = discovery.client()
    response = post(discovery, {"inventory": inventory})
    assert response.status_code == 202, response.text
    node_uuid = response.json()["uuid"]
    node = processed(client, node_uuid)
    assert (node["provision_state"], node["last_error"]) == ("enroll", f"Failed to inspect node {node_uuid}: {error}")
    assert port_macs(client, node_uuid) == ports


def test_bad_requests_enroll_nothing(discovery) -> None:
    client = discovery.client()
    cases = [
        (b"{not json", 400),
        ({"root_disk": {}}, 400),
        ({"inventory": {"interfaces": []}}, 400),
        ({"inventory": {"interfaces": [{"name": "eth0"}]}}, 400),
        ({"inventory": {"interfaces": [{"mac_address": "not-a-mac"}]}}, 400),
        ({"inventory": {"interfaces": [{"mac_address": MAC_ACTIVE}], "bmc_address": 7}}, 400),
    ]
    for body, status in cases:
        response = post(discovery, body)
        assert response.status_code == status, (body, response.text)
    # A node named by UUID is looked up, never made up.
    assert post(discovery, DATA, version="1.84", params=f"?node_uuid={uuid.uuid4()}").status_code == 404
    assert post(discovery, DATA, version="1.83").status_code == 404
    assert nodes(client) == []
    assert client.get("/v1/ports").json()["ports"] == []


def test_a_known_machine_in_another_state_is_not_enrolled_again(discovery) -> None:
    client = discovery.client()
    node = client.post("/v1/nodes", json={"name": "n1", "driver": "fake-hardware"}).json()
    assert client.post("/v1/ports", json={"node_uuid": node["uuid"], "address": MAC_IDLE}).status_code == 201
    response = post(discovery, DATA)
    assert response.status_code == 404, response.text
    assert [item["name"] for item in nodes(client)] == ["n1"]


@pytest.mark.parametrize("driver", [None, "ipmi"])
def test_without_a_usable_driver_nothing_is_enrolled(baremetal, driver) -> None:
    client = baremetal.client()
    with overridden(baremetal, "auto_discovery", enabled=True, driver=driver):
        response = post(baremetal, DATA)
    # Upstream's generic error: the public caller learns nothing of the configuration.
    assert response.status_code == 500
    assert faultstring(response) == "An unknown exception occurred."
    assert nodes(client) == []


def test_simultaneous_callbacks_of_one_machine_enroll_it_once(discovery) -> None:
    client = discovery.client()
    count = 4
    barrier = threading.Barrier(count)
    statuses: list[int] = []

    def agent() -> None:
        barrier.wait()
        statuses.append(post(discovery, DATA).status_code)

    threads = [threading.Thread(target=agent) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    # The port's unique MAC address lets one of them create the node; the others find it, or fail to
    # insert the same port, and answer as for a machine already enrolled.
    assert sorted(statuses) == [202] + [404] * (count - 1)
    found = nodes(client)
    assert len(found) == 1
    processed(client, found[0]["uuid"])
    assert port_macs(client, found[0]["uuid"]) == {MAC_ACTIVE: True}
