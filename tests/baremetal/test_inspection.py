"""In-band inspection through the agent, with the fake-hardware driver and a posted inventory.

The node's ``agent`` inspect interface boots the ramdisk (the fake boot
interface: network boot, fake power on) and waits in ``inspect wait``; the
test then plays the agent and posts an inventory as ironic-python-agent 13
sends it to ``POST /v1/continue_inspection``.  The lab test
(test_inspection_lab.py) does the same with the real agent in a QEMU machine.
"""

from __future__ import annotations

import contextlib
import copy
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from corral.baremetal.drivers import deploy_utils
from tests.baremetal.support import faultstring, wait_for_state
from tests.baremetal.test_provisioning import provision

GIB = 1024 ** 3
MAC_ACTIVE, MAC_IDLE, MAC_OLD = "52:54:00:aa:bb:01", "52:54:00:aa:bb:02", "52:54:00:aa:bb:99"
# What the agent posts (trimmed from a QEMU machine's real inventory).
INVENTORY: dict[str, Any] = {
    "interfaces": [
        {"name": "ens3", "mac_address": MAC_ACTIVE, "ipv4_address": "10.0.2.15", "ipv6_address": None,
         "has_carrier": True, "lldp": None, "vendor": "0x1af4", "product": "0x1000", "client_id": None,
         "biosdevname": None, "speed_mbps": None, "pci_address": "0000:00:03.0", "driver": "virtio_net"},
        {"name": "ens4", "mac_address": MAC_IDLE.upper(), "ipv4_address": None, "ipv6_address": None,
         "has_carrier": False, "lldp": None, "vendor": "0x1af4", "product": "0x1000", "client_id": None,
         "biosdevname": None, "speed_mbps": None, "pci_address": "0000:00:04.0", "driver": "virtio_net"},
        {"name": "lo", "mac_address": "00:00:00:00:00:00", "ipv4_address": "127.0.0.1"},
    ],
    "cpu": {"model_name": "QEMU Virtual CPU version 2.5+", "frequency": "", "count": 2,
            "architecture": "x86_64", "flags": ["fpu", "vme"], "socket_count": 1},
    "memory": {"total": 2052362240, "physical_mb": 2048},
    "disks": [
        {"name": "/dev/vda", "model": "", "size": 5 * GIB, "rotational": True, "wwn": None,
         "serial": "corral-root", "vendor": "0x1af4", "hctl": None, "by_path": "/dev/disk/by-path/pci-0000:00:05.0"},
        {"name": "/dev/vdb", "model": "", "size": 20 * GIB, "rotational": True, "wwn": None,
         "serial": "corral-big", "vendor": "0x1af4", "hctl": None, "by_path": "/dev/disk/by-path/pci-0000:00:06.0"},
    ],
    # What ironic-python-agent 13 sends without ipmitool (a QEMU machine).
    "bmc_address": None,
    "bmc_v6address": "::/0",
    "system_vendor": {"product_name": "Standard PC (i440FX + PIIX, 1996)", "serial_number": "",
                      "manufacturer": "QEMU"},
    "boot": {"current_boot_mode": "bios", "pxe_interface": None},
    "hostname": "ipa-ramdisk",
}
DATA: dict[str, Any] = {"inventory": INVENTORY, "root_disk": INVENTORY["disks"][0], "error": None,
                        "boot_interface": None, "configuration": {"collectors": ["default", "logs"],
                                                                   "managers": []},
                        "logs": "H4sIAAAAAAAA/wMAAAAAAAAAAAA="}


def post(baremetal, body: Any, *, version: str | None = None, params: str = "") -> requests.Response:
    """The agent's request: no token, no version header unless given."""
    headers = {"X-OpenStack-Ironic-API-Version": version} if version else {}
    if isinstance(body, (bytes, str)):
        return requests.post(f"{baremetal.url}/v1/continue_inspection{params}", data=body, timeout=30,
                             headers={"Content-Type": "application/json", **headers})
    return requests.post(f"{baremetal.url}/v1/continue_inspection{params}", json=body, timeout=30, headers=headers)


def inspecting(client, name: str = "n1", *, ports: tuple[str, ...] = (MAC_ACTIVE,), **fields: Any) -> dict[str, Any]:
    """A fake-hardware node with the agent inspect interface, its ports, moved to ``inspect wait``."""
    body = {"name": name, "driver": "fake-hardware", "inspect_interface": "agent", **fields}
    node = client.post("/v1/nodes", json=body).json()
    for mac in ports:
        assert client.post("/v1/ports", json={"node_uuid": node["uuid"], "address": mac}).status_code == 201
    assert provision(client, name, "manage").status_code == 202
    wait_for_state(client, name, "manageable")
    assert provision(client, name, "inspect").status_code == 202
    waiting = wait_for_state(client, name, "inspect wait")
    assert waiting["target_provision_state"] == "manageable"
    return waiting


