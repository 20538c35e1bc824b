"""The redfish hardware type against the sushy-tools Redfish emulator."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator

import pytest
import requests

from tests.baremetal.support import wait_for, wait_for_power, wait_for_state
from tests.baremetal.test_provisioning import provision
from tests.support.ports import free_port

# The driver is tested against the emulator, not the database: the first backend is enough.
pytestmark = pytest.mark.backends("first")


class Emulator:
    def __init__(self) -> None:
        command = shutil.which("sushy-emulator")
        if command is None:
            pytest.skip("sushy-emulator (sushy-tools) is not installed")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process = subprocess.Popen(
            [command, "--fake", "-i", "127.0.0.1", "-p", str(self.port)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                if requests.get(f"{self.url}/redfish/v1/Systems", timeout=2).status_code == 200:
                    break
            except requests.ConnectionError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                pytest.skip(f"sushy-emulator did not start: {self.process.stderr.read().decode()[-500:]}")
            time.sleep(0.2)
        members = requests.get(f"{self.url}/redfish/v1/Systems", timeout=5).json()["Members"]
        self.system_path = members[0]["@odata.id"]

    def system(self) -> dict:
        return requests.get(f"{self.url}{self.system_path}", timeout=5).json()

    def secure_boot(self) -> dict:
        return requests.get(f"{self.url}{self.system_path}/SecureBoot", timeout=5).json()

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.process.stderr is not None:
            self.process.stderr.close()


@pytest.fixture(scope="module")
def running_emulator() -> Iterator[Emulator]:
    running = Emulator()
    yield running
    running.stop()


@pytest.fixture
def emulator(running_emulator: Emulator) -> Emulator:
    """The emulator, for tests that run on one database backend (drivers do not touch it)."""
    return running_emulator


def _redfish_node(client, emulator, **driver_info):
    info = {"redfish_address": emulator.url, "redfish_system_id": emulator.system_path, **driver_info}
    response = client.post("/v1/nodes", json={"driver": "redfish", "name": "rf1", "driver_info": info})
    assert response.status_code == 201, response.text
    return response.json()


def test_redfish_node_enrolled_managed_powered_and_cleaned(baremetal, emulator) -> None:
    client = baremetal.client()
    node = _redfish_node(client, emulator)
    assert (node["power_interface"], node["management_interface"], node["bios_interface"]) == (
        "redfish", "redfish", "redfish")
    assert provision(client, "rf1", "manage").status_code == 202
    managed = wait_for_state(client, "rf1", "manageable")
    # Verification read the power state from the BMC.
    assert managed["power_state"] == {"On": "power on", "Off": "power off"}[emulator.system()["PowerState"]]

    assert client.put("/v1/nodes/rf1/states/power", json={"target": "power on"}).status_code == 202
    # The emulator applies power changes 1 to 11 seconds after accepting them.
    wait_for_power(client, "rf1", "power on")
    assert emulator.system()["PowerState"] == "On"
    assert client.put("/v1/nodes/rf1/states/power", json={"target": "power off"}).status_code == 202
    wait_for_power(client, "rf1", "power off")
    assert emulator.system()["PowerState"] == "Off"

    response = client.put("/v1/nodes/rf1/management/boot_device", json={"boot_device": "pxe", "persistent": True})
    assert response.status_code == 204
    boot = emulator.system()["Boot"]
    assert (boot["BootSourceOverrideTarget"], boot["BootSourceOverrideEnabled"]) == ("Pxe", "Continuous")
    assert client.get("/v1/nodes/rf1/management/boot_device").json() == {"boot_device": "pxe", "persistent": True}

    steps = client.get("/v1/nodes/rf1/cleaning/steps").json()
    assert {(step["interface"], step["step"]) for step in steps} >= {
        ("management", "set_boot_mode"), ("management", "set_secure_boot"), ("bios", "factory_reset"),
    }
    before = client.get("/v1/nodes/rf1").json()["provision_updated_at"]
    response = provision(client, "rf1", "clean", clean_steps=[
        {"interface": "management", "step": "set_boot_mode", "args": {"mode": "bios"}},
        {"interface": "management", "step": "set_secure_boot", "args": {"enabled": True}},
    ])
    assert response.status_code == 202
    cleaned = wait_for_state(client, "rf1", "manageable", changed_since=before)
    assert cleaned["last_error"] is None
    assert emulator.system()["Boot"]["BootSourceOverrideMode"] == "Legacy"
    assert emulator.secure_boot()["SecureBootEnable"] is True


def test_redfish_step_failure_and_bad_arguments(baremetal, emulator) -> None:
    client = baremetal.client()
    node = _redfish_node(client, emulator)
    provision(client, "rf1", "manage")
    wait_for_state(client, "rf1", "manageable")
    provision(client, "rf1", "clean", clean_steps=[{"interface": "management", "step": "set_boot_mode"}])
    failed = wait_for_state(client, "rf1", "clean failed")
    assert "is missing these required arguments: mode" in failed["last_error"]
    provision(client, "rf1", "manage")
    wait_for_state(client, "rf1", "manageable")
    # The emulator's systems have no BIOS resource: the step runs and the BMC's refusal is the error.
    provision(client, "rf1", "clean", clean_steps=[
        {"interface": "management", "step": "set_boot_mode", "args": {"mode": "uefi"}},
        {"interface": "bios", "step": "apply_configuration", "args": {"settings": [{"name": "a", "value": "b"}]}},
    ])
    failed = wait_for_state(client, "rf1", "clean failed")
    assert failed["last_error"].startswith(f"Node {node['uuid']} failed step {{'interface': 'bios'")
    assert "Bios" in failed["last_error"]
    assert emulator.system()["Boot"]["BootSourceOverrideMode"] == "UEFI"


def test_redfish_without_address_cannot_be_managed(baremetal) -> None:
    client = baremetal.client()
    response = client.post("/v1/nodes", json={"driver": "redfish", "name": "rf2"})
    node = response.json()
    provision(client, "rf2", "manage")
    back = wait_for_state(client, "rf2", "enroll", changed_since=None)
    wait_for(lambda: client.get("/v1/nodes/rf2").json()["last_error"])
    back = client.get("/v1/nodes/rf2").json()
    assert back["provision_state"] == "enroll"
    assert back["last_error"] == (
        f"Failed to validate power driver interface for node {node['uuid']}. Error: Missing the following "
        f"Redfish properties in node {node['uuid']} driver_info: redfish_address"
    )
    validation = client.get("/v1/nodes/rf2/validate").json()
    assert validation["power"]["result"] is False


def test_power_sync_records_changes_made_outside(baremetal, emulator) -> None:
    client = baremetal.client()
    _redfish_node(client, emulator)
    provision(client, "rf1", "manage")
    wait_for_state(client, "rf1", "manageable")
    recorded = client.get("/v1/nodes/rf1").json()["power_state"]
    outside = "On" if recorded == "power off" else "Off"
    reset = {"On": "On", "Off": "ForceOff"}[outside]
    response = requests.post(f"{emulator.url}{emulator.system_path}/Actions/ComputerSystem.Reset",
                             json={"ResetType": reset}, timeout=5)
    assert response.status_code == 204
    expected = {"On": "power on", "Off": "power off"}[outside]

    def synced() -> bool:
        # The emulator applies the change within seconds; each sync reads the BMC.
        baremetal.conductor.sync_power_states()
        return client.get("/v1/nodes/rf1").json()["power_state"] == expected

    wait_for(synced, timeout=40, interval=0.5)
