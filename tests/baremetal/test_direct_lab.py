"""End to end: the agent in QEMU machines booted over Redfish virtual media deploys an image with a config drive.

Two machines of the lab (libvirt, QEMU's TCG emulator; one BIOS, one UEFI)
sit behind sushy-tools' Redfish emulator and are enrolled as ``redfish``
nodes with ``redfish-virtual-media`` boot and the ``direct`` deploy, their
agent ramdisk the one ``corral baremetal build-ramdisk`` made
(``tools/baremetal-lab``): the BIOS machine's from ``[conductor]
deploy_kernel``/``deploy_ramdisk``, the UEFI machine's from its
``driver_info``.  Both are deployed at once with a whole-disk image
uploaded to the Image service (qcow2) and a config drive given as JSON
whose ``meta_data`` carries a public key.  Each machine has two disks; the
root device hint (the serial number of the larger one) makes the agent
write the first, where the agent's own choice (the smallest) would be the
second.

Corral builds each node's boot ISO from the ramdisk with the agent's
kernel arguments, the BMC inserts it, the agent looks the node up,
heartbeats and writes the image and the config drive; Corral asks it to
power the machine off, waits for the BMC to report it off and boots the
machine from its disk.  The deployed image's own init then finds the
``config-2`` partition, reads ``openstack/latest/meta_data.json`` and
reports it to this test over the guest network: the node's UUID and name
(filled in by Corral) and the public key.  Undeploying cleans the machines
through the agent (``erase_devices_metadata`` only) and returns them to
``available``.

Guests reach the host as 10.0.2.2 (QEMU's user network); the agent's API
port is forwarded to 127.0.0.1.  While the test runs, the host's route to
10.0.2.0/24 is a blackhole: Corral never requests a URL meant for the
machines.  How long each phase took is written to
``$CORRAL_LAB_DIR/run/direct-lab-times.json`` (measured, never asserted).
"""

from __future__ import annotations

import json
import os
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.baremetal import disk_image
from tests.baremetal.lab_support import (
    LAB_DIR,
    Callbacks,
    Machines,
    MachineSpec,
    guest_network_blackholed,
    read_lab,
)
from tests.baremetal.test_agent import AgentServer
from tests.baremetal.test_provisioning import provision
from tests.baremetal.vmedia_support import Emulator, require
from tests.image.conftest import ImageServer as ImageService
from tests.image.conftest import create, upload
from tests.support.databases import DatabaseFactory
from tests.support.ports import free_port

pytestmark = [pytest.mark.backends("first"), pytest.mark.timeout(1800), pytest.mark.slow]

GIB = 1024 ** 3
# The disk the image goes to (first in the boot order) and a smaller one the agent would pick by itself.
ROOT_DISK, OTHER_DISK = (5 * GIB, "corral-root"), (int(4.5 * GIB), "corral-other")
# Emulated machines on a shared two-core host: generous limits (a passing run takes two to three minutes).
PHASE_TIMEOUT = 900
PUBLIC_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPqTn6Uc9rUwmWzTQhq7lMjGqW1fQkJ0m3N7rX0c0rPl corral-lab"


