"""The direct deploy's requests to the agent, its ramdisk over virtual media, and its failures.

Cheap stand-ins for the machine: a fake agent (an http server answering
the agent's command API and recording what the conductor asks) with the
fake-hardware driver, sushy-tools' fake BMC for the redfish driver with
``redfish-virtual-media`` boot, and the real agent as a host process
(``agent_support.TestMachine``) where its own behaviour is what fails.
The lab test (test_direct_lab.py) runs the same flows on QEMU machines.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import json
import os
import threading
import urllib.parse
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pycdlib
import pytest
import requests

from corral.core import configdrive as configdrive_iso
from corral.core.server import ThreadedServer
from tests.baremetal import test_vmedia
from tests.baremetal.agent_support import ImageServer, TestMachine, raw_image
from tests.baremetal.support import faultstring, wait_for, wait_for_state
from tests.baremetal.test_agent import (
    PAYLOAD,
    AgentServer,
    enroll,
    set_image,
    wait_settled,
)
from tests.baremetal.test_provisioning import provision
from tests.baremetal.vmedia_support import Emulator, require
from tests.image.conftest import ImageServer as ImageService
from tests.image.conftest import active
from tests.support.databases import DatabaseFactory
from tests.support.ports import free_port

# sushy-tools' fake BMC with one system, and that system with its CD ejected and its power off.
SYSTEM_ID = test_vmedia.SYSTEM_ID
fake_bmc = test_vmedia.fake_bmc
bmc = test_vmedia.bmc
PUBLIC_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGy0yJ7z+Hn1dxR2bt2S0t0bq2K8TjG0XWd1yQyY8w0A tester"


class FakeAgent:
    """The agent's command API: records every command; asynchronous ones finish as ``status`` says."""

    def __init__(self, status: str = "SUCCEEDED", error: Any = None) -> None:
        self.commands: list[dict[str, Any]] = []
        self.status = status
        self.error = error
        # Commands that fail, with their error (at once with ?wait=true, else in the command list).
        self.failing: dict[str, Any] = {}
        # The command_result of commands run with ?wait=true, by name.
        self.results: dict[str, Any] = {}
        self._lock = threading.Lock()
        self.server = ThreadedServer(self._app).start()
        self.url = self.server.url

    def _app(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        query = urllib.parse.parse_qs(environ.get("QUERY_STRING", ""))
        if environ["REQUEST_METHOD"] == "POST":
            length = int(environ.get("CONTENT_LENGTH") or 0)
            body = json.loads(environ["wsgi.input"].read(length))
            with self._lock:
                self.commands.append({"name": body["name"], "params": body["params"],
                                      "token": query.get("agent_token", [None])[0]})
            short = body["name"].rsplit(".", 1)[-1]
            waited = query.get("wait", ["false"])[0] == "true"
            answer: Any = {"command_name": short, "command_status": "SUCCEEDED" if waited else "RUNNING",
                           "command_result": self.results.get(body["name"], {}) if waited else {},
                           "command_error": None}
            if waited and body["name"] in self.failing:
                answer.update(command_status="FAILED", command_error=self.failing[body["name"]])
        else:
            with self._lock:
                answer = {"commands": [self._status(command["name"]) for command in self.commands]}
        data = json.dumps(answer).encode()
        start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(data)))])
        return [data]

    def _status(self, name: str) -> dict[str, Any]:
        status, error = self.status, self.error if self.status == "FAILED" else None
        if name in self.failing:
            status, error = "FAILED", self.failing[name]
        return {"command_name": name.rsplit(".", 1)[-1], "command_status": status, "command_result": {},
                "command_error": error}

    def named(self, name: str) -> list[dict[str, Any]]:
        with self._lock:
            return [command for command in self.commands if command["name"] == name]

    def stop(self) -> None:
        self.server.stop()


@pytest.fixture
def server(database_factory: DatabaseFactory, tmp_path: Path) -> Iterator[AgentServer]:
    running = AgentServer(database_factory, tmp_path / "corral", deploy_callback_timeout=60)
    yield running
    running.stop()


@pytest.fixture
def agent() -> Iterator[FakeAgent]:
    fake = FakeAgent()
    yield fake
    fake.stop()


@pytest.fixture
def images(tmp_path: Path) -> Iterator[ImageServer]:
    directory = tmp_path / "images"
    directory.mkdir()
    served = ImageServer(directory)
    yield served
    served.stop()