def port_macs(client, name: str = "n1") -> dict[str, bool]:
    return {port["address"]: port["pxe_enabled"]
            for port in client.get(f"/v1/nodes/{name}/ports?detail=True").json()["ports"]}


@contextlib.contextmanager
def overridden(baremetal, group: str, **values: Any) -> Iterator[None]:
    for key, value in values.items():
        baremetal.conf.set_override(key, value, group)
    try:
        yield
    finally:
        for key in values:
            baremetal.conf.clear_override(key, group)


def test_the_agents_inventory_completes_inspection(baremetal) -> None:
    client = baremetal.client()
    waiting = inspecting(client, ports=(MAC_ACTIVE, MAC_OLD), properties={"cpus": 64})
    # The ramdisk boots: network boot (fake boot interface), machine on.
    assert waiting["power_state"] == "power on"
    assert waiting["inspection_started_at"] is not None and waiting["inspection_finished_at"] is None
    assert client.get("/v1/nodes/n1/management/boot_device").json()["boot_device"] == "pxe"
    started = time.monotonic()
    response = post(baremetal, DATA)
    assert response.status_code == 202, response.text
    assert response.json() == {"uuid": waiting["uuid"]}
    node = wait_for_state(client, "n1", "manageable")
    elapsed = time.monotonic() - started
    assert elapsed < 10
    # cpus, memory, root-device and architecture; the root disk is the agent's (smallest of 4 GiB or more).
    properties = node["properties"]
    assert (properties["cpus"], properties["memory_mb"], properties["local_gb"], properties["cpu_arch"]) == (
        2, 2048, 4, "x86_64")
    assert node["power_state"] == "power off"
    assert node["last_error"] is None and node["inspection_finished_at"] is not None
    assert node["target_provision_state"] is None
    # add_ports = pxe, and the agent booted from virtual media knows no PXE NIC: the NIC with an address.
    # keep_ports = all: the port of a MAC the machine lacks stays.
    assert port_macs(client) == {MAC_ACTIVE: True, MAC_OLD: True}
    found = client.get("/v1/nodes/n1/inventory").json()
    assert found["inventory"] == INVENTORY
    plugin_data = found["plugin_data"]
    assert "logs" not in plugin_data and "inventory" not in plugin_data
    assert plugin_data["root_disk"]["name"] == "/dev/vda"
    assert plugin_data["macs"] == [MAC_ACTIVE]
    assert sorted(plugin_data["all_interfaces"]) == ["ens3", "ens4"]
    # The node is no longer inspected: the same data again finds nothing.
    assert post(baremetal, DATA).status_code == 404


def test_newer_agents_get_the_node_and_a_token(baremetal) -> None:
    client = baremetal.client()
    waiting = inspecting(client, ports=())
    # Looked up by node UUID (1.84) alone: no port has these MACs.
    response = post(baremetal, DATA, version="1.84", params=f"?node_uuid={waiting['uuid']}")
    assert response.status_code == 202, response.text
    answer = response.json()
    assert answer["node"]["uuid"] == waiting["uuid"]
    assert answer["config"]["agent_token_required"] is True
    assert len(answer["config"]["agent_token"]) > 20
    node = wait_for_state(client, "n1", "manageable")
    assert node["properties"]["memory_mb"] == 2048
    # The ramdisk is gone and with it the agent's token.
    assert "agent_secret_token" not in node["driver_internal_info"]
    assert port_macs(client) == {MAC_ACTIVE: True}


def test_lookup_by_bmc_address(baremetal) -> None:
    client = baremetal.client()
    inspecting(client, ports=(), driver_info={"redfish_address": "https://192.0.2.20:8000"})
    inspecting(client, "n2", ports=(), driver_info={"redfish_address": "https://192.0.2.21:8000"})
    data = copy.deepcopy(DATA)
    data["inventory"]["bmc_address"] = "192.0.2.21"
    data["inventory"]["interfaces"] = [{"name": "eth0", "mac_address": "52:54:00:cc:00:01"}]
    response = post(baremetal, data)
    assert response.status_code == 202, response.text
    wait_for_state(client, "n2", "manageable")
    assert client.get("/v1/nodes/n1").json()["provision_state"] == "inspect wait"