@pytest.fixture(scope="module")
def lab(database_factory: DatabaseFactory, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    settings = read_lab()
    for key in ("CORRAL_LAB_IPA_KERNEL", "CORRAL_LAB_IPA_RAMDISK", "CORRAL_LAB_KERNEL_DEB"):
        require(key in settings and os.path.exists(settings[key]),
                f"{key} is missing from the lab (tools/baremetal-lab setup builds the agent ramdisk)")
    missing = disk_image.missing_tools()
    require(not missing, f"the image build needs {', '.join(missing)}")
    tmp = tmp_path_factory.mktemp("direct-lab")
    raw, qcow2 = disk_image.build(settings["CORRAL_LAB_KERNEL"], settings["CORRAL_LAB_KERNEL_DEB"], tmp / "image")

    ramdisk_dir = os.path.dirname(settings["CORRAL_LAB_IPA_KERNEL"])
    files_port = free_port()
    specs = [MachineSpec(firmware, memory_mib=1536, disks=[ROOT_DISK, OTHER_DISK],
                         mac=f"52:54:00:c0:aa:{index:02x}", agent_port=free_port())
             for index, firmware in enumerate(("bios", "uefi"))]
    with guest_network_blackholed():
        machines = Machines(settings, specs)
        callbacks = Callbacks()
        emulator = server = images = None
        try:
            allowed = ", ".join(repr(m["uuid"]) for m in machines.machines)
            emulator = Emulator(str(tmp / "redfish"), (
                f"SUSHY_EMULATOR_LIBVIRT_URI = {settings['CORRAL_LAB_LIBVIRT_URI']!r}\n"
                f"SUSHY_EMULATOR_STORAGE_POOL = {settings['CORRAL_LAB_POOL']!r}\n"
                f"SUSHY_EMULATOR_ALLOWED_INSTANCES = [{allowed}]\n"))
            images = ImageService(database_factory, tmp / "image-service")
            server = AgentServer(
                database_factory, tmp / "corral",
                groups={
                    # The agent downloads images at 10.0.2.2 (the guest's view of the conductor's file
                    # server); the BMC fetches ISOs at 127.0.0.1.
                    "deploy": {"http_server_port": files_port, "http_url": f"http://10.0.2.2:{files_port}",
                               "external_http_url": f"http://127.0.0.1:{files_port}",
                               "erase_devices_priority": 0},
                    "agent": {"command_timeout": 120, "post_deploy_get_power_state_retries": 60,
                              "post_deploy_get_power_state_retry_interval": 1},
                    "glance": {"endpoint_override": images.url},
                },
                deploy_callback_timeout=PHASE_TIMEOUT, clean_callback_timeout=PHASE_TIMEOUT,
                check_deploy_timeouts_interval=5, clean_step_poll_interval=2,
                deploy_kernel=f"file://{settings['CORRAL_LAB_IPA_KERNEL']}",
                deploy_ramdisk=f"file://{settings['CORRAL_LAB_IPA_RAMDISK']}",
                file_url_allowed_paths=[ramdisk_dir],
            )
            api_port = urllib.parse.urlsplit(server.url).port
            server.conf.set_override("external_callback_url", f"http://10.0.2.2:{api_port}/", group="deploy")
            yield {"settings": settings, "machines": machines, "callbacks": callbacks, "emulator": emulator,
                   "server": server, "images": images, "raw": raw, "qcow2": qcow2, "timeline": [],
                   "last_seen": {}, "started": time.monotonic()}
        finally:
            if server is not None:
                server.stop()
            if images is not None:
                images.stop()
            if emulator is not None:
                emulator.stop()
            callbacks.stop()
            # The consoles of the last run stay for whoever investigates it.
            run_dir = Path(LAB_DIR, "run")
            run_dir.mkdir(parents=True, exist_ok=True)
            for machine in machines.machines:
                (run_dir / f"direct-lab-{machine['spec'].firmware}.serial.log").write_text(machines.serial(machine))
            machines.remove()


def _diagnostics(lab: dict[str, Any]) -> str:
    machines = lab["machines"]
    consoles = {m["name"]: machines.serial(m)[-3000:] for m in machines.machines}
    return f"serial consoles: {consoles}\nemulator log: {lab['emulator'].log()[-1500:]}"


def wait_all(lab: dict[str, Any], names: list[str], state: str, failures: tuple[str, ...]) -> dict[str, float]:
    """Wait until every node is in ``state`` (unlocked); the time each got there.

    Each change of a node's state, step or power state goes into ``lab["timeline"]``.
    """
    client = lab["server"].client
    reached: dict[str, float] = {}
    deadline = time.monotonic() + PHASE_TIMEOUT
    while len(reached) < len(names):
        for name in names:
            if name in reached:
                continue
            node = client.get(f"/v1/nodes/{name}").json()
            step = (node.get("deploy_step") or node.get("clean_step") or {}).get("step")
            seen = (node["provision_state"], step, node["power_state"])
            if lab["last_seen"].get(name) != seen:
                lab["last_seen"][name] = seen
                lab["timeline"].append([round(time.monotonic() - lab["started"], 1), name, *seen])
            if node["provision_state"] in failures:
                raise AssertionError(f"{name} went to {node['provision_state']}: {node['last_error']}\n"
                                     f"{_diagnostics(lab)}")
            if node["provision_state"] == state and node["reservation"] is None:
                reached[name] = time.monotonic()
        if time.monotonic() > deadline:
            raise AssertionError(f"{set(names) - set(reached)} not {state} after {PHASE_TIMEOUT} s\n"
                                 f"{_diagnostics(lab)}")
        time.sleep(0.5)
    return reached


def _first_data_offset(raw: bytes) -> int:
    """An offset well inside the image's file system holding data (not zeros)."""
    for offset in range(8 * 1024 * 1024, len(raw), 65536):
        if raw[offset:offset + 65536].strip(b"\0"):
            return offset
    raise AssertionError("the image holds no data")


def test_agent_inspects_the_machines_over_virtual_media(lab: dict[str, Any]) -> None:
    """The agent booted for inspection reports each machine's CPUs, memory, disks and NIC from inside it.

    Runs first, on the same machines as the deployment below: its nodes are deleted again afterwards.  Each
    node has the port of its machine's MAC (for the lookup, as upstream's inspection needs one, or a BMC
    address) and a port for a NIC the machine does not have, which ``keep_ports = present`` removes.  The
    UEFI node has a root device hint naming the larger disk; the BIOS node's root disk is the agent's
    choice, the smaller one.
    """
    started = time.monotonic()
    server, machines, emulator = lab["server"], lab["machines"], lab["emulator"]
    client = server.client
    server.conf.set_override("keep_ports", "present", group="inspector")
    nodes: dict[str, dict[str, Any]] = {}
    try:
        for machine in machines.machines:
            spec = machine["spec"]
            name = f"inspect-{spec.firmware}"
            properties: dict[str, Any] = {"capabilities": f"boot_mode:{spec.firmware}"}
            if spec.firmware == "uefi":
                properties["root_device"] = {"serial": ROOT_DISK[1]}
            response = client.post("/v1/nodes", json={
                "name": name, "driver": "redfish", "boot_interface": "redfish-virtual-media",
                "inspect_interface": "agent", "properties": properties,
                "driver_info": {
                    "redfish_address": emulator.url, "redfish_system_id": f"/redfish/v1/Systems/{machine['uuid']}",
                    "kernel_append_params": f"%default% console=ttyS0,115200 ipa-advertise-host=127.0.0.1 "
                                            f"ipa-advertise-port={spec.agent_port}"},
            })
            assert response.status_code == 201, response.text
            nodes[name] = {**response.json(), "machine": machine}
            for mac in (spec.mac, f"52:54:00:0f:ff:{len(nodes):02x}"):
                assert client.post("/v1/ports", json={"node_uuid": nodes[name]["uuid"],
                                                      "address": mac}).status_code == 201
            assert provision(client, name, "manage").status_code == 202
        wait_all(lab, list(nodes), "manageable", ("enroll",))
        requested = {}
        for name in nodes:
            assert provision(client, name, "inspect").status_code == 202
            requested[name] = time.monotonic()
        inspected = wait_all(lab, list(nodes), "manageable", ("inspect failed",))
        for name, node in nodes.items():
            spec = node["machine"]["spec"]
            shown = client.get(f"/v1/nodes/{name}").json()
            assert (shown["last_error"], shown["power_state"]) == (None, "power off")
            assert machines.state(node["machine"]) == "shut off"
            assert not emulator.cd(node["machine"]["uuid"])["Inserted"]
            inventory = client.get(f"/v1/nodes/{name}/inventory").json()["inventory"]
            # One vCPU, the machine's memory, its two disks and its NIC, as the agent saw them.
            assert inventory["cpu"]["count"] == 1
            memory_mb = shown["properties"]["memory_mb"]
            assert spec.memory_mib - 160 <= memory_mb <= spec.memory_mib, inventory["memory"]
            disks = {disk["serial"]: disk["size"] for disk in inventory["disks"] if disk["name"].startswith("/dev/vd")}
            assert disks == {serial: size for size, serial in spec.disks}
            nics = {nic["mac_address"]: nic for nic in inventory["interfaces"]}
            assert nics[spec.mac]["ipv4_address"] == "10.0.2.15"
            assert inventory["boot"]["current_boot_mode"] == spec.firmware
            root_gib = (ROOT_DISK if spec.firmware == "uefi" else OTHER_DISK)[0] // GIB
            assert shown["properties"] == {**node["properties"], "cpus": 1, "cpu_arch": "x86_64",
                                           "memory_mb": memory_mb, "local_gb": root_gib - 1}
            # The port of the NIC the machine has stays; the other one went.
            ports = client.get(f"/v1/nodes/{name}/ports").json()["ports"]
            assert [port["address"] for port in ports] == [spec.mac]
        lab.setdefault("times", {})["inspect_request_to_manageable_s"] = {
            name: round(inspected[name] - requested[name], 1) for name in nodes}
    finally:
        server.conf.clear_override("keep_ports", group="inspector")
        for name in nodes:
            client.delete(f"/v1/nodes/{name}")
    lab["times"]["inspect_test_s"] = round(time.monotonic() - started, 1)
    print(json.dumps(lab["times"], sort_keys=True))


def test_agent_deploys_a_whole_disk_image_with_a_config_drive_over_virtual_media(lab: dict[str, Any]) -> None:
    started = time.monotonic()
    server, machines, callbacks, emulator = lab["server"], lab["machines"], lab["callbacks"], lab["emulator"]
    client = server.client
    settings = lab["settings"]
    raw = lab["raw"]
    times: dict[str, Any] = lab.get("times", {})

    project = lab["images"].client("demo")
    image = create(project, name="deployed", disk_format="qcow2", container_format="bare")
    assert upload(project, image["id"], lab["qcow2"]).status_code == 204

    nodes: dict[str, dict[str, Any]] = {}
    for machine in machines.machines:
        spec = machine["spec"]
        name = f"direct-{spec.firmware}"
        driver_info = {
            "redfish_address": emulator.url, "redfish_system_id": f"/redfish/v1/Systems/{machine['uuid']}",
            # QEMU's user network hides the agent: it advertises the host side of its forwarded port.
            "kernel_append_params": f"%default% console=ttyS0,115200 ipa-advertise-host=127.0.0.1 "
                                    f"ipa-advertise-port={spec.agent_port}",
        }
        if spec.firmware == "uefi":
            # This one names its ramdisk itself; the other takes [conductor] deploy_kernel/deploy_ramdisk.
            driver_info["deploy_kernel"] = f"file://{settings['CORRAL_LAB_IPA_KERNEL']}"
            driver_info["deploy_ramdisk"] = f"file://{settings['CORRAL_LAB_IPA_RAMDISK']}"
        response = client.post("/v1/nodes", json={
            "name": name, "driver": "redfish", "boot_interface": "redfish-virtual-media",
            "deploy_interface": "direct", "automated_clean": False, "driver_info": driver_info,
            "properties": {"capabilities": f"boot_mode:{spec.firmware}",
                           "root_device": {"serial": ROOT_DISK[1]}},
        })
        assert response.status_code == 201, response.text
        nodes[name] = {**response.json(), "machine": machine}
        assert client.post("/v1/ports", json={"node_uuid": nodes[name]["uuid"], "address": spec.mac}).status_code == 201
        assert provision(client, name, "manage").status_code == 202
    wait_all(lab, list(nodes), "manageable", ("enroll",))
    for name in nodes:
        assert provision(client, name, "provide").status_code == 202
    wait_all(lab, list(nodes), "available", ("clean failed",))
    for name in nodes:
        patch = [{"op": "add", "path": "/instance_info", "value": {"image_source": image["id"]}}]
        assert client.patch(f"/v1/nodes/{name}", json=patch).status_code == 200
        validation = client.get(f"/v1/nodes/{name}/validate").json()
        assert all(validation[kind]["result"] for kind in ("boot", "deploy", "power", "management")), validation

    # ------------------------------------------------------------ deploy
    requested: dict[str, float] = {}
    for name in nodes:
        configdrive = {"meta_data": {"public_keys": {"0": PUBLIC_KEY},
                                     "meta": {"corral_callback": callbacks.url_for_guest(name)}}}
        response = client.put(f"/v1/nodes/{name}/states/provision",
                              json={"target": "active", "configdrive": configdrive})
        assert response.status_code == 202, response.text
        requested[name] = time.monotonic()
    active = wait_all(lab, list(nodes), "active", ("deploy failed",))
    times["deploy_request_to_active_s"] = {name: round(active[name] - requested[name], 1) for name in nodes}

    for name, node in nodes.items():
        shown = client.get(f"/v1/nodes/{name}")
        deployed = shown.json()
        assert (deployed["last_error"], deployed["power_state"]) == (None, "power on")
        # The config drive is never shown, whatever form it was given in.
        assert deployed["instance_info"]["configdrive"] == "******"
        assert PUBLIC_KEY not in shown.text
        assert "agent_url" not in deployed["driver_internal_info"]
        machine = node["machine"]
        # The virtual CD is empty again and the machine boots from its disk.
        assert not emulator.cd(machine["uuid"])["Inserted"]
        assert emulator.system(machine["uuid"])["Boot"]["BootSourceOverrideTarget"] == "Hdd"
        # The root device hint chose the first disk: the image is there (the agent added the config drive
        # partition to the table in sector 0), the other disk is untouched.
        written = machines.read_disk(machine, 0, len(raw))
        assert written[:440] == raw[:440] and written[512:] == raw[512:]
        assert machines.read_disk(machine, 1, 1024 * 1024) == bytes(1024 * 1024)

    def reported() -> bool:
        return set(nodes) <= set(callbacks.received)

    deadline = time.monotonic() + PHASE_TIMEOUT
    booted: dict[str, float] = {}
    while not reported():
        for name in set(callbacks.received) - set(booted):
            booted[name] = time.monotonic()
        if time.monotonic() > deadline:
            raise AssertionError(f"no report from {set(nodes) - set(callbacks.received)}\n{_diagnostics(lab)}")
        time.sleep(0.5)
    for name in set(callbacks.received) - set(booted):
        booted[name] = time.monotonic()
    times["active_to_reported_from_disk_s"] = {name: round(booted[name] - active[name], 1) for name in nodes}
    for name, node in nodes.items():
        report = callbacks.received[name]
        meta_data = json.loads(bytes.fromhex(report["meta_data"]))
        # Corral filled in the node's UUID and name; the key is the one the request carried.
        assert meta_data["uuid"] == node["uuid"]
        assert meta_data["name"] == name
        assert meta_data["public_keys"] == {"0": PUBLIC_KEY}
        # The config drive is a partition of the disk the image went to, after the image's own.
        assert report["partition"] == "/dev/vda2"
        assert machines.state(node["machine"]) == "running"
        # The agent powered the machine off itself (a BMC's power-off leaves no such line) before the disk
        # boot began.
        console = machines.serial(node["machine"])
        assert "reboot: Power down" in console[:console.index("CORRAL-DEPLOYED")]

    # ---------------------------------------------------------- undeploy
    data_offset = _first_data_offset(raw)
    undeployed: dict[str, float] = {}
    for name in nodes:
        assert client.patch(f"/v1/nodes/{name}", json=[
            {"op": "replace", "path": "/automated_clean", "value": True}]).status_code == 200
        assert provision(client, name, "deleted").status_code == 202
        undeployed[name] = time.monotonic()
    available = wait_all(lab, list(nodes), "available", ("clean failed", "error"))
    times["undeploy_with_cleaning_to_available_s"] = {name: round(available[name] - undeployed[name], 1)
                                                      for name in nodes}
    for name, node in nodes.items():
        machine = node["machine"]
        cleaned = client.get(f"/v1/nodes/{name}").json()
        assert (cleaned["last_error"], cleaned["power_state"]) == (None, "power off")
        assert cleaned["instance_info"] == {}
        assert machines.state(machine) == "shut off"
        cd = emulator.cd(machine["uuid"])
        assert not cd["Inserted"] and not cd.get("Image")
        # erase_devices_metadata ran, and only it: the partition tables are gone, the data is still there.
        assert "erase_devices_metadata" in machines.serial(machine)
        assert machines.read_disk(machine, 0, 512)[510:] != b"\x55\xaa"
        assert machines.read_disk(machine, 0, 65536, data_offset) == raw[data_offset:data_offset + 65536]

    times["test_s"] = round(time.monotonic() - started, 1)
    times["timeline"] = lab["timeline"]
    run_dir = Path(LAB_DIR, "run")
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "direct-lab-times.json").write_text(json.dumps(times, indent=1, sort_keys=True) + "\n")
    print(json.dumps(times, sort_keys=True))