def available(client: Any, name: str, mac: str, **fields: Any) -> dict[str, Any]:
    node = enroll(client, name, mac, automated_clean=False, **fields)
    assert provision(client, name, "provide").status_code == 202
    wait_for_state(client, name, "available")
    return node


def deploy_through(server: AgentServer, agent: FakeAgent, name: str, mac: str, **request: Any) -> dict[str, Any]:
    """Deploy ``name`` with the fake agent answering for it; the node once active."""
    client = server.client
    response = client.put(f"/v1/nodes/{name}/states/provision", json={"target": "active", **request})
    assert response.status_code == 202, response.text
    wait_for_state(client, name, "wait call-back")
    token = server.agent_api.get(f"/v1/lookup?addresses={mac}").json()["config"]["agent_token"]
    beat = {"callback_url": agent.url, "agent_token": token, "agent_version": "13.0.0"}
    assert server.agent_api.post(f"/v1/heartbeat/{name}", json=beat).status_code == 202
    wait_for(lambda: agent.named("standby.prepare_image"))
    # The image is written: the next heartbeat moves the deployment on.
    assert server.agent_api.post(f"/v1/heartbeat/{name}", json=beat).status_code == 202
    return wait_for_state(client, name, "active")


# ------------------------------------------------------------- config drives


def test_a_json_config_drive_is_built_for_the_agent_and_never_shown(
        server: AgentServer, agent: FakeAgent, images: ImageServer) -> None:
    client = server.client
    node = available(client, "cd1", "52:54:00:00:d1:01")
    url, sha256 = images.publish("cd1.img", raw_image(PAYLOAD))
    set_image(client, "cd1", url, sha256)
    configdrive = {"meta_data": {"public_keys": {"0": PUBLIC_KEY}, "hostname": "cd1.example.com"},
                   "user_data": {"runcmd": ["touch /tmp/ok"]}, "network_data": {"links": [], "networks": []},
                   "vendor_data": {"corral": {"x": 1}}}
    deployed = deploy_through(server, agent, "cd1", "52:54:00:00:d1:01", configdrive=configdrive)
    assert (deployed["last_error"], deployed["power_state"]) == (None, "power on")

    (command,) = agent.named("standby.prepare_image")
    params = command["params"]
    # The agent gets the image the conductor built (gzip + base64), in image_info too, as upstream sends it.
    assert isinstance(params["configdrive"], str)
    assert params["image_info"]["configdrive"] == params["configdrive"]
    assert params["image_info"]["urls"] == [url] and params["image_info"]["os_hash_value"] == sha256
    image = configdrive_iso.decode(params["configdrive"])
    assert configdrive_iso.label(image) == "config-2"
    files = configdrive_iso.read(image)
    meta_data = json.loads(files["openstack/latest/meta_data.json"])
    assert meta_data == {"public_keys": {"0": PUBLIC_KEY}, "hostname": "cd1.example.com", "uuid": node["uuid"],
                         "name": "cd1"}
    assert json.loads(files["openstack/2012-08-10/user_data"]) == {"runcmd": ["touch /tmp/ok"]}
    assert json.loads(files["openstack/latest/network_data.json"]) == {"links": [], "networks": []}
    assert json.loads(files["openstack/latest/vendor_data2.json"]) == {"corral": {"x": 1}}

    # Stored as given (a rebuild builds it again), shown to nobody: not in the node, not in the agent's lookup.
    shown = client.get("/v1/nodes/cd1")
    assert shown.json()["instance_info"]["configdrive"] == "******"
    assert PUBLIC_KEY not in shown.text and PUBLIC_KEY not in client.get("/v1/nodes/detail").text
    assert PUBLIC_KEY not in client.get("/v1/nodes?fields=instance_info").text
    # The conductor never fetched the image the agent downloads (no HEAD, no GET).
    assert images.requests == []


def test_config_drive_strings_and_urls_reach_the_agent_as_given(server: AgentServer, agent: FakeAgent,
                                                                images: ImageServer) -> None:
    client = server.client
    encoded = configdrive_iso.encode(configdrive_iso.build({"uuid": "given"}))
    cases = {"cd2": ("52:54:00:00:d1:02", encoded), "cd3": ("52:54:00:00:d1:03", "http://10.0.2.2:9/cd.iso.gz")}
    for name, (mac, configdrive) in cases.items():
        available(client, name, mac)
        url, sha256 = images.publish(f"{name}.img", raw_image(PAYLOAD))
        set_image(client, name, url, sha256)
        deploy_through(server, agent, name, mac, configdrive=configdrive)
        assert agent.named("standby.prepare_image")[-1]["params"]["configdrive"] == configdrive
        assert client.get(f"/v1/nodes/{name}").json()["instance_info"]["configdrive"] == "******"


