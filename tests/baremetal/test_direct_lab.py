"""End to end: two QEMU machines inspected, cleaned and deployed in one boot of the agent each, then undeployed.

Two machines of the lab (libvirt, QEMU's TCG emulator; one BIOS, one UEFI)
sit behind sushy-tools' Redfish emulator and are enrolled in a ``corral
serve`` all-in-one (Identity, Placement, Image, Compute with its ironic
driver, Bare Metal) as ``redfish`` nodes with ``redfish-virtual-media``
boot, ``agent`` inspection and the ``direct`` deploy, their agent ramdisk
the one ``corral baremetal build-ramdisk`` made (``tools/baremetal-lab``):
the BIOS machine's from ``[conductor] deploy_kernel``/``deploy_ramdisk``,
the UEFI machine's from its ``driver_info``.  ``[deploy] fast_track`` is
on, so one boot of the agent serves each machine's inspection, automated
cleaning and deployment:

* inspection: the agent reports the machine's CPUs, memory, disks and NIC
  from inside it; the machine stays on with the agent running (its medium
  ejected);
* ``provide``: the running agent cleans (``erase_devices_metadata``), no
  reboot;
* deployment, both machines at once, without a reboot: the BIOS machine
  through Compute (``openstack server create --image --flavor --key-name
  --config-drive true --user-data --wait``: the ironic driver deploys the
  Image service's qcow2 image with the config drive Compute builds), the
  UEFI machine through metalsmith (``metalsmith deploy --image URL
  --image-checksum --ssh-public-key --resource-class``: a raw image by
  http URL, the config drive given as JSON that Corral builds).  A root
  device hint (the serial number of the larger disk) makes the agent write
  the first disk, where its own choice (the smallest) would be the second.
  The agent powers the machine off, Corral boots it from its disk, and the
  image's own init finds the ``config-2`` partition, reads
  ``openstack/latest/meta_data.json`` and reports it over the guest network:
  the server's UUID (Compute) or the node's (metalsmith) and the public key.
* undeployment (``openstack server delete``, ``metalsmith undeploy``): the
  agent boots again and cleans; with fast track it stays running while the
  node is ``available``.

Guests reach the host as 10.0.2.2 (QEMU's user network); the agent's API
port is forwarded to 127.0.0.1.  While the test runs, the host's route to
10.0.2.0/24 is a blackhole: Corral (and metalsmith) never request a URL
meant for the machines.  How long each phase took is written to
``$CORRAL_LAB_DIR/run/direct-lab-times.json`` (measured, never asserted).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.baremetal import disk_image
from tests.baremetal.agent_support import ImageServer
from tests.baremetal.lab_support import (
    LAB_DIR,
    Callbacks,
    Machines,
    MachineSpec,
    guest_network_blackholed,
    read_lab,
)
from tests.baremetal.support import wait_for
from tests.baremetal.vmedia_support import Emulator, require
from tests.compute.test_ironic_driver import BareMetalCloud
from tests.support.databases import DatabaseFactory
from tests.support.ports import free_port
from tests.support.process import CorralProcess, write_config

pytestmark = [pytest.mark.backends("first"), pytest.mark.timeout(1800), pytest.mark.slow]

GIB = 1024 ** 3
# The disk the image goes to (first in the boot order) and a smaller one the agent would pick by itself.
ROOT_DISK, OTHER_DISK = (5 * GIB, "corral-root"), (int(4.5 * GIB), "corral-other")
# Emulated machines on a shared two-core host: generous limits (a passing run takes six to eight minutes).
PHASE_TIMEOUT = 900
PUBLIC_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPqTn6Uc9rUwmWzTQhq7lMjGqW1fQkJ0m3N7rX0c0rPl corral-lab"
# Each machine's node: its name and resource class (the flavor's, or metalsmith's --resource-class).
NODES = {"bios": ("lab-bios", "lab-bios"), "uefi": ("lab-uefi", "lab-uefi")}


@pytest.fixture(scope="module")
def lab(database_factory: DatabaseFactory, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    settings = read_lab()
    for key in ("CORRAL_LAB_IPA_KERNEL", "CORRAL_LAB_IPA_RAMDISK", "CORRAL_LAB_KERNEL_DEB"):
        require(key in settings and os.path.exists(settings[key]),
                f"{key} is missing from the lab (tools/baremetal-lab setup builds the agent ramdisk)")
    missing = disk_image.missing_tools()
    require(not missing, f"the image build needs {', '.join(missing)}")
    require(shutil.which("metalsmith") is not None, "metalsmith is in the test extra (pip install metalsmith)")
    tmp = tmp_path_factory.mktemp("direct-lab")
    callbacks = Callbacks()
    # metalsmith's config drive has no "meta": the image reports to the callback server under the UUID it reads.
    raw, qcow2 = disk_image.build(settings["CORRAL_LAB_KERNEL"], settings["CORRAL_LAB_KERNEL_DEB"], tmp / "image",
                                  default_callback=callbacks.url_for_guest(""))
    (tmp / "disk.qcow2").write_bytes(qcow2)

    ramdisk_dir = os.path.dirname(settings["CORRAL_LAB_IPA_KERNEL"])
    files_port, api_port = free_port(), free_port()
    specs = [MachineSpec(firmware, memory_mib=1536, disks=[ROOT_DISK, OTHER_DISK],
                         mac=f"52:54:00:c0:aa:{index:02x}", agent_port=free_port())
             for index, firmware in enumerate(("bios", "uefi"))]
    with guest_network_blackholed():
        machines = Machines(settings, specs)
        emulator = process = images = None
        try:
            allowed = ", ".join(repr(m["uuid"]) for m in machines.machines)
            emulator = Emulator(str(tmp / "redfish"), (
                f"SUSHY_EMULATOR_LIBVIRT_URI = {settings['CORRAL_LAB_LIBVIRT_URI']!r}\n"
                f"SUSHY_EMULATOR_STORAGE_POOL = {settings['CORRAL_LAB_POOL']!r}\n"
                f"SUSHY_EMULATOR_ALLOWED_INSTANCES = [{allowed}]\n"))
            (tmp / "http").mkdir()
            images = ImageServer(tmp / "http")
            process = _serve(database_factory, tmp, settings, ramdisk_dir, files_port, api_port)
            cloud = BareMetalCloud(process, tmp / "state", "")
            yield {"settings": settings, "machines": machines, "callbacks": callbacks, "emulator": emulator,
                   "cloud": cloud, "images": images, "raw": raw, "tmp": tmp, "timeline": [], "last_seen": {},
                   "started": time.monotonic(), "times": {}}
        finally:
            if process is not None:
                process.stop()
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


def _serve(database_factory: DatabaseFactory, tmp: Path, settings: dict[str, str], ramdisk_dir: str,
           files_port: int, api_port: int) -> CorralProcess:
    """``corral serve``: every service on the test's backend, Compute's ironic driver against its Bare Metal."""
    data_dir = tmp / "state"
    data_dir.mkdir()
    config = write_config(tmp / "corral.conf", {
        "DEFAULT": {"host": "lab-host", "update_resources_interval": 1},
        "compute": {"poll_interval": 0.5, "cell0_connection": database_factory.new_url("cell0")},
        # Undeploying waits for cleaning, which boots the agent: up to PHASE_TIMEOUT.
        "ironic": {"api_retry_interval": 1, "api_max_retries": PHASE_TIMEOUT},
        "identity": {"password_hash_rounds": 8},
        **database_factory.all_in_one_sections(),
        "conductor": {
            "deploy_kernel": f"file://{settings['CORRAL_LAB_IPA_KERNEL']}",
            "deploy_ramdisk": f"file://{settings['CORRAL_LAB_IPA_RAMDISK']}",
            "file_url_allowed_paths": ramdisk_dir,
            "deploy_callback_timeout": PHASE_TIMEOUT, "clean_callback_timeout": PHASE_TIMEOUT,
            "check_deploy_timeouts_interval": 5, "clean_step_poll_interval": 2},
        # The agent heartbeats every few seconds.
        "api": {"ramdisk_heartbeat_timeout": 5},
        # The agent reaches the API and downloads images at 10.0.2.2 (the guest's view of the host's
        # loopback); the BMC fetches ISOs at 127.0.0.1.
        "deploy": {"fast_track": True, "http_server_port": files_port, "http_url": f"http://10.0.2.2:{files_port}",
                   "external_http_url": f"http://127.0.0.1:{files_port}",
                   "external_callback_url": f"http://10.0.2.2:{api_port}/baremetal/",
                   "erase_devices_priority": 0},
        "agent": {"command_timeout": 120, "post_deploy_get_power_state_retries": 60,
                  "post_deploy_get_power_state_retry_interval": 1},
        # Inspection keeps only the ports of NICs the machine has.
        "inspector": {"keep_ports": "present"},
    })
    return CorralProcess(config, data_dir, port=api_port, extra_args=["--migrate"]).start(
        wait_path="/identity/v3", timeout=120)


def _diagnostics(lab: dict[str, Any]) -> str:
    machines = lab["machines"]
    consoles = {m["name"]: machines.serial(m)[-3000:] for m in machines.machines}
    return (f"serial consoles: {consoles}\nemulator log: {lab['emulator'].log()[-1500:]}\n"
            f"corral log: {lab['cloud'].process.log()[-4000:]}")


def wait_all(lab: dict[str, Any], names: list[str], state: str, failures: tuple[str, ...]) -> dict[str, float]:
    """Wait until every node is in ``state`` (unlocked); the time each got there.

    Each change of a node's state, step or power state goes into ``lab["timeline"]``.
    """
    cloud: BareMetalCloud = lab["cloud"]
    reached: dict[str, float] = {}
    deadline = time.monotonic() + PHASE_TIMEOUT
    while len(reached) < len(names):
        for name in names:
            if name in reached:
                continue
            node = cloud.node(name)
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


def _agent_boots(console: str) -> int:
    """How many times the agent ramdisk booted (its init says so once per boot on the serial console)."""
    return console.count("] init started, kernel")


def _metalsmith(cloud: BareMetalCloud, *args: str) -> subprocess.Popen[str]:
    command = shutil.which("metalsmith")
    assert command is not None
    env = {name: value for name, value in os.environ.items() if not name.startswith("OS_")}
    return subprocess.Popen([command, "-q", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**env, **cloud.env})


def _finished(lab: dict[str, Any], process: subprocess.Popen[str]) -> str:
    try:
        out, err = process.communicate(timeout=PHASE_TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
    assert process.returncode == 0, f"metalsmith failed: {out}\n{err}\n{_diagnostics(lab)}"
    return out


def _enroll(lab: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Both nodes, manageable, each with the port of its machine's MAC and one of a NIC it does not have."""
    cloud: BareMetalCloud = lab["cloud"]
    emulator, settings = lab["emulator"], lab["settings"]
    nodes: dict[str, dict[str, Any]] = {}
    for machine in lab["machines"].machines:
        spec = machine["spec"]
        name, resource_class = NODES[spec.firmware]
        properties: dict[str, Any] = {"capabilities": f"boot_mode:{spec.firmware}"}
        driver_info = {
            "redfish_address": emulator.url, "redfish_system_id": f"/redfish/v1/Systems/{machine['uuid']}",
            # QEMU's user network hides the agent: it advertises the host side of its forwarded port.
            "kernel_append_params": f"%default% console=ttyS0,115200 ipa-advertise-host=127.0.0.1 "
                                    f"ipa-advertise-port={spec.agent_port}"}
        if spec.firmware == "uefi":
            # The UEFI node names its ramdisk itself; the other takes [conductor] deploy_kernel/deploy_ramdisk.
            driver_info["deploy_kernel"] = f"file://{settings['CORRAL_LAB_IPA_KERNEL']}"
            driver_info["deploy_ramdisk"] = f"file://{settings['CORRAL_LAB_IPA_RAMDISK']}"
            # Inspected with the root device hint naming the larger disk; the BIOS node gets it afterwards.
            properties["root_device"] = {"serial": ROOT_DISK[1]}
        response = cloud.api("POST", "/baremetal/v1/nodes", json={
            "name": name, "driver": "redfish", "boot_interface": "redfish-virtual-media",
            "inspect_interface": "agent", "deploy_interface": "direct", "resource_class": resource_class,
            "properties": properties, "driver_info": driver_info})
        assert response.status_code == 201, response.text
        nodes[name] = {**response.json(), "machine": machine}
        for mac in (spec.mac, f"52:54:00:0f:ff:{len(nodes):02x}"):
            response = cloud.api("POST", "/baremetal/v1/ports", json={"node_uuid": nodes[name]["uuid"],
                                                                      "address": mac})
            assert response.status_code == 201, response.text
        _provision(cloud, name, "manage")
    wait_all(lab, list(nodes), "manageable", ("enroll",))
    return nodes


