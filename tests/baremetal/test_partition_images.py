"""Partition images through the direct deploy: what is refused, what the agent is asked, what lands on the disk.

A fake agent (test_direct_deploy.FakeAgent) shows the requests; the real
ironic-python-agent on a BIOS test machine (agent_support.TestMachine, a
loop device as its disk) partitions the disk, writes the image to the root
partition, formats swap, writes the config drive and, asked for the boot
loader, runs the image's own installer in a chroot of the root partition
(agent_support.partition_image).  The UEFI path (an EFI system partition the
agent formats and mounts) needs vfat in the host's kernel and is shown with
the fake agent only.
"""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pycdlib
import pytest

from tests.baremetal.agent_support import (
    BOOTLOADER_LOG,
    PARTITION_IMAGE_FILE,
    PARTITION_TOOLS,
    ImageServer,
    TestMachine,
    partition_image,
    raw_image,
    require_machines,
)
from tests.baremetal.support import faultstring, wait_for, wait_for_state
from tests.baremetal.test_agent import PAYLOAD, AgentServer, enroll, wait_settled
# The same fake agent, image server and test machines as the direct deploy's tests.
from tests.baremetal.test_direct_deploy import (  # noqa: F401 - fixtures
    FakeAgent,
    agent,
    available,
    deploy_through,
    images,
    machines,
)
from tests.baremetal.test_provisioning import provision
from tests.support.databases import DatabaseFactory

# What is tested is the deploy's wire and the agent's work, not storage: one database backend.
pytestmark = pytest.mark.backends("first")

MIB = 1024 * 1024
# A root of 1 GiB (root_gb is whole GiBs), swap and the config drive (sparse).
DISK_SIZE = 1100 * MIB
ROOT_UUID = "6f1c2e9a-0b7d-4c1e-9a55-3d2b7c8e4f10"
PUBLIC_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGy0yJ7z+Hn1dxR2bt2S0t0bq2K8TjG0XWd1yQyY8w0A partition"


@pytest.fixture
def server(database_factory: DatabaseFactory, tmp_path: Path) -> Iterator[AgentServer]:
    running = AgentServer(database_factory, tmp_path / "corral",
                          groups={"agent": {"command_wait_interval": 0.2, "enable_bios_bootloader_install": True}},
                          deploy_callback_timeout=90)
    yield running
    running.stop()


def set_instance_info(client: Any, name: str, **info: Any) -> None:
    patch = [{"op": "add", "path": "/instance_info", "value": info}]
    assert client.patch(f"/v1/nodes/{name}", json=patch).status_code == 200


def image_fields(images: ImageServer, name: str, data: bytes) -> dict[str, Any]:
    url, sha256 = images.publish(name, data)
    return {"image_source": url, "image_os_hash_algo": "sha256", "image_os_hash_value": sha256,
            "image_disk_format": "raw"}


# ---------------------------------------------------------------- refusals


def test_partition_images_refused_as_upstream_refuses_them(server: AgentServer, images: ImageServer) -> None:
    client = server.client
    available(client, "refused", "52:54:00:00:e1:01")
    fields = image_fields(images, "refused.img", raw_image(PAYLOAD))

    # An image_type upstream does not know: 400 when the deployment is asked for, nothing changed.
    set_instance_info(client, "refused", **fields, image_type="lvm", root_gb=1)
    response = provision(client, "refused", "active")
    assert response.status_code == 400
    assert faultstring(response).endswith('Invalid image_type "lvm", valid are partition, whole-disk')
    assert client.get("/v1/nodes/refused/validate").json()["deploy"]["result"] is False
    unchanged = client.get("/v1/nodes/refused").json()
    assert unchanged["provision_state"] == "available" and unchanged["instance_info"]["image_type"] == "lvm"

    # A partition image (a kernel and ramdisk say so) without root_gb: upstream's validation passes and
    # preparing the deployment fails, before the ramdisk boots; nothing of the layout is recorded.
    partition = {**fields, "kernel": "http://127.0.0.1:9/vmlinuz", "ramdisk": "http://127.0.0.1:9/initrd"}
    for extra, error in (({}, "Some parameters were missing in node's instance_info. Missing are: ['root_gb']"),
                         ({"root_gb": "big"}, "Invalid parameter root_gb: big is not an integer value."),
                         ({"root_gb": 1, "swap_mb": "lots"}, "Invalid parameter swap_mb: lots is not an integer "
                                                            "value.")):
        set_instance_info(client, "refused", **partition, **extra)
        assert client.get("/v1/nodes/refused/validate").json()["deploy"]["result"] is True
        assert provision(client, "refused", "active").status_code == 202
        failed = wait_for_state(client, "refused", "deploy failed")
        assert failed["last_error"].endswith(error), failed["last_error"]
        assert failed["power_state"] == "power off"
        assert failed["instance_info"] == {**partition, **extra}
        assert "is_whole_disk_image" not in failed["driver_internal_info"]
        assert "agent_secret_token" not in failed["driver_internal_info"]
        # Undeploy: available again, for the next case.
        assert provision(client, "refused", "deleted").status_code == 202
        wait_for_state(client, "refused", "available")