def test_a_config_drive_over_the_limit_or_not_base64_is_refused_with_400(server: AgentServer,
                                                                          images: ImageServer) -> None:
    client = server.client
    node = available(client, "big", "52:54:00:00:d1:04")
    url, sha256 = images.publish("big.img", raw_image(PAYLOAD))
    set_image(client, "big", url, sha256)
    # 64 MiB and a byte once decompressed; about 90 KB as sent.
    big = base64.b64encode(gzip.compress(bytes(configdrive_iso.MAX_SIZE + 1))).decode()
    response = provision(client, "big", "active", configdrive=big)
    assert response.status_code == 400
    assert faultstring(response) == ("Config drive size exceeds maximum limit of 64MiB. Size of the given config "
                                     f"drive is 65 MiB for node {node['uuid']}.")
    response = provision(client, "big", "active", configdrive="H4sI" + "A" * 9)
    assert response.status_code == 400 and "Invalid configdrive format" in faultstring(response)
    response = provision(client, "big", "active", configdrive={"meta_data": "not an object"})
    assert response.status_code == 400 and "Invalid configdrive format" in faultstring(response)
    unchanged = client.get("/v1/nodes/big").json()
    assert unchanged["provision_state"] == "available" and "configdrive" not in unchanged["instance_info"]


# ------------------------------------------------------- root device hints


def test_root_device_hints_are_checked_and_reach_the_agent(server: AgentServer, agent: FakeAgent,
                                                           images: ImageServer) -> None:
    client = server.client
    node = available(client, "hints", "52:54:00:00:d1:05", properties={"root_device": {"size": "huge"}})
    url, sha256 = images.publish("hints.img", raw_image(PAYLOAD))
    set_image(client, "hints", url, sha256)
    response = provision(client, "hints", "active")
    assert response.status_code == 400
    assert faultstring(response) == (
        f"RPC do_node_deploy failed to validate deploy or power info for node {node['uuid']}. Error: Failed to "
        "validate the root device hints {'size': 'huge'} (from the node's properties) for node "
        f"{node['uuid']}: Root device hint \"size\" is not an integer value. Current value: huge")
    validation = client.get("/v1/nodes/hints/validate").json()["deploy"]
    assert validation["result"] is False and "root device hints" in validation["reason"]

    hints = {"serial": "corral-root", "size": ">= 4", "rotational": False}
    assert client.patch("/v1/nodes/hints", json=[
        {"op": "replace", "path": "/properties/root_device", "value": hints}]).status_code == 200
    response = provision(client, "hints", "active")
    assert response.status_code == 202
    wait_for_state(client, "hints", "wait call-back")
    # The agent reads them from the node it looks up, as upstream's agent does.
    found = server.agent_api.get("/v1/lookup?addresses=52:54:00:00:d1:05").json()["node"]
    assert found["properties"]["root_device"] == hints


# ------------------------------------------------- over Redfish virtual media


@pytest.fixture
def vmedia_server(database_factory: DatabaseFactory, tmp_path: Path) -> Iterator[AgentServer]:
    """A server whose redfish nodes boot the agent ramdisk (a kernel and an initramfs of the test) over virtual
    media; the BMC fetches ISOs at 127.0.0.1, the agent would call back at 192.0.2.1."""
    require(os.path.exists("/usr/lib/ISOLINUX/isolinux.bin"), "isolinux is not installed (tools/baremetal-lab)")
    ramdisk = tmp_path / "ramdisk"
    ramdisk.mkdir()
    (ramdisk / "ipa.kernel").write_bytes(b"a kernel " * 100)
    (ramdisk / "ipa.initramfs").write_bytes(b"an initramfs " * 100)
    port = free_port()
    running = AgentServer(
        database_factory, tmp_path / "corral",
        groups={"deploy": {"http_server_port": port, "http_url": f"http://192.0.2.1:{port}",
                           "external_http_url": f"http://127.0.0.1:{port}",
                           "external_callback_url": "http://192.0.2.1:6385/baremetal"}},
        deploy_callback_timeout=10, clean_callback_timeout=10,
        deploy_kernel=f"file://{ramdisk / 'ipa.kernel'}", deploy_ramdisk=f"file://{ramdisk / 'ipa.initramfs'}",
        file_url_allowed_paths=[str(ramdisk)])
    yield running
    running.stop()