@pytest.mark.parametrize(("add_ports", "keep_ports", "pxe", "expected"), [
    ("all", "present", None, {MAC_ACTIVE: True, MAC_IDLE: True}),
    ("pxe", "added", MAC_IDLE, {MAC_IDLE: True}),
    ("active", "all", None, {MAC_ACTIVE: True, MAC_OLD: True}),
    ("disabled", "present", None, {MAC_ACTIVE: True}),
])
def test_add_ports_and_keep_ports(baremetal, add_ports, keep_ports, pxe, expected) -> None:
    client = baremetal.client()
    inspecting(client, ports=(MAC_ACTIVE, MAC_OLD))
    data = copy.deepcopy(DATA)
    data["inventory"]["boot"]["pxe_interface"] = pxe
    with overridden(baremetal, "inspector", add_ports=add_ports, keep_ports=keep_ports):
        assert post(baremetal, data).status_code == 202
        wait_for_state(client, "n1", "manageable")
    assert port_macs(client) == expected


def test_inspection_rules_run_on_the_data(baremetal) -> None:
    client = baremetal.client()
    rules = [
        {"priority": 20, "conditions": [{"op": "eq", "args": ["{inventory[system_vendor][manufacturer]}", "QEMU"]},
                                        {"op": "gt", "args": ["{inventory.cpu.count}", 1]}],
         "actions": [{"op": "add-trait", "args": ["CUSTOM_EMULATED"]},
                     {"op": "set-attribute", "args": ["/extra/cpu_model", "{inventory[cpu][model_name]}"]},
                     {"op": "set-capability", "args": {"name": "disks", "value": "{inventory[disks][1][serial]}"}},
                     {"op": "set-port-attribute", "args": [MAC_ACTIVE, "/extra/nic", "{item}"], "loop": ["ens3"]},
                     {"op": "set-attribute", "args": ["/resource_class", "emulated"]}]},
        # A rule that does not match changes nothing.
        {"priority": 10, "conditions": [{"op": "!is-true", "args": [True]}],
         "actions": [{"op": "add-trait", "args": ["CUSTOM_NEVER"]}]},
    ]
    for rule in rules:
        assert client.post("/v1/inspection_rules", json=rule).status_code == 201
    inspecting(client)
    assert post(baremetal, DATA).status_code == 202
    node = wait_for_state(client, "n1", "manageable")
    assert node["traits"] == ["CUSTOM_EMULATED"]
    assert node["extra"] == {"cpu_model": "QEMU Virtual CPU version 2.5+"}
    assert node["properties"]["capabilities"] == "disks:corral-big"
    assert node["resource_class"] == "emulated"
    port = client.get("/v1/nodes/n1/ports?detail=True").json()["ports"][0]
    assert port["extra"] == {"nic": "ens3"}


def test_a_failing_rule_fails_inspection(baremetal) -> None:
    client = baremetal.client()
    rule = {"conditions": [{"op": "lt", "args": ["{inventory[memory][physical_mb]}", 4096]}],
            "actions": [{"op": "fail", "args": ["at least 4 GiB of memory, found {inventory[memory][physical_mb]}"]}]}
    assert client.post("/v1/inspection_rules", json=rule).status_code == 201
    node = inspecting(client, properties={"cpus": 64})
    assert post(baremetal, DATA).status_code == 202
    failed = wait_for_state(client, "n1", "inspect failed")
    assert failed["last_error"] == f"Failed to inspect node {node['uuid']}: at least 4 GiB of memory, found 2048"
    assert failed["power_state"] == "power off"
    # Nothing the hooks found was written; the inventory is kept to see why.
    assert failed["properties"] == {"cpus": 64}
    assert port_macs(client) == {MAC_ACTIVE: True}
    assert client.get("/v1/nodes/n1/inventory").json()["inventory"]["memory"]["physical_mb"] == 2048
    # inspect failed -> inspect again, or manage.
    assert provision(client, "n1", "manage").status_code == 202
    wait_for_state(client, "n1", "manageable")


def test_the_ramdisks_error_fails_inspection(baremetal) -> None:
    client = baremetal.client()
    node = inspecting(client)
    assert post(baremetal, {**DATA, "error": "collector logs failed: no journal"}).status_code == 202
    failed = wait_for_state(client, "n1", "inspect failed")
    assert failed["last_error"] == (f"Failed to inspect node {node['uuid']}: Ramdisk reported error: collector "
                                    "logs failed: no journal")
    assert failed["power_state"] == "power off"


def test_no_inventory_in_time_fails_inspection(baremetal) -> None:
    client = baremetal.client()
    inspecting(client)
    with overridden(baremetal, "conductor", inspect_wait_timeout=1):
        time.sleep(1.5)
        assert baremetal.conductor.check_inspect_timeouts() == 1
    failed = client.get("/v1/nodes/n1").json()
    assert failed["provision_state"] == "inspect failed"
    assert failed["last_error"].startswith("Timeout reached while inspecting the node: the agent sent no "
                                           "inventory within 1 seconds.")
    assert failed["power_state"] == "power off"
    # Late data finds no node waiting for it.
    assert post(baremetal, DATA).status_code == 404
    # Inspecting again starts over.
    assert provision(client, "n1", "inspect").status_code == 202
    wait_for_state(client, "n1", "inspect wait")