def _provision(cloud: BareMetalCloud, name: str, target: str) -> None:
    response = cloud.api("PUT", f"/baremetal/v1/nodes/{name}/states/provision", json={"target": target})
    assert response.status_code == 202, response.text


def _inspect(lab: dict[str, Any], nodes: dict[str, dict[str, Any]]) -> None:
    """The agent booted for inspection reports each machine's CPUs, memory, disks and NIC from inside it."""
    cloud: BareMetalCloud = lab["cloud"]
    machines, emulator = lab["machines"], lab["emulator"]
    requested = {}
    for name in nodes:
        _provision(cloud, name, "inspect")
        requested[name] = time.monotonic()
    inspected = wait_all(lab, list(nodes), "manageable", ("inspect failed",))
    lab["times"]["inspect_request_to_manageable_s"] = {
        name: round(inspected[name] - requested[name], 1) for name in nodes}
    for name, node in nodes.items():
        spec = node["machine"]["spec"]
        shown = cloud.node(name)
        # Fast track: the machine stays on with its agent, which runs from memory (the CD is ejected).
        assert (shown["last_error"], shown["power_state"]) == (None, "power on")
        assert machines.state(node["machine"]) == "running"
        assert not emulator.cd(node["machine"]["uuid"])["Inserted"]
        inventory = cloud.api("GET", f"/baremetal/v1/nodes/{name}/inventory").json()["inventory"]
        # One vCPU, the machine's memory, its two disks and its NIC, as the agent saw them.
        assert inventory["cpu"]["count"] == 1
        memory_mb = shown["properties"]["memory_mb"]
        assert spec.memory_mib - 160 <= memory_mb <= spec.memory_mib, inventory["memory"]
        disks = {disk["serial"]: disk["size"] for disk in inventory["disks"] if disk["name"].startswith("/dev/vd")}
        assert disks == {serial: size for size, serial in spec.disks}
        nics = {nic["mac_address"]: nic for nic in inventory["interfaces"]}
        assert nics[spec.mac]["ipv4_address"] == "10.0.2.15"
        assert inventory["boot"]["current_boot_mode"] == spec.firmware
        # The root disk: the hint's (the larger) on the UEFI node, the agent's choice (the smaller) on the other.
        root_gib = (ROOT_DISK if spec.firmware == "uefi" else OTHER_DISK)[0] // GIB
        assert shown["properties"] == {**node["properties"], "cpus": 1, "cpu_arch": "x86_64",
                                       "memory_mb": memory_mb, "local_gb": root_gib - 1}
        # The port of the NIC the machine has stays; the other one went.
        ports = cloud.api("GET", f"/baremetal/v1/nodes/{name}/ports").json()["ports"]
        assert [port["address"] for port in ports] == [spec.mac]
        # The agent looked the node up and heartbeats.
        wait_for(lambda name=name: "agent_url" in cloud.node(name)["driver_internal_info"], timeout=PHASE_TIMEOUT,
                 interval=1)


