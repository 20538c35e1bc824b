"""Ramdisk deployments over Redfish virtual media against sushy-tools' fake BMC, and their error paths.

The fake BMC really downloads what it is asked to insert (from the
conductor's file server), keeps boot and media settings, and applies
power changes 1 to 11 seconds after accepting them.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator

import pytest
import requests

from tests.baremetal.support import faultstring, wait_for_state
from tests.baremetal.test_provisioning import provision
from tests.baremetal.vmedia_support import (
    Emulator,
    ImageServer,
    require,
    sushy_tools_available,
)
from tests.support.ports import free_port

# The BMC and the image server are what is under test: the first database backend is enough.
pytestmark = pytest.mark.backends("first")

SYSTEM_ID = "9c3c1c8e-5a1e-4d8e-9a55-00000000c0de"
ISO_BYTES = b"CD001 not really an ISO, the fake BMC only stores it " * 100


@pytest.fixture(scope="module")
def fake_bmc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Emulator]:
    require(sushy_tools_available(), "sushy-tools is not installed")
    systems = (
        "SUSHY_EMULATOR_FAKE_DRIVER = True\n"
        f"SUSHY_EMULATOR_FAKE_SYSTEMS = [{{'uuid': {SYSTEM_ID!r}, 'name': 'vmedia-1', 'power_state': 'Off',"
        " 'nics': [{'mac': '52:54:00:00:c0:de', 'ip': '127.0.0.2'}]}]\n"
    )
    emulator = Emulator(str(tmp_path_factory.mktemp("fake-bmc")), systems)
    yield emulator
    emulator.stop()


@pytest.fixture
def bmc(fake_bmc: Emulator) -> Emulator:
    """The fake BMC with its CD ejected and its system off."""
    cd = fake_bmc.cd(SYSTEM_ID)
    if cd.get("Inserted") or cd.get("Image"):
        requests.post(f"{fake_bmc.url}/redfish/v1/Systems/{SYSTEM_ID}/VirtualMedia/Cd/Actions/"
                      "VirtualMedia.EjectMedia", json={}, timeout=10)
    if fake_bmc.system(SYSTEM_ID)["PowerState"] != "Off":
        requests.post(f"{fake_bmc.url}/redfish/v1/Systems/{SYSTEM_ID}/Actions/ComputerSystem.Reset",
                      json={"ResetType": "ForceOff"}, timeout=10)
    return fake_bmc


@pytest.fixture(scope="module")
def images() -> Iterator[ImageServer]:
    server = ImageServer()
    yield server
    server.stop()


def enroll(client, bmc, name="vm1", **instance_info):
    body = {
        "driver": "redfish", "name": name,
        "boot_interface": "redfish-virtual-media", "deploy_interface": "ramdisk",
        "driver_info": {"redfish_address": bmc.url, "redfish_system_id": f"/redfish/v1/Systems/{SYSTEM_ID}"},
        "properties": {"capabilities": "boot_mode:bios"},
    }
    response = client.post("/v1/nodes", json=body)
    assert response.status_code == 201, response.text
    node = response.json()
    assert provision(client, name, "manage").status_code == 202
    wait_for_state(client, name, "manageable")
    assert provision(client, name, "provide").status_code == 202
    wait_for_state(client, name, "available")
    if instance_info:
        patch = [{"op": "add", "path": f"/instance_info/{k}", "value": v} for k, v in instance_info.items()]
        assert client.patch(f"/v1/nodes/{name}", json=patch).status_code == 200
    return node


def published_file(baremetal, node) -> str:
    return os.path.join(baremetal.conf.deploy.http_root, "redfish", f"boot-{node['uuid']}.iso")


def test_boot_iso_deployed_verified_inserted_and_ejected_on_undeploy(baremetal, bmc, images) -> None:
    client = baremetal.client()
    url = images.add("/live.iso", ISO_BYTES)
    node = enroll(client, bmc, boot_iso=url, image_os_hash_algo="sha512",
                  image_os_hash_value=hashlib.sha512(ISO_BYTES).hexdigest())
    assert provision(client, "vm1", "active").status_code == 202
    active = wait_for_state(client, "vm1", "active", timeout=60)
    assert (active["last_error"], active["power_state"]) == (None, "power on")

    # The BMC got the conductor's verified copy, not the original URL, and boots it from CD in BIOS mode.
    cd = bmc.cd(SYSTEM_ID)
    published = f"{baremetal.conductor.file_server_url}/redfish/boot-{node['uuid']}.iso"
    assert (cd["Image"], cd["Inserted"]) == (published, True)
    assert requests.get(published, timeout=10).content == ISO_BYTES
    boot = bmc.system(SYSTEM_ID)["Boot"]
    assert (boot["BootSourceOverrideTarget"], boot["BootSourceOverrideMode"]) == ("Cd", "Legacy")
    assert bmc.system(SYSTEM_ID)["PowerState"] == "On"

    assert provision(client, "vm1", "deleted").status_code == 202
    wait_for_state(client, "vm1", "available", timeout=60)
    cd = bmc.cd(SYSTEM_ID)
    assert not cd["Inserted"] and not cd["Image"]
    assert bmc.system(SYSTEM_ID)["PowerState"] == "Off"
    assert requests.get(published, timeout=10).status_code == 404
    assert not os.path.exists(published_file(baremetal, node))


def test_checksum_mismatch_fails_the_deployment_and_touches_nothing(baremetal, bmc, images) -> None:
    client = baremetal.client()
    url = images.add("/tampered.iso", ISO_BYTES + b"!")
    node = enroll(client, bmc, boot_iso=url, image_checksum=f"sha256:{hashlib.sha256(ISO_BYTES).hexdigest()}")
    provision(client, "vm1", "active")
    failed = wait_for_state(client, "vm1", "deploy failed")
    assert f"The checksum of image {url} does not match: expected sha256" in failed["last_error"]
    assert failed["power_state"] == "power off"
    assert not bmc.cd(SYSTEM_ID)["Inserted"]
    assert not os.path.exists(published_file(baremetal, node))
    # Nothing unverified stays in the cache either.
    master = baremetal.conf.deploy.iso_master_path
    assert not [name for name in os.listdir(master) if name.endswith((".image", ".part"))
                and os.path.getsize(os.path.join(master, name)) == len(ISO_BYTES) + 1]


def test_legacy_md5_checksum_is_verified(baremetal, bmc, images) -> None:
    client = baremetal.client()
    url = images.add("/md5.iso", ISO_BYTES)
    enroll(client, bmc, boot_iso=url, image_checksum=hashlib.md5(b"other").hexdigest())
    provision(client, "vm1", "active")
    failed = wait_for_state(client, "vm1", "deploy failed")
    assert "does not match: expected md5" in failed["last_error"]


def test_download_failures_are_the_nodes_last_error(baremetal, bmc, images) -> None:
    client = baremetal.client()
    missing = f"{images.url}/no-such.iso"
    enroll(client, bmc, boot_iso=missing)
    provision(client, "vm1", "active")
    failed = wait_for_state(client, "vm1", "deploy failed")
    assert f"{missing} answered HTTP 404" in failed["last_error"]

    unreachable = f"http://127.0.0.1:{free_port()}/live.iso"
    patch = [{"op": "replace", "path": "/instance_info/boot_iso", "value": unreachable}]
    assert client.patch("/v1/nodes/vm1", json=patch).status_code == 200
    provision(client, "vm1", "active")
    failed = wait_for_state(client, "vm1", "deploy failed", changed_since=failed["provision_updated_at"])
    assert unreachable in failed["last_error"] and "Connection refused" in failed["last_error"]

    # A checksum file that cannot be fetched is a download failure too.
    url = images.add("/live.iso", ISO_BYTES)
    patch = [{"op": "replace", "path": "/instance_info/boot_iso", "value": url},
             {"op": "add", "path": "/instance_info/image_checksum", "value": f"{images.url}/SHA256SUMS"}]
    assert client.patch("/v1/nodes/vm1", json=patch).status_code == 200
    provision(client, "vm1", "active")
    failed = wait_for_state(client, "vm1", "deploy failed", changed_since=failed["provision_updated_at"])
    assert f"Failed to download the image checksum file {images.url}/SHA256SUMS" in failed["last_error"]
    assert not bmc.cd(SYSTEM_ID)["Inserted"]


def test_bmc_refusing_the_medium_fails_the_deployment_and_ejects(baremetal, bmc, images) -> None:
    client = baremetal.client()
    url = images.add("/live.iso", ISO_BYTES)
    node = enroll(client, bmc, boot_iso=url, image_checksum=f"sha256:{hashlib.sha256(ISO_BYTES).hexdigest()}")
    # The BMC is told to fetch the image from where nothing answers: it refuses the InsertMedia action.
    baremetal.conf.set_override("http_url", f"http://127.0.0.1:{free_port()}", group="deploy")
    try:
        provision(client, "vm1", "active")
        failed = wait_for_state(client, "vm1", "deploy failed")
    finally:
        baremetal.conf.clear_override("http_url", group="deploy")
    assert "Redfish virtual media insertion failed" in failed["last_error"]
    assert failed["power_state"] == "power off"
    assert not bmc.cd(SYSTEM_ID)["Inserted"]
    assert bmc.system(SYSTEM_ID)["PowerState"] == "Off"
    assert not os.path.exists(published_file(baremetal, node))


def test_bad_instance_info_is_refused_with_400(baremetal, bmc, images) -> None:
    client = baremetal.client()
    node = enroll(client, bmc)
    response = provision(client, "vm1", "active")
    assert response.status_code == 400
    assert "needs instance_info/boot_iso, or instance_info/kernel and instance_info/ramdisk" in faultstring(response)

    for patch, message in (
        ([{"op": "add", "path": "/instance_info/boot_iso", "value": "ftp://example.com/x.iso"}],
         "is not supported: use an http://, https:// or file:// URL"),
        # The conductor would publish any file it can read.
        ([{"op": "add", "path": "/instance_info/boot_iso", "value": "file:///etc/passwd"}],
         "Security: the path of file:///etc/passwd is not under [conductor] file_url_allowed_paths"),
        ([{"op": "add", "path": "/instance_info/boot_iso", "value": "http://example.com/x.iso"},
          {"op": "add", "path": "/instance_info/image_os_hash_algo", "value": "sha256"}],
         "needs both image_os_hash_algo and image_os_hash_value"),
    ):
        assert client.patch("/v1/nodes/vm1", json=patch).status_code == 200
        response = provision(client, "vm1", "active")
        assert response.status_code == 400 and message in faultstring(response)
        assert client.get("/v1/nodes/vm1").json()["provision_state"] == "available"

    # The ramdisk deploy needs a boot interface that boots ramdisks.
    assert client.patch("/v1/nodes/vm1", json=[
        {"op": "replace", "path": "/boot_interface", "value": "fake"}]).status_code == 200
    response = provision(client, "vm1", "active")
    assert response.status_code == 400 and "The fake boot interface cannot boot a ramdisk" in faultstring(response)
    assert node["uuid"] in faultstring(response)


def test_interfaces_are_listed_and_disabled_ones_refused(baremetal, bmc) -> None:
    client = baremetal.client()
    driver = client.get("/v1/drivers/redfish?detail=True").json()
    assert "redfish-virtual-media" in driver["enabled_boot_interfaces"]
    assert "ramdisk" in driver["enabled_deploy_interfaces"]
    response = client.post("/v1/nodes", json={"driver": "fake-hardware", "boot_interface": "redfish-virtual-media"})
    assert response.status_code == 400
    assert "boot interface implementation 'redfish-virtual-media' is not supported by hardware type fake-hardware" \
        in faultstring(response)


def test_download_source_http_hands_the_bmc_the_original_url(baremetal, bmc, images) -> None:
    client = baremetal.client()
    url = images.add("/direct.iso", ISO_BYTES)
    node = enroll(client, bmc, boot_iso=url)
    baremetal.conf.set_override("ramdisk_image_download_source", "http", group="deploy")
    try:
        provision(client, "vm1", "active")
        wait_for_state(client, "vm1", "active", timeout=60)
    finally:
        baremetal.conf.clear_override("ramdisk_image_download_source", group="deploy")
    cd = bmc.cd(SYSTEM_ID)
    assert (cd["Image"], cd["Inserted"]) == (url, True)
    assert not os.path.exists(published_file(baremetal, node))
    provision(client, "vm1", "deleted")
    wait_for_state(client, "vm1", "available", timeout=60)
    assert not bmc.cd(SYSTEM_ID)["Inserted"]