# ------------------------------------------------------ what the agent is asked


def test_the_agent_gets_the_partition_layout_and_installs_the_boot_loader(
        server: AgentServer, agent: FakeAgent, images: ImageServer) -> None:
    client = server.client
    available(client, "part", "52:54:00:00:e1:02", properties={"capabilities": "boot_mode:bios"})
    fields = image_fields(images, "part.img", b"a partition image")
    set_instance_info(client, "part", **fields, image_type="partition", root_gb="2", swap_mb=64, ephemeral_gb=1,
                      capabilities={"disk_label": "gpt"})
    agent.results["standby.get_partition_uuids"] = {"root uuid": ROOT_UUID, "efi system partition uuid": None,
                                                    "partitions": {"root": "/dev/sda4"}}
    deployed = deploy_through(server, agent, "part", "52:54:00:00:e1:02")
    assert (deployed["last_error"], deployed["power_state"]) == (None, "power on")

    (command,) = agent.named("standby.prepare_image")
    image_info = command["params"]["image_info"]
    expected = {"image_type": "partition", "root_gb": 2, "root_mb": 2048, "swap_mb": 64, "ephemeral_mb": 1024,
                "ephemeral_format": "ext4", "preserve_ephemeral": False, "kernel": None, "ramdisk": None,
                "configdrive": None, "deploy_boot_mode": "bios", "boot_option": "local", "disk_label": "gpt"}
    assert {key: image_info.get(key) for key in expected} == expected
    assert image_info["urls"] == [fields["image_source"]]
    # Then, as upstream's configure_local_boot: the partition UUIDs, and the boot loader on the root partition.
    (bootloader,) = agent.named("image.install_bootloader")
    assert bootloader["params"] == {"root_uuid": ROOT_UUID, "efi_system_part_uuid": None,
                                    "prep_boot_part_uuid": None, "target_boot_mode": "bios"}
    names = [command["name"] for command in agent.commands]
    assert names.index("standby.get_partition_uuids") < names.index("image.install_bootloader")
    assert deployed["driver_internal_info"]["root_uuid_or_disk_id"] == ROOT_UUID
    assert deployed["driver_internal_info"]["is_whole_disk_image"] is False
    assert deployed["instance_info"]["image_type"] == "partition"

    # Undeployed: what described the instance goes with it.
    assert provision(client, "part", "deleted").status_code == 202
    torn_down = wait_for_state(client, "part", "available")
    assert not {"root_uuid_or_disk_id", "is_whole_disk_image", "deploy_boot_mode"} & set(
        torn_down["driver_internal_info"])