def test_abort_stops_the_ramdisk(baremetal) -> None:
    client = baremetal.client()
    inspecting(client)
    assert provision(client, "n1", "abort").status_code == 202
    node = wait_for_state(client, "n1", "inspect failed")
    assert node["power_state"] == "power off"
    assert node["last_error"] == "By request, the inspect wait operation was aborted"


def test_bad_requests_change_nothing(baremetal) -> None:
    client = baremetal.client()
    before = inspecting(client)
    cases = [
        (b"", 400, "Missing request body."),
        (b"{not json", 400, None),
        ([], 400, "Invalid inspection data: a JSON object is expected"),
        ({"root_disk": {}}, 400, "Invalid inspection data: 'inventory' is a required object"),
        ({"inventory": {"interfaces": []}}, 400,
         "Invalid inspection data: 'inventory.interfaces' must be a non-empty list"),
        ({"inventory": {"interfaces": [{"name": "eth0"}]}}, 400,
         "Invalid inspection data: each interface needs a 'mac_address' string"),
        ({"inventory": {"interfaces": [{"mac_address": "not-a-mac"}]}}, 400, "No lookup information provided"),
        ({"inventory": {"interfaces": [{"mac_address": MAC_ACTIVE}], "bmc_address": 7}}, 400,
         "Invalid inspection data: 'inventory.bmc_address' must be a string"),
        ({"inventory": {"interfaces": [{"mac_address": "52:54:00:00:00:77"}]}}, 404,
         "The resource could not be found."),
    ]
    for body, status, message in cases:
        response = post(baremetal, body)
        assert response.status_code == status, (body, response.text)
        if message is not None:
            assert faultstring(response) == message
    # node_uuid needs 1.84; versions between 1.1 and 1.84 know no such endpoint.
    assert post(baremetal, DATA, params=f"?node_uuid={before['uuid']}").status_code == 404
    assert post(baremetal, DATA, version="1.83").status_code == 404
    assert post(baremetal, DATA, version="1.84", params="?node_uuid=nope").status_code == 400
    assert post(baremetal, DATA, version="1.84", params=f"?node_uuid={uuid.uuid4()}").status_code == 404
    after = client.get("/v1/nodes/n1").json()
    assert (after["provision_state"], after["properties"], after["provision_updated_at"]) == (
        "inspect wait", before["properties"], before["provision_updated_at"])
    assert client.get("/v1/nodes/n1/inventory").status_code == 404
    # A node in another state is not found either.
    client.post("/v1/nodes", json={"name": "n2", "driver": "fake-hardware"})
    node = client.get("/v1/nodes/n2").json()
    assert client.post("/v1/ports", json={"node_uuid": node["uuid"], "address": MAC_IDLE}).status_code == 201
    data = copy.deepcopy(DATA)
    data["inventory"]["interfaces"] = [INVENTORY["interfaces"][1]]
    assert post(baremetal, data).status_code == 404


def test_ramdisk_kernel_arguments_while_inspecting(baremetal) -> None:
    conf = baremetal.conf
    with overridden(baremetal, "deploy", external_callback_url="http://10.0.2.2:6385/baremetal"), \
            overridden(baremetal, "inspector", extra_kernel_params="ipa-inspection-collectors=default"):
        node = {"uuid": "x", "provision_state": "inspecting", "driver_info": {}, "instance_info": {}}
        params = deploy_utils.agent_kernel_params(node, conf)
        assert ("ipa-inspection-callback-url=http://10.0.2.2:6385/baremetal/v1/continue_inspection"
                in params.split())
        assert params.endswith("ipa-inspection-collectors=default")
        deploying = deploy_utils.agent_kernel_params({**node, "provision_state": "deploying"}, conf)
        assert "inspection" not in deploying


def test_the_agent_inspect_interface_is_offered(baremetal) -> None:
    client = baremetal.client()
    drivers = {name: client.get(f"/v1/drivers/{name}").json() for name in ("fake-hardware", "redfish")}
    assert sorted(drivers["fake-hardware"]["enabled_inspect_interfaces"]) == ["agent", "fake", "no-inspect"]
    assert drivers["fake-hardware"]["default_inspect_interface"] == "fake"
    assert sorted(drivers["redfish"]["enabled_inspect_interfaces"]) == ["agent", "no-inspect"]
    assert drivers["redfish"]["default_inspect_interface"] == "no-inspect"