def vmedia_node(client: Any, bmc_url: str, name: str = "vm1", **driver_info: Any) -> dict[str, Any]:
    response = client.post("/v1/nodes", json={
        "driver": "redfish", "name": name, "boot_interface": "redfish-virtual-media", "deploy_interface": "direct",
        "automated_clean": False,
        "driver_info": {"redfish_address": bmc_url, "redfish_system_id": f"/redfish/v1/Systems/{SYSTEM_ID}",
                        "kernel_append_params": "%default% console=ttyS0 ipa-advertise-port=18991",
                        **driver_info},
        "properties": {"capabilities": "boot_mode:bios"},
    })
    assert response.status_code == 201, response.text
    node = response.json()
    assert client.post("/v1/ports", json={"node_uuid": node["uuid"], "address": "52:54:00:00:c0:de"}).status_code \
        == 201
    assert provision(client, name, "manage").status_code == 202
    wait_for_state(client, name, "manageable", timeout=60)
    return node


def iso_file(data: bytes, path: str) -> str:
    iso = pycdlib.PyCdlib()
    iso.open_fp(io.BytesIO(data))
    try:
        out = io.BytesIO()
        iso.get_file_from_iso_fp(out, rr_path=path)
        return out.getvalue().decode()
    finally:
        iso.close()


def test_agent_ramdisk_booted_over_virtual_media_then_the_callback_timeout_ejects_it(
        vmedia_server: AgentServer, bmc: Emulator, images: ImageServer) -> None:
    server = vmedia_server
    client = server.client
    node = vmedia_node(client, bmc.url)
    assert provision(client, "vm1", "provide").status_code == 202
    wait_for_state(client, "vm1", "available", timeout=60)
    url, sha256 = images.publish("vm1.img", raw_image(PAYLOAD))
    set_image(client, "vm1", url, sha256)
    assert provision(client, "vm1", "active").status_code == 202
    waiting = wait_for_state(client, "vm1", "wait call-back", timeout=60)
    assert waiting["power_state"] == "power on"

    # The BMC fetched the ISO Corral made from the ramdisk at the BMC-facing URL and boots it (the emulator
    # reports every override as continuous).
    published = f"http://127.0.0.1:{server.conf.deploy.http_server_port}/redfish/boot-{node['uuid']}.iso"
    cd = bmc.cd(SYSTEM_ID)
    assert (cd["Image"], cd["Inserted"]) == (published, True)
    boot = bmc.system(SYSTEM_ID)["Boot"]
    assert (boot["BootSourceOverrideTarget"], boot["BootSourceOverrideMode"]) == ("Cd", "Legacy")
    iso = requests.get(published, timeout=10).content
    assert iso_file(iso, "/isolinux/vmlinuz") == "a kernel " * 100
    assert iso_file(iso, "/isolinux/initrd") == "an initramfs " * 100
    # The agent's arguments, then [redfish] kernel_append_params for %default%, then the node's.
    config = iso_file(iso, "/isolinux/isolinux.cfg")
    assert ("APPEND ipa-api-url=http://192.0.2.1:6385/baremetal boot_method=vmedia nofb vga=normal "
            "console=ttyS0 ipa-advertise-port=18991\n") in config

    # Nothing calls back: the deployment fails, the medium is ejected and the machine powered off.
    failed = wait_for_state(client, "vm1", "deploy failed", timeout=60)
    assert failed["last_error"] == f"Timeout reached while waiting for callback for node {node['uuid']}"
    assert failed["power_state"] == "power off"
    assert bmc.system(SYSTEM_ID)["PowerState"] == "Off"
    cd = bmc.cd(SYSTEM_ID)
    assert not cd["Inserted"] and not cd["Image"]
    assert requests.get(published, timeout=10).status_code == 404
    assert "agent_secret_token" not in failed["driver_internal_info"]
    assert images.requests == []