def test_a_boot_loader_the_agent_cannot_install_fails_the_deploy(server: AgentServer, agent: FakeAgent,
                                                                 images: ImageServer) -> None:
    client = server.client
    node = available(client, "noboot", "52:54:00:00:e1:03")
    set_instance_info(client, "noboot", **image_fields(images, "noboot.img", b"partition"), image_type="partition",
                      root_gb=1)
    agent.results["standby.get_partition_uuids"] = {"root uuid": ROOT_UUID, "efi system partition uuid": "AB12-CD34"}
    agent.failing["image.install_bootloader"] = {"type": "CommandExecutionError", "details": "no grub here"}
    response = client.put("/v1/nodes/noboot/states/provision", json={"target": "active"})
    assert response.status_code == 202
    wait_for_state(client, "noboot", "wait call-back")
    token = server.agent_api.get("/v1/lookup?addresses=52:54:00:00:e1:03").json()["config"]["agent_token"]
    beat = {"callback_url": agent.url, "agent_token": token, "agent_version": "13.0.0"}
    assert server.agent_api.post("/v1/heartbeat/noboot", json=beat).status_code == 202
    wait_for(lambda: agent.named("standby.prepare_image"))
    # The image is written: the next heartbeat moves on to the boot loader.
    assert server.agent_api.post("/v1/heartbeat/noboot", json=beat).status_code == 202
    failed = wait_for_state(client, "noboot", "deploy failed")
    assert failed["last_error"].endswith(
        f"Failed to install a bootloader when deploying node {node['uuid']}: no grub here")
    # UEFI ([deploy] default_boot_mode): the EFI system partition the agent made is named.
    (bootloader,) = agent.named("image.install_bootloader")
    assert bootloader["params"]["efi_system_part_uuid"] == "AB12-CD34"
    assert bootloader["params"]["target_boot_mode"] == "uefi"
    assert failed["power_state"] == "power off"


# ---------------------------------------------------------- the real agent


def _blkid(device: str) -> dict[str, str]:
    out = subprocess.run(["blkid", "-p", "-o", "export", device], capture_output=True, text=True).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def _deploy_on_a_machine(server: AgentServer, images: ImageServer, tmp_path: Path, machine: TestMachine,
                         end: str) -> tuple[dict[str, Any], bytes]:
    """A BIOS machine deploys a partition image with swap and a config drive; the node once settled in ``end``."""
    client = server.client
    name = machine.name
    enroll(client, name, machine.mac, automated_clean=False, properties={"capabilities": "boot_mode:bios"})
    assert provision(client, name, "provide").status_code == 202
    wait_for_state(client, name, "available")
    image = partition_image(tmp_path / "image")
    # No image_type: the kernel and ramdisk make it a partition image, as upstream decides.
    set_instance_info(client, name, **image_fields(images, "root.img", image), root_gb=1, swap_mb=16,
                      kernel=f"{images.url}/vmlinuz", ramdisk=f"{images.url}/initrd")
    configdrive = {"meta_data": {"public_keys": {"0": PUBLIC_KEY}, "hostname": f"{name}.example.com"}}
    assert provision(client, name, "active", configdrive=configdrive).status_code == 202
    wait_for_state(client, name, "wait call-back")
    machine.power_on(server.url)
    node = wait_settled(client, name, end, machine)
    machine.power_off()
    return node, image


def _partitions(disk: str) -> tuple[str, list[list[str]]]:
    """The disk's partition table type and its partitions (number, start, end, size, fs, name, flags), in MiB."""
    lines = subprocess.run(["parted", "-m", "-s", disk, "unit", "MiB", "print"], capture_output=True, text=True,
                           check=True).stdout.splitlines()
    return lines[1].split(":")[5], [line.rstrip(";").split(":") for line in lines[2:]]


def _read_root(root: str, path: str) -> bytes:
    """A file of the ext4 root partition, read without mounting it."""
    return subprocess.run(["debugfs", "-R", f"cat {path}", root], capture_output=True, check=True).stdout


def _meta_data(config: str) -> dict[str, Any]:
    iso = pycdlib.PyCdlib()
    with open(config, "rb") as partition:
        iso.open_fp(io.BytesIO(partition.read(4 * MIB)))
        extracted = io.BytesIO()
        iso.get_file_from_iso_fp(extracted, rr_path="/openstack/latest/meta_data.json")
        iso.close()
    return dict(json.loads(extracted.getvalue()))