def _provide(lab: dict[str, Any], nodes: dict[str, dict[str, Any]]) -> None:
    """Automated cleaning through the agent still running since inspection: no reboot."""
    cloud: BareMetalCloud = lab["cloud"]
    machines = lab["machines"]
    bios = NODES["bios"][0]
    patch = [{"op": "add", "path": "/properties/root_device", "value": {"serial": ROOT_DISK[1]}}]
    assert cloud.api("PATCH", f"/baremetal/v1/nodes/{bios}", json=patch).status_code == 200
    requested = {}
    for name in nodes:
        _provision(cloud, name, "provide")
        requested[name] = time.monotonic()
    available = wait_all(lab, list(nodes), "available", ("clean failed",))
    lab["times"]["provide_with_cleaning_to_available_s"] = {
        name: round(available[name] - requested[name], 1) for name in nodes}
    for name, node in nodes.items():
        shown = cloud.node(name)
        assert (shown["last_error"], shown["power_state"]) == (None, "power on")
        console = machines.serial(node["machine"])
        assert "erase_devices_metadata" in console
        assert _agent_boots(console) == 1, console[-3000:]
        validation = cloud.api("GET", f"/baremetal/v1/nodes/{name}/validate").json()
        assert all(validation[kind]["result"] for kind in ("boot", "power", "management")), validation