def test_the_ramdisk_may_come_from_the_image_service(vmedia_server: AgentServer, bmc: Emulator, images: ImageServer,
                                                    database_factory: DatabaseFactory, tmp_path: Path) -> None:
    server = vmedia_server
    client = server.client
    image_api = ImageService(database_factory, tmp_path / "image-service")
    try:
        server.conf.set_override("endpoint_override", image_api.url, group="glance")
        # Private images of another project: driver_info's ramdisk is the conductor's, whoever owns the node.
        kernel = active(image_api.client("operators"), b"kernel from the image service " * 50,
                        disk_format="raw", container_format="bare")
        ramdisk = active(image_api.client("operators"), b"initramfs from the image service " * 50,
                         disk_format="raw", container_format="bare")
        node = vmedia_node(client, bmc.url, deploy_kernel=kernel["id"], deploy_ramdisk=f"glance://{ramdisk['id']}")
        assert client.patch("/v1/nodes/vm1", json=[
            {"op": "add", "path": "/owner", "value": "demo"}]).status_code == 200
        assert provision(client, "vm1", "provide").status_code == 202
        wait_for_state(client, "vm1", "available", timeout=60)
        url, sha256 = images.publish("vm1.img", raw_image(PAYLOAD))
        set_image(client, "vm1", url, sha256)
        assert provision(client, "vm1", "active").status_code == 202
        wait_for_state(client, "vm1", "wait call-back", timeout=60)
        published = f"http://127.0.0.1:{server.conf.deploy.http_server_port}/redfish/boot-{node['uuid']}.iso"
        iso = requests.get(published, timeout=10).content
        assert iso_file(iso, "/isolinux/vmlinuz") == "kernel from the image service " * 50
        assert iso_file(iso, "/isolinux/initrd") == "initramfs from the image service " * 50
        # Aborting stops the ramdisk as a timeout does.
        assert provision(client, "vm1", "abort").status_code == 202
        aborted = wait_for_state(client, "vm1", "deploy failed", timeout=60)
        assert aborted["last_error"] == "By request, the wait call-back operation was aborted"
        assert not bmc.cd(SYSTEM_ID)["Inserted"]
    finally:
        server.conf.clear_override("endpoint_override", group="glance")
        image_api.stop()


def test_cleaning_boots_a_prebuilt_deploy_iso_and_a_silent_agent_fails_it(
        vmedia_server: AgentServer, bmc: Emulator, images: ImageServer) -> None:
    server = vmedia_server
    client = server.client
    prebuilt = b"CD001 an agent ISO built elsewhere " * 200
    node = vmedia_node(client, bmc.url, deploy_iso=images.publish("ipa.iso", prebuilt)[0])
    # Manual cleaning boots the agent to learn its steps, as automated cleaning does.
    steps = [{"interface": "deploy", "step": "erase_devices_metadata"}]
    assert provision(client, "vm1", "clean", clean_steps=steps).status_code == 202
    wait_for_state(client, "vm1", "clean wait", timeout=60)
    # A prebuilt ISO is published as it is (no kernel arguments can be added to it).
    published = f"http://127.0.0.1:{server.conf.deploy.http_server_port}/redfish/boot-{node['uuid']}.iso"
    assert bmc.cd(SYSTEM_ID)["Image"] == published
    assert requests.get(published, timeout=10).content == prebuilt

    failed = wait_for_state(client, "vm1", "clean failed", timeout=60)
    assert failed["last_error"].startswith("Timeout reached while cleaning the node.")
    assert failed["power_state"] == "power off" and bmc.system(SYSTEM_ID)["PowerState"] == "Off"
    assert not bmc.cd(SYSTEM_ID)["Inserted"]
    assert requests.get(published, timeout=10).status_code == 404