@pytest.mark.slow
def test_the_real_agent_partitions_the_disk_and_the_image_gets_its_boot_loader(
        server: AgentServer, images: ImageServer, tmp_path: Path, machines: list[TestMachine]) -> None:
    require_machines(PARTITION_TOOLS)
    machine = TestMachine(tmp_path / "machines", "p1", "52:54:00:00:e1:10", disk_size=DISK_SIZE, boot_mode="bios")
    machines.append(machine)
    node, image = _deploy_on_a_machine(server, images, tmp_path, machine, "active")
    assert node["last_error"] is None and node["power_state"] == "power on"

    # The disk, as the agent left it (BIOS: msdos): swap, the config drive, the root last and bootable.
    disk = str(machine.disk)
    label, partitions = _partitions(disk)
    assert label == "msdos"
    assert [(p[0], p[3]) for p in partitions] == [("1", "16.0MiB"), ("2", partitions[1][3]), ("3", "1024MiB")], \
        partitions
    assert "boot" in partitions[2][6]
    swap, config, root = (f"{disk}p{number}" for number in range(1, 4))
    assert (_blkid(swap)["TYPE"], _blkid(swap)["LABEL"]) == ("swap", "swap1")
    assert (_blkid(config)["TYPE"], _blkid(config)["LABEL"]) == ("iso9660", "config-2")
    assert _meta_data(config)["public_keys"] == {"0": PUBLIC_KEY}
    root_id = _blkid(root)
    assert (root_id["TYPE"], root_id["LABEL"]) == ("ext4", "corral-root")
    # The root partition holds the image's files.
    assert _read_root(root, f"/{PARTITION_IMAGE_FILE[0]}") == PARTITION_IMAGE_FILE[1]
    # The agent found the root partition by the UUID the conductor gave it, and ran the image's boot loader
    # installer for the machine's disk in a chroot of it, then its grub-mkconfig.
    assert _read_root(root, BOOTLOADER_LOG).decode().splitlines() == [
        f"grub-install {disk}", "grub-mkconfig -o /boot/grub/grub.cfg"]
    assert _read_root(root, "/boot/grub/grub.cfg").startswith(b"# made by the image's grub-mkconfig")

    # What upstream records.
    internal, info = node["driver_internal_info"], node["instance_info"]
    assert internal["root_uuid_or_disk_id"] == root_id["UUID"]
    assert internal["is_whole_disk_image"] is False and internal["deploy_boot_mode"] == "bios"
    assert (info["image_type"], info["root_mb"], info["swap_mb"], info["ephemeral_mb"]) == ("partition", 1024, 16, 0)
    assert hashlib.sha256(image).hexdigest() == info["image_os_hash_value"]
    # The agent downloaded the image; nobody fetched the kernel or ramdisk (the disk boots its own loader).
    assert images.requests == ["GET /root.img"]
    # The machine's disk is free again: nothing the agent mounted outlived it.
    assert subprocess.run(["findmnt", "--source", root], capture_output=True).returncode == 1


@pytest.fixture
def default_server(database_factory: DatabaseFactory, tmp_path: Path) -> Iterator[AgentServer]:
    running = AgentServer(database_factory, tmp_path / "corral-defaults", groups={"agent": {
        "command_wait_interval": 0.2}}, deploy_callback_timeout=90)
    yield running
    running.stop()


@pytest.mark.slow
def test_by_default_the_agent_refuses_to_install_a_boot_loader(
        default_server: AgentServer, images: ImageServer, tmp_path: Path, machines: list[TestMachine]) -> None:
    """Upstream's default since CVE-2026-43003 ([agent] enable_bios_bootloader_install off): the image is
    written, the boot loader refused, the deployment failed."""
    require_machines(PARTITION_TOOLS)
    machine = TestMachine(tmp_path / "machines", "p2", "52:54:00:00:e1:11", disk_size=DISK_SIZE, boot_mode="bios")
    machines.append(machine)
    node, _ = _deploy_on_a_machine(default_server, images, tmp_path, machine, "deploy failed")
    assert f"Failed to install a bootloader when deploying node {node['uuid']}: " in node["last_error"]
    assert ("Install of legacy BIOS bootloaders disabled by CONF.enable_bios_bootloader_install as part of "
            "CVE-2026-43003 mitigation.") in node["last_error"]
    assert node["power_state"] == "power off"
    assert "agent_secret_token" not in node["driver_internal_info"]
    root = f"{machine.disk}p3"
    assert _read_root(root, f"/{PARTITION_IMAGE_FILE[0]}") == PARTITION_IMAGE_FILE[1]
    assert _read_root(root, BOOTLOADER_LOG) == b""
