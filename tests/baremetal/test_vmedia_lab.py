"""End to end: QEMU machines behind sushy-tools' Redfish emulator, deployed with virtual media.

Three virtual machines (libvirt, QEMU's TCG emulator; two BIOS, one UEFI)
are enrolled as ``redfish`` nodes with ``redfish-virtual-media`` +
``ramdisk`` and deployed at the same time: one from an ISO image this test
builds (Corral only verifies and publishes it), two from a kernel and a
ramdisk that Corral makes into an ISO (isolinux for BIOS, GRUB for UEFI)
with the node's ``ramdisk_kernel_arguments``.  The
ramdisk's own init proves each boot: it calls this test back over the
guest's network with the machine's SMBIOS UUID and its kernel command line,
and writes a line on the serial console.  Then one of the machines boots an
ISO the test uploaded to the Image service, named by its image UUID.

``tools/baremetal-lab`` installs and starts what this needs (libvirtd, a
storage pool, the kernel and busybox ramdisk); without it the test skips,
or fails under CI (``CORRAL_TEST_REQUIRE_BACKENDS=1``).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import threading
import urllib.parse
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from corral.core.server import ThreadedServer
from tests.baremetal.support import wait_for, wait_for_state
from tests.baremetal.test_provisioning import provision
from tests.baremetal.vmedia_support import Emulator, ImageServer, require
from tests.image.conftest import ImageServer as ImageService
from tests.image.conftest import create, upload
from tests.support.databases import DatabaseFactory

# Emulated machines are slow when the host is busy: generous limits (a passing run takes 1 to 2 minutes).
pytestmark = [pytest.mark.backends("first"), pytest.mark.timeout(900)]

LAB_DIR = os.environ.get("CORRAL_LAB_DIR", "/var/tmp/corral-baremetal-lab")
# Each guest boot takes 10 to 15 s on TCG when the host is idle; three at once on two cores, with room to spare.
BOOT_TIMEOUT = 480


def read_lab() -> dict[str, str]:
    path = os.path.join(LAB_DIR, "lab.env")
    require(os.path.exists(path), f"the bare metal lab is not set up ({path} is missing)")
    with open(path) as handle:
        lab = dict(line.strip().split("=", 1) for line in handle if "=" in line)
    for tool in ("virsh", "xorriso"):
        require(shutil.which(tool) is not None, f"{tool} is not installed")
    for key in ("CORRAL_LAB_KERNEL", "CORRAL_LAB_RAMDISK", "CORRAL_LAB_ISOLINUX", "CORRAL_LAB_LDLINUX"):
        require(os.path.exists(lab[key]), f"{lab[key]} is missing")
    try:
        import libvirt  # noqa: F401
    except ImportError:
        require(False, "libvirt-python is not installed (sushy-tools' libvirt driver needs it)")
    probe = subprocess.run(["virsh", "-c", lab["CORRAL_LAB_LIBVIRT_URI"], "pool-info", lab["CORRAL_LAB_POOL"]],
                           capture_output=True, text=True, check=False)
    require(probe.returncode == 0, f"libvirtd or the lab's storage pool is not available: {probe.stderr.strip()}")
    return lab


class Machines:
    """Libvirt domains named corral-lab-*, removed with the volumes sushy-tools uploaded for them."""

    def __init__(self, lab: dict[str, str], firmwares: list[str]) -> None:
        self.uri = lab["CORRAL_LAB_LIBVIRT_URI"]
        self.pool = lab["CORRAL_LAB_POOL"]
        self.vm_dir = lab["CORRAL_LAB_VM_DIR"]
        self.volumes_before = set(self._volumes())
        prefix = f"corral-lab-{uuid.uuid4().hex[:8]}"
        self.machines: list[dict[str, str]] = []
        try:
            for index, firmware in enumerate(firmwares):
                machine = {"name": f"{prefix}-{index}", "uuid": str(uuid.uuid4()), "firmware": firmware,
                           "serial": os.path.join(self.vm_dir, f"{prefix}-{index}.serial.log")}
                self._define(machine)
                self.machines.append(machine)
        except Exception:
            self.remove()
            raise

    def virsh(self, *args: str) -> str:
        result = subprocess.run(["virsh", "-q", "-c", self.uri, *args], capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise RuntimeError(f"virsh {' '.join(args)}: {result.stderr.strip()}")
        return result.stdout

    def _volumes(self) -> list[str]:
        return [line.split()[0] for line in self.virsh("vol-list", self.pool).splitlines() if line.strip()]

    def _define(self, machine: dict[str, str]) -> None:
        # TCG (type 'qemu'): this machine has no usable hardware virtualisation.  An empty CD drive is
        # needed before the BMC can insert media; the serial console goes to a file the test reads.
        if machine["firmware"] == "uefi":
            # OVMF chosen by libvirt, secure boot off; GRUB under OVMF needs more than 256 MiB.
            memory, bus, cd = 512, "sata", "sdb"
            os_xml = ("<os firmware='efi'><type arch='x86_64' machine='q35'>hvm</type><firmware>"
                      "<feature enabled='no' name='secure-boot'/><feature enabled='no' name='enrolled-keys'/>"
                      "</firmware><boot dev='hd'/></os>")
        else:
            memory, bus, cd = 256, "ide", "hdc"
            os_xml = "<os><type arch='x86_64' machine='pc'>hvm</type><boot dev='hd'/></os>"
        xml = f"""<domain type='qemu'>
  <name>{machine['name']}</name><uuid>{machine['uuid']}</uuid>
  <memory unit='MiB'>{memory}</memory><vcpu>1</vcpu>
  {os_xml}
  <features><acpi/><apic/></features>
  <on_poweroff>destroy</on_poweroff><on_reboot>restart</on_reboot><on_crash>destroy</on_crash>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <disk type='file' device='cdrom'><driver name='qemu' type='raw'/><target dev='{cd}' bus='{bus}'/><readonly/></disk>
    <interface type='user'><model type='e1000'/></interface>
    <serial type='file'><source path='{machine['serial']}' append='on'/><target port='0'/></serial>
    <console type='file'><source path='{machine['serial']}' append='on'/><target type='serial' port='0'/></console>
    <video><model type='none'/></video><memballoon model='none'/>
  </devices>