def test_a_ramdisk_that_cannot_be_booted_is_refused_or_fails_cleaning(
        vmedia_server: AgentServer, bmc: Emulator, images: ImageServer) -> None:
    server = vmedia_server
    client = server.client
    node = vmedia_node(client, bmc.url, deploy_kernel="http://192.0.2.1/k")
    # Half a ramdisk in driver_info: the deployment is refused before anything happens.
    url, sha256 = images.publish("vm1.img", raw_image(PAYLOAD))
    set_image(client, "vm1", url, sha256)
    assert client.patch("/v1/nodes/vm1", json=[
        {"op": "replace", "path": "/automated_clean", "value": True}]).status_code == 200
    validation = client.get("/v1/nodes/vm1/validate").json()
    assert validation["boot"]["result"] is False
    assert "Missing are: ['deploy_ramdisk']" in validation["boot"]["reason"]
    # Cleaning cannot boot it either: clean failed with the reason, the machine untouched.
    assert provision(client, "vm1", "provide").status_code == 202
    failed = wait_for_state(client, "vm1", "clean failed", timeout=60)
    assert failed["last_error"].startswith(f"Failed to prepare node {node['uuid']} for cleaning: Error validating "
                                           "Redfish virtual media. Some parameters were missing")
    assert not bmc.cd(SYSTEM_ID)["Inserted"]

    # Without the API's URL for the agent, a ramdisk made here is refused too.
    assert client.patch("/v1/nodes/vm1", json=[
        {"op": "remove", "path": "/driver_info/deploy_kernel"}]).status_code == 200
    server.conf.set_override("external_callback_url", None, group="deploy")
    validation = client.get("/v1/nodes/vm1/validate").json()
    assert validation["boot"]["result"] is False and "external_callback_url" in validation["boot"]["reason"]
    assert validation["deploy"]["result"] is False


# ------------------------------------------------------- the agent failing


@pytest.fixture
def machines() -> Iterator[list[TestMachine]]:
    made: list[TestMachine] = []
    yield made
    for machine in made:
        machine.dispose()


def test_the_agents_failing_command_fails_the_deploy_and_stops_the_ramdisk(
        database_factory: DatabaseFactory, tmp_path: Path, images: ImageServer,
        machines: list[TestMachine]) -> None:
    server = AgentServer(database_factory, tmp_path / "corral", deploy_callback_timeout=90)
    try:
        client = server.client
        machine = TestMachine(tmp_path / "machines", "m1", "52:54:00:00:d2:01")
        machines.append(machine)
        enroll(client, "m1", machine.mac, automated_clean=False)
        assert provision(client, "m1", "provide").status_code == 202
        wait_for_state(client, "m1", "available")
        # The image is not there: the agent's download, hence its prepare_image command, fails.
        missing = f"{images.url}/missing.img"
        set_image(client, "m1", missing, hashlib.sha256(b"missing").hexdigest())
        assert provision(client, "m1", "active", configdrive={"meta_data": {"public_keys": {"0": PUBLIC_KEY}}}) \
            .status_code == 202
        wait_for_state(client, "m1", "wait call-back")
        machine.power_on(server.url)
        failed = wait_settled(client, "m1", "deploy failed", machine)
        assert failed["last_error"].startswith("Agent returned error for deploy step {'interface': 'deploy', "
                                               "'step': 'write_image'")
        assert "missing.img" in failed["last_error"]
        assert failed["power_state"] == "power off"
        assert "agent_secret_token" not in failed["driver_internal_info"]
        # The agent asked for the image; the conductor did not.
        assert set(images.requests) == {"GET /missing.img"}
    finally:
        server.stop()


def test_a_bad_image_checksum_over_virtual_media_fails_and_ejects(
        vmedia_server: AgentServer, bmc: Emulator, images: ImageServer, tmp_path: Path,
        machines: list[TestMachine]) -> None:
    server = vmedia_server
    client = server.client
    server.conf.set_override("deploy_callback_timeout", 90, group="conductor")
    machine = TestMachine(tmp_path / "machines", "m2", "52:54:00:00:c0:de")
    machines.append(machine)
    node = vmedia_node(client, bmc.url)
    assert provision(client, "vm1", "provide").status_code == 202
    wait_for_state(client, "vm1", "available", timeout=60)
    url, _ = images.publish("tampered.img", raw_image(PAYLOAD))
    set_image(client, "vm1", url, hashlib.sha256(b"the image that was meant").hexdigest())
    assert provision(client, "vm1", "active").status_code == 202
    wait_for_state(client, "vm1", "wait call-back", timeout=60)
    assert bmc.cd(SYSTEM_ID)["Inserted"]
    # "Powered on" from the medium: the agent starts.
    machine.power_on(server.url)
    failed = wait_settled(client, "vm1", "deploy failed", machine)
    assert "Agent returned error for deploy step" in failed["last_error"]
    assert "checksum" in failed["last_error"].lower()
    assert failed["power_state"] == "power off" and bmc.system(SYSTEM_ID)["PowerState"] == "Off"
    assert not bmc.cd(SYSTEM_ID)["Inserted"]
    published = os.path.join(server.conf.deploy.http_root, "redfish", f"boot-{node['uuid']}.iso")
    assert not os.path.exists(published)
