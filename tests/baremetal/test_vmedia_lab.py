"""End to end: QEMU machines behind sushy-tools' Redfish emulator, deployed with virtual media.

Four virtual machines (libvirt, QEMU's TCG emulator; three BIOS, one UEFI)
are enrolled as ``redfish`` nodes with ``redfish-virtual-media`` +
``ramdisk`` and deployed at the same time: one from an ISO image this test
builds given by URL (Corral only verifies and publishes it), one from the
same kind of ISO uploaded to the Image service and named by its image
UUID, two from a kernel and a ramdisk that Corral makes into an ISO
(isolinux for BIOS, GRUB for UEFI) with the node's
``ramdisk_kernel_arguments``.  The ramdisk's own init proves each boot: it
calls this test back over the guest's network with the machine's SMBIOS
UUID and its kernel command line, and writes a line on the serial console.
(The agent's ISOs, built the same way, boot in test_direct_lab.py.)

``tools/baremetal-lab`` installs and starts what this needs (libvirtd, a
storage pool, the kernel and busybox ramdisk); without it the test skips,
or fails under CI (``CORRAL_TEST_REQUIRE_BACKENDS=1``).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.baremetal.lab_support import Callbacks, Machines, read_lab
from tests.baremetal.support import wait_for, wait_for_state
from tests.baremetal.test_provisioning import provision
from tests.baremetal.vmedia_support import Emulator, ImageServer
from tests.image.conftest import ImageServer as ImageService
from tests.image.conftest import create, upload
from tests.support.databases import DatabaseFactory

# Emulated machines are slow when the host is busy: generous limits (a passing run takes about a minute).
pytestmark = [pytest.mark.backends("first"), pytest.mark.timeout(900)]

# Each guest boot takes 10 to 15 s on TCG when the host is idle; four at once on two cores, with room to spare.
BOOT_TIMEOUT = 480


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    settings = read_lab()
    machines = Machines(settings, ["bios", "bios", "uefi", "bios"])
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
        callbacks.stop()
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


def test_qemu_machines_boot_isos_and_a_kernel_with_ramdisk_from_virtual_media(baremetal, lab, image_service) -> None:
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

    # An ISO in the Image service, private to the node's owner.
    glance_iso = build_test_iso(settings, os.path.join(lab["tmp"], "image-service"),
                                f"console=ttyS0 corral_callback={callbacks.url_for_guest('glance-iso')}")
    project = image_service.client("demo")
    image = create(project, name="live", disk_format="iso", container_format="bare", visibility="private")
    assert upload(project, image["id"], glance_iso).status_code == 204

    # node name -> (machine, boot mode, instance_info)
    nodes = {
        # An ISO Corral did not build: verified, cached and published as it is.
        "iso": (machines.machines[0], "bios", {
            "boot_iso": images.add("/live.iso", iso), "image_os_hash_algo": "sha256",
            "image_os_hash_value": hashlib.sha256(iso).hexdigest()}),
        # A kernel and a ramdisk: Corral builds an isolinux ISO (BIOS) and a GRUB one (UEFI).
        "kernel": (machines.machines[1], "bios", kernel_and_ramdisk("kernel")),
        "kernel-uefi": (machines.machines[2], "uefi", kernel_and_ramdisk("kernel-uefi")),
        # The Image service's ISO, named by its UUID: fetched, verified and published.
        "glance-iso": (machines.machines[3], "bios", {"boot_iso": image["id"]}),
    }
    for name, (machine, mode, instance_info) in nodes.items():
        response = client.post("/v1/nodes", json={
            "driver": "redfish", "name": name, "owner": "demo",
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
    info = client.get("/v1/nodes/glance-iso").json()["instance_info"]
    assert (info["image_disk_format"], info["image_container_format"]) == ("iso", "bare")
    assert (info["image_os_hash_algo"], info["image_os_hash_value"]) == (
        "sha512", hashlib.sha512(glance_iso).hexdigest())
    # The BMC fetched the conductor's verified copy from its file server.
    glance_node = client.get("/v1/nodes/glance-iso").json()
    published = f"{baremetal.conductor.file_server_url}/redfish/boot-{glance_node['uuid']}.iso"
    assert emulator.cd(machines.machines[3]["uuid"])["Image"] == published

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