</domain>"""
        path = os.path.join(self.vm_dir, f"{machine['name']}.xml")
        with open(path, "w") as handle:
            handle.write(xml)
        self.virsh("define", path)

    def state(self, machine: dict[str, str]) -> str:
        return self.virsh("domstate", machine["name"]).strip()

    def serial(self, machine: dict[str, str]) -> str:
        try:
            with open(machine["serial"], errors="replace") as handle:
                return handle.read()
        except FileNotFoundError:
            return ""

    def remove(self) -> None:
        for machine in self.machines:
            subprocess.run(["virsh", "-q", "-c", self.uri, "destroy", machine["name"]], capture_output=True,
                           check=False)
            # (UEFI machines refuse a plain undefine)
            subprocess.run(["virsh", "-q", "-c", self.uri, "undefine", "--nvram", machine["name"]],
                           capture_output=True, check=False)
            for suffix in (".xml", ".serial.log"):
                path = os.path.join(self.vm_dir, machine["name"] + suffix)
                if os.path.exists(path):
                    os.unlink(path)
        # Ejecting leaves the uploaded image in the pool.
        for volume in set(self._volumes()) - self.volumes_before:
            subprocess.run(["virsh", "-q", "-c", self.uri, "vol-delete", volume, "--pool", self.pool],
                           capture_output=True, check=False)


class Callbacks:
    """Where the guests' init reports: GET /<label>?uuid=...&cmdline=..."""

    def __init__(self) -> None:
        self.received: dict[str, dict[str, str]] = {}
        self._lock = threading.Lock()
        self.server = ThreadedServer(self._app).start()

    def _app(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        query = urllib.parse.parse_qs(environ.get("QUERY_STRING", ""))
        with self._lock:
            self.received[environ["PATH_INFO"].strip("/")] = {key: values[0] for key, values in query.items()}
        start_response("200 OK", [("Content-Length", "3")])
        return [b"ok\n"]

    def url_for_guest(self, label: str) -> str:
        # QEMU's user-mode network: the guest reaches the host's loopback as 10.0.2.2.
        return f"http://10.0.2.2:{self.server.port}/{label}"


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    settings = read_lab()
    machines = Machines(settings, ["bios", "bios", "uefi"])
    callbacks = Callbacks()
    images = ImageServer()
    emulator = None
    try:
        allowed = ", ".join(repr(m["uuid"]) for m in machines.machines)
        emulator = Emulator(str(tmp_path_factory.mktemp("redfish-lab")), (
            f"SUSHY_EMULATOR_LIBVIRT_URI = {settings['CORRAL_LAB_LIBVIRT_URI']!r}\n"
            f"SUSHY_EMULATOR_STORAGE_POOL = {settings['CORRAL_LAB_POOL']!r}\n"
            # Only this test's machines answer (others on the host are 404).
            f"SUSHY_EMULATOR_ALLOWED_INSTANCES = [{allowed}]\n"
        ))
        yield {"settings": settings, "machines": machines, "callbacks": callbacks, "images": images,
               "emulator": emulator, "tmp": str(tmp_path_factory.mktemp("lab-images"))}
    finally:
        if emulator is not None:
            emulator.stop()
        images.stop()
        callbacks.server.stop()
        machines.remove()


def build_test_iso(settings: dict[str, str], directory: str, kernel_args: str) -> bytes:
    """A BIOS-bootable isolinux ISO of the lab's kernel and ramdisk, made here, not by Corral."""
    tree = os.path.join(directory, "tree", "isolinux")
    os.makedirs(tree, exist_ok=True)
    for source, name in ((settings["CORRAL_LAB_ISOLINUX"], "isolinux.bin"),
                         (settings["CORRAL_LAB_LDLINUX"], "ldlinux.c32"),
                         (settings["CORRAL_LAB_KERNEL"], "vmlinuz"), (settings["CORRAL_LAB_RAMDISK"], "initrd.gz")):
        shutil.copyfile(source, os.path.join(tree, name))
    with open(os.path.join(tree, "isolinux.cfg"), "w") as handle:
        handle.write("DEFAULT live\nPROMPT 0\nTIMEOUT 0\nLABEL live\n  KERNEL /isolinux/vmlinuz\n"
                     f"  INITRD /isolinux/initrd.gz\n  APPEND {kernel_args}\n")
    output = os.path.join(directory, "live.iso")
    subprocess.run(["xorriso", "-as", "mkisofs", "-quiet", "-r", "-J", "-V", "LIVETEST", "-b", "isolinux/isolinux.bin",
                    "-c", "isolinux/boot.cat", "-no-emul-boot", "-boot-load-size", "4", "-boot-info-table",
                    "-o", output, os.path.dirname(tree)], check=True, capture_output=True)
    with open(output, "rb") as handle:
        return handle.read()


def test_qemu_machines_boot_an_iso_and_a_kernel_with_ramdisk_from_virtual_media(baremetal, lab) -> None:
    client = baremetal.client()
    settings, machines, callbacks, images, emulator = (
        lab["settings"], lab["machines"], lab["callbacks"], lab["images"], lab["emulator"])
    marker = uuid.uuid4().hex

    iso = build_test_iso(settings, lab["tmp"], f"console=ttyS0 corral_callback={callbacks.url_for_guest('iso')}")
    with open(settings["CORRAL_LAB_KERNEL"], "rb") as kernel, open(settings["CORRAL_LAB_RAMDISK"], "rb") as ramdisk:
        kernel_url = images.add("/vmlinuz", kernel.read())
        ramdisk_url = images.add("/initrd.gz", ramdisk.read())

    def kernel_and_ramdisk(label: str) -> dict[str, str]:
        return {"kernel": kernel_url, "ramdisk": ramdisk_url,
                "ramdisk_kernel_arguments": f"console=ttyS0 corral_marker={marker} "
                                            f"corral_callback={callbacks.url_for_guest(label)}"}

    # node name -> (machine, boot mode, instance_info)
    nodes = {
        # An ISO Corral did not build: verified, cached and published as it is.
        "iso": (machines.machines[0], "bios", {
            "boot_iso": images.add("/live.iso", iso), "image_os_hash_algo": "sha256",
            "image_os_hash_value": hashlib.sha256(iso).hexdigest()}),
        # A kernel and a ramdisk: Corral builds an isolinux ISO (BIOS) and a GRUB one (UEFI).
        "kernel": (machines.machines[1], "bios", kernel_and_ramdisk("kernel")),
        "kernel-uefi": (machines.machines[2], "uefi", kernel_and_ramdisk("kernel-uefi")),
    }
    for name, (machine, mode, instance_info) in nodes.items():
        response = client.post("/v1/nodes", json={
            "driver": "redfish", "name": name,
            "boot_interface": "redfish-virtual-media", "deploy_interface": "ramdisk",
            "driver_info": {"redfish_address": emulator.url,
                            "redfish_system_id": f"/redfish/v1/Systems/{machine['uuid']}"},
            "properties": {"capabilities": f"boot_mode:{mode}"},
            "instance_info": instance_info,
        })
        assert response.status_code == 201, response.text
        assert provision(client, name, "manage").status_code == 202
    for name in nodes:
        assert wait_for_state(client, name, "manageable")["power_state"] == "power off"
        assert provision(client, name, "provide").status_code == 202
    for name in nodes:
        wait_for_state(client, name, "available")
        assert provision(client, name, "active").status_code == 202
    for name in nodes:
        node = wait_for_state(client, name, "active", timeout=120)
        assert (node["last_error"], node["power_state"]) == (None, "power on")

    # Each ramdisk's own init reports from inside its machine.
    def reported() -> bool:
        return set(nodes) <= set(callbacks.received)

    try:
        wait_for(reported, timeout=BOOT_TIMEOUT, interval=0.5)
    except AssertionError:
        logs = {m["name"]: machines.serial(m)[-1500:] for m in machines.machines}
        raise AssertionError(f"no boot report from {set(nodes) - set(callbacks.received)}: "
                             f"serial consoles {logs}; emulator log {emulator.log()[-1500:]}") from None
    for name, (machine, _, _) in nodes.items():
        assert callbacks.received[name]["uuid"].lower() == machine["uuid"], name
        assert "CORRAL-LAB-PAYLOAD booted" in machines.serial(machine)
        assert machines.state(machine) == "running"
        assert emulator.cd(machine["uuid"])["Inserted"] is True
    # Corral's ISOs carry [redfish] kernel_append_params and the node's ramdisk_kernel_arguments
    # (isolinux adds BOOT_IMAGE= before them and initrd= after them).
    for name in ("kernel", "kernel-uefi"):
        expected = ["nofb", "vga=normal", "console=ttyS0", f"corral_marker={marker}",
                    f"corral_callback={callbacks.url_for_guest(name)}"]
        assert " ".join(expected) in callbacks.received[name]["cmdline"], name
    assert emulator.system(machines.machines[2]["uuid"])["Boot"]["BootSourceOverrideMode"] == "UEFI"

    for name in nodes:
        assert provision(client, name, "deleted").status_code == 202
    for name in nodes:
        node = wait_for_state(client, name, "available", timeout=120)
        assert (node["last_error"], node["power_state"]) == (None, "power off")
    for machine in machines.machines:
        assert machines.state(machine) == "shut off"
        cd = emulator.cd(machine["uuid"])
        assert not cd["Inserted"] and not cd.get("Image")


@pytest.fixture
def image_service(baremetal, database_factory: DatabaseFactory, tmp_path: Path) -> Iterator[ImageService]:
    """The Image service (in-process, on the test's backend), where Bare Metal's [glance] endpoint points."""
    (tmp_path / "image").mkdir()
    server = ImageService(database_factory, tmp_path / "image")
    baremetal.conf.set_override("endpoint_override", server.url, group="glance")
    try:
        yield server
    finally:
        baremetal.conf.clear_override("endpoint_override", group="glance")
        server.stop()


def test_qemu_machine_boots_an_iso_from_the_image_service(baremetal, lab, image_service) -> None:
    client = baremetal.client()
    settings, machines, callbacks, emulator = lab["settings"], lab["machines"], lab["callbacks"], lab["emulator"]
    # A BIOS machine: the test above leaves it off with its CD ejected (a fresh one when run alone).
    machine = machines.machines[0]
    iso = build_test_iso(settings, os.path.join(lab["tmp"], "image-service"),
                         f"console=ttyS0 corral_callback={callbacks.url_for_guest('image-service')}")
    project = image_service.client("demo")
    image = create(project, name="live", disk_format="iso", container_format="bare", visibility="private")
    assert upload(project, image["id"], iso).status_code == 204

    response = client.post("/v1/nodes", json={
        "driver": "redfish", "name": "glance-iso", "owner": "demo",
        "boot_interface": "redfish-virtual-media", "deploy_interface": "ramdisk",
        "driver_info": {"redfish_address": emulator.url,
                        "redfish_system_id": f"/redfish/v1/Systems/{machine['uuid']}"},
        "properties": {"capabilities": "boot_mode:bios"},
        "instance_info": {"boot_iso": image["id"]},
    })
    assert response.status_code == 201, response.text
    node = response.json()
    assert provision(client, "glance-iso", "manage").status_code == 202
    wait_for_state(client, "glance-iso", "manageable")
    assert provision(client, "glance-iso", "provide").status_code == 202
    wait_for_state(client, "glance-iso", "available")
    assert provision(client, "glance-iso", "active").status_code == 202
    deployed = wait_for_state(client, "glance-iso", "active", timeout=120)
    assert (deployed["last_error"], deployed["power_state"]) == (None, "power on")
    info = deployed["instance_info"]
    assert (info["image_disk_format"], info["image_container_format"]) == ("iso", "bare")
    assert (info["image_os_hash_algo"], info["image_os_hash_value"]) == ("sha512", hashlib.sha512(iso).hexdigest())
    # The BMC fetched the conductor's verified copy from its file server.
    published = f"{baremetal.conductor.file_server_url}/redfish/boot-{node['uuid']}.iso"
    assert emulator.cd(machine["uuid"])["Image"] == published

    try:
        wait_for(lambda: "image-service" in callbacks.received, timeout=BOOT_TIMEOUT, interval=0.5)
    except AssertionError:
        raise AssertionError(f"no boot report: serial console {machines.serial(machine)[-1500:]}; "
                             f"emulator log {emulator.log()[-1500:]}") from None
    assert callbacks.received["image-service"]["uuid"].lower() == machine["uuid"]
    assert machines.state(machine) == "running"

    assert provision(client, "glance-iso", "deleted").status_code == 202
    undeployed = wait_for_state(client, "glance-iso", "available", timeout=120)
    assert (undeployed["last_error"], undeployed["power_state"]) == (None, "power off")
    assert machines.state(machine) == "shut off"
    cd = emulator.cd(machine["uuid"])
    assert not cd["Inserted"] and not cd.get("Image")