def _compute_ready(lab: dict[str, Any], node_uuid: str) -> None:
    """Until Compute offers the node: a hypervisor whose unit Placement does not reserve."""
    cloud: BareMetalCloud = lab["cloud"]

    def ready() -> bool:
        listed = cloud.api("GET", "/compute/v2.1/os-hypervisors").json()["hypervisors"]
        if node_uuid not in {hypervisor["hypervisor_hostname"] for hypervisor in listed}:
            return False
        response = cloud.placement(f"/resource_providers/{node_uuid}/inventories")
        inventories = response.json().get("inventories", {}) if response.status_code == 200 else {}
        return any(item["reserved"] == 0 for item in inventories.values())

    wait_for(ready, timeout=120, interval=1)


def test_machines_are_inspected_cleaned_and_deployed_by_compute_and_metalsmith_in_one_agent_boot(
        lab: dict[str, Any]) -> None:
    started = time.monotonic()
    cloud: BareMetalCloud = lab["cloud"]
    machines, callbacks, emulator, raw, tmp = lab["machines"], lab["callbacks"], lab["emulator"], lab["raw"], lab["tmp"]
    times = lab["times"]
    bios, uefi = NODES["bios"][0], NODES["uefi"][0]

    # Compute's side: the image, a flavor asking for one lab-bios node, a keypair.
    image = cloud.osc("image", "create", "--disk-format", "qcow2", "--container-format", "bare", "--public",
                      "--file", str(tmp / "disk.qcow2"), "lab-disk")
    assert image["status"] == "active"
    cloud.osc("flavor", "create", "--ram", "1024", "--vcpus", "1", "--disk", "1",
              "--property", "resources:VCPU=0", "--property", "resources:MEMORY_MB=0",
              "--property", "resources:DISK_GB=0", "--property", "resources:CUSTOM_LAB_BIOS=1", "BM")
    key_file = tmp / "key.pub"
    key_file.write_text(PUBLIC_KEY + "\n")
    cloud.osc("keypair", "create", "--public-key", str(key_file), "K")
    user_data = tmp / "user-data"
    user_data.write_text("#cloud-config\nhostname: lab\n")
    # metalsmith's side: the raw image by URL, at the host's loopback as the guests see it.
    (tmp / "http" / "disk.raw").write_bytes(raw)
    raw_url = f"http://10.0.2.2:{lab['images'].url.rsplit(':', 1)[1]}/disk.raw"

    nodes = _enroll(lab)
    _inspect(lab, nodes)
    _provide(lab, nodes)
    times["to_available_s"] = round(time.monotonic() - started, 1)

    # ------------------------------------------------------------ deploy, both machines at once
    requested = time.monotonic()
    deploying = _metalsmith(cloud, "deploy", "--image", raw_url, "--image-checksum", hashlib.sha256(raw).hexdigest(),
                            "--ssh-public-key", str(key_file), "--resource-class", NODES["uefi"][1],
                            "--hostname", "metal-uefi", "--wait", str(PHASE_TIMEOUT))
    try:
        _compute_ready(lab, nodes[bios]["uuid"])
        server = cloud.osc("server", "create", "--image", image["id"], "--flavor", "BM", "--key-name", "K",
                           "--config-drive", "true", "--user-data", str(user_data), "--wait", "metal-bios")
    except BaseException:
        deploying.kill()
        deploying.communicate()
        raise
    times["server_create_s"] = round(time.monotonic() - requested, 1)
    _finished(lab, deploying)
    times["deploy_both_to_active_s"] = round(time.monotonic() - requested, 1)
    assert server["status"] == "ACTIVE"
    assert server["OS-EXT-SRV-ATTR:hypervisor_hostname"] == nodes[bios]["uuid"]
    # Compute names the server and its key; metalsmith the node (its host name apart) and key "0".
    expected = {bios: (server["id"], "metal-bios", {"K": PUBLIC_KEY}),
                uefi: (nodes[uefi]["uuid"], uefi, {"0": PUBLIC_KEY})}

    for name, node in nodes.items():
        response = cloud.api("GET", f"/baremetal/v1/nodes/{name}")
        deployed = response.json()
        assert (deployed["provision_state"], deployed["last_error"], deployed["power_state"]) == (
            "active", None, "power on")
        if name == bios:
            assert deployed["instance_uuid"] == server["id"]
        else:
            allocation = cloud.api("GET", f"/baremetal/v1/allocations/{deployed['allocation_uuid']}").json()
            assert (allocation["name"], allocation["resource_class"]) == ("metal-uefi", NODES["uefi"][1])
        # The config drive is never shown.
        assert deployed["instance_info"]["configdrive"] == "******"
        assert PUBLIC_KEY.split()[1] not in response.text
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

    labels = {expected[name][0]: name for name in nodes}
    deadline = time.monotonic() + PHASE_TIMEOUT
    while not set(labels) <= set(callbacks.received):
        if time.monotonic() > deadline:
            raise AssertionError(f"no report from {set(labels) - set(callbacks.received)}\n{_diagnostics(lab)}")
        time.sleep(0.5)
    times["deploy_request_to_reported_from_disk_s"] = round(time.monotonic() - requested, 1)
    for label, name in labels.items():
        report = callbacks.received[label]
        meta_data = json.loads(bytes.fromhex(report["meta_data"]))
        uuid, hostname, keys = expected[name]
        # Compute's config drive names the server, metalsmith's the node; the key is the one each was given.
        assert meta_data["uuid"] == uuid
        assert meta_data["name"] == hostname
        if name == uefi:
            assert meta_data["hostname"] == "metal-uefi"
        assert {key_name: key.strip() for key_name, key in meta_data["public_keys"].items()} == keys
        # The config drive is a partition of the disk the image went to, after the image's own.
        assert report["partition"] == "/dev/vda2"
        machine = nodes[name]["machine"]
        assert machines.state(machine) == "running"
        # One agent boot served inspection, cleaning and deployment; the agent powered the machine off itself
        # (a BMC's power-off leaves no such line) before the disk boot began.
        console = machines.serial(machine)
        before_disk = console[:console.index("CORRAL-DEPLOYED")]
        assert _agent_boots(before_disk) == 1
        assert "reboot: Power down" in before_disk

    # ---------------------------------------------------------- undeploy, both at once
    data_offset = _first_data_offset(raw)
    requested = time.monotonic()
    undeploying = _metalsmith(cloud, "undeploy", nodes[uefi]["uuid"], "--wait", str(PHASE_TIMEOUT))
    try:
        cloud.osc("server", "delete", "--wait", server["id"], json_output=False)
    except BaseException:
        undeploying.kill()
        undeploying.communicate()
        raise
    _finished(lab, undeploying)
    available = wait_all(lab, list(nodes), "available", ("clean failed", "error"))
    times["undeploy_with_cleaning_to_available_s"] = {name: round(available[name] - requested, 1) for name in nodes}
    assert cloud.api("GET", f"/compute/v2.1/servers/{server['id']}").status_code == 404
    assert cloud.allocations(server["id"]) == {}
    for name, node in nodes.items():
        machine = node["machine"]
        cleaned = cloud.node(name)
        assert (cleaned["last_error"], cleaned["instance_info"], cleaned["instance_uuid"]) == (None, {}, None)
        assert cleaned["allocation_uuid"] is None
        # Fast track: the agent booted for cleaning runs on, from memory.
        assert cleaned["power_state"] == "power on"
        assert machines.state(machine) == "running"
        cd = emulator.cd(machine["uuid"])
        assert not cd["Inserted"] and not cd.get("Image")
        # erase_devices_metadata ran, and only it: the partition tables are gone, the data is still there.
        console = machines.serial(machine)
        after_disk = console[console.index("CORRAL-DEPLOYED"):]
        assert _agent_boots(after_disk) == 1
        assert "erase_devices_metadata" in after_disk
        assert machines.read_disk(machine, 0, 512)[510:] != b"\x55\xaa"
        assert machines.read_disk(machine, 0, 65536, data_offset) == raw[data_offset:data_offset + 65536]

    times["test_s"] = round(time.monotonic() - started, 1)
    times["timeline"] = lab["timeline"]
    run_dir = Path(LAB_DIR, "run")
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "direct-lab-times.json").write_text(json.dumps(times, indent=1, sort_keys=True) + "\n")
    print(json.dumps(times, sort_keys=True))
