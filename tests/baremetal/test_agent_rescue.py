"""Rescue through the agent (the ``agent`` rescue interface), rebuilding with a new config drive, fast track.

The machine is a fake agent answering the agent's command API (fake
hardware), or sushy-tools' fake BMC booting the rescue ramdisk over
virtual media; see test_direct_deploy.py.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from corral.baremetal.domain import passwords
from corral.core import configdrive as configdrive_iso
from tests.baremetal.agent_support import ImageServer, raw_image
from tests.baremetal.support import faultstring, wait_for, wait_for_state
from tests.baremetal.test_agent import PAYLOAD, AgentServer, enroll, set_image
from tests.baremetal.test_direct_deploy import (
    PUBLIC_KEY,
    SYSTEM_ID,
    FakeAgent,
    agent,
    available,
    bmc,
    deploy_through,
    fake_bmc,
    images,
    iso_file,
    vmedia_node,
)
from tests.baremetal.test_inspection import DATA as INSPECTION_DATA
from tests.baremetal.test_inspection import MAC_ACTIVE
from tests.baremetal.test_provisioning import provision
from tests.baremetal.vmedia_support import Emulator, require
from tests.support.databases import DatabaseFactory
from tests.support.http import ApiClient
from tests.support.ports import free_port

__all__ = ["agent", "bmc", "fake_bmc", "images"]
PASSWORD = "correct horse battery staple"


@pytest.fixture
def server(database_factory: DatabaseFactory, tmp_path: Path) -> Iterator[AgentServer]:
    running = AgentServer(database_factory, tmp_path / "corral", deploy_callback_timeout=60,
                          rescue_callback_timeout=60)
    yield running
    running.stop()


def deployed(server: AgentServer, agent: FakeAgent, images: ImageServer, name: str, mac: str,
             **fields: Any) -> dict[str, Any]:
    available(server.client, name, mac, rescue_interface="agent", **fields)
    url, sha256 = images.publish(f"{name}.img", raw_image(PAYLOAD))
    set_image(server.client, name, url, sha256)
    return deploy_through(server, agent, name, mac)


def heartbeat(server: AgentServer, agent: FakeAgent, name: str, mac: str, token: str | None = None) -> str:
    """The agent's heartbeat (after its first lookup, which hands out its token, unless it looked up already)."""
    token = token or server.agent_api.get(f"/v1/lookup?addresses={mac}").json()["config"]["agent_token"]
    beat = {"callback_url": agent.url, "agent_token": token, "agent_version": "13.0.0"}
    assert server.agent_api.post(f"/v1/heartbeat/{name}", json=beat).status_code == 202
    return token


def test_rescue_boots_the_agent_which_gets_the_hashed_password_then_unrescue_boots_the_disk(
        server: AgentServer, agent: FakeAgent, images: ImageServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    client = server.client
    mac = "52:54:00:00:e1:01"
    node = deployed(server, agent, images, "r1", mac)
    # rescue is 1.38's.
    old = ApiClient(server.url, {"X-Auth-Token": "admin", "X-OpenStack-Ironic-API-Version": "1.37"})
    assert old.put("/v1/nodes/r1/states/provision", json={"target": "rescue", "rescue_password": PASSWORD}) \
        .status_code == 406
    assert provision(client, "r1", "rescue").status_code == 400

    assert provision(client, "r1", "rescue", rescue_password=PASSWORD).status_code == 202
    waiting = wait_for_state(client, "r1", "rescue wait")
    # The ramdisk boots: from the network (fake boot), powered on, with no token of the deployment's agent.
    assert waiting["power_state"] == "power on"
    assert waiting["driver_internal_info"]["fake_boot_device"] == {"boot_device": "pxe", "persistent": False}
    assert waiting["instance_info"]["rescue_password"] == "******"
    assert waiting["instance_info"]["hashed_rescue_password"] == "******"
    # The agent's lookup does not give the password away either.
    found = server.agent_api.get(f"/v1/lookup?addresses={mac}")
    assert found.status_code == 200 and PASSWORD not in found.text and "$5$" not in found.text

    heartbeat(server, agent, "r1", mac, found.json()["config"]["agent_token"])
    rescued = wait_for_state(client, "r1", "rescue")
    (command,) = agent.named("rescue.finalize_rescue")
    hashed = command["params"]["rescue_password"]
    assert command["params"]["hashed"] is True
    # SHA-256 crypt of the password, as the agent writes it to /etc/shadow.
    salt = hashed.split("$")[2]
    assert hashed.startswith("$5$") and hashed == passwords.hash_password(PASSWORD, "sha256", salt)
    assert rescued["last_error"] is None and rescued["power_state"] == "power on"
    # The agent has the password: the node keeps neither it nor the agent's token.
    assert "rescue_password" not in rescued["instance_info"]
    assert "hashed_rescue_password" not in rescued["instance_info"]
    assert "agent_url" not in rescued["driver_internal_info"]

    assert provision(client, "r1", "unrescue").status_code == 202
    active = wait_for_state(client, "r1", "active")
    assert active["power_state"] == "power on" and active["last_error"] is None
    assert active["driver_internal_info"]["fake_boot_device"] == {"boot_device": "disk", "persistent": True}
    # Never in an answer, never in a log.
    assert PASSWORD not in client.get("/v1/nodes/detail").text
    assert PASSWORD not in caplog.text and hashed not in caplog.text
    history = client.get(f"/v1/nodes/{node['uuid']}/history").json()
    assert PASSWORD not in json.dumps(history)


def test_a_silent_rescue_ramdisk_times_out_and_a_failing_agent_fails_the_rescue(
        server: AgentServer, agent: FakeAgent, images: ImageServer) -> None:
    client = server.client
    mac = "52:54:00:00:e1:02"
    deployed(server, agent, images, "r2", mac)
    server.conf.set_override("rescue_callback_timeout", 1, group="conductor")
    assert provision(client, "r2", "rescue", rescue_password=PASSWORD).status_code == 202
    failed = wait_for_state(client, "r2", "rescue failed", timeout=30)
    assert failed["last_error"] == "Timeout reached while waiting for rescue ramdisk callback for node"
    assert failed["power_state"] == "power off"
    assert "rescue_password" not in failed["instance_info"]
    assert "agent_secret_token" not in failed["driver_internal_info"]
    server.conf.set_override("rescue_callback_timeout", 60, group="conductor")

    # Again from rescue failed; this time the agent refuses the password.
    agent.failing["rescue.finalize_rescue"] = {"type": "CommandExecutionError", "details": "no rescue user"}
    assert provision(client, "r2", "rescue", rescue_password=PASSWORD).status_code == 202
    wait_for_state(client, "r2", "rescue wait")
    heartbeat(server, agent, "r2", mac)
    failed = wait_for_state(client, "r2", "rescue failed")
    assert failed["last_error"].startswith("Asynchronous exception: Node failed to perform rescue operation.")
    assert "no rescue user" in failed["last_error"]
    assert failed["power_state"] == "power off" and "rescue_password" not in failed["instance_info"]

    # From rescue failed, unrescue brings the instance back.
    assert provision(client, "r2", "unrescue").status_code == 202
    assert wait_for_state(client, "r2", "active")["power_state"] == "power on"


def test_rescue_is_refused_without_an_interface_for_it_and_may_be_aborted_or_undeployed(
        server: AgentServer, agent: FakeAgent, images: ImageServer) -> None:
    client = server.client
    mac = "52:54:00:00:e1:03"
    node = deployed(server, agent, images, "r3", mac)
    # A node whose rescue interface is no-rescue cannot be rescued.
    other = available(client, "plain", "52:54:00:00:e1:13", deploy_interface="fake", rescue_interface="no-rescue")
    assert provision(client, "plain", "active").status_code == 202
    wait_for_state(client, "plain", "active")
    response = provision(client, "plain", "rescue", rescue_password=PASSWORD)
    assert response.status_code == 400
    assert faultstring(response) == (f"Failed to rescue instance None for node {other['uuid']}: Driver "
                                     "fake-hardware does not support rescue (disabled or not implemented).")
    unchanged = client.get("/v1/nodes/plain").json()
    assert unchanged["provision_state"] == "active" and "rescue_password" not in unchanged["instance_info"]
    assert client.put("/v1/nodes/r3/maintenance", json={}).status_code == 202
    response = provision(client, "r3", "rescue", rescue_password=PASSWORD)
    assert response.status_code == 400
    assert faultstring(response) == (f"The rescuing operation can't be performed on node {node['uuid']} because "
                                     "it's in maintenance mode.")
    assert client.delete("/v1/nodes/r3/maintenance").status_code == 202

    assert provision(client, "r3", "rescue", rescue_password=PASSWORD).status_code == 202
    wait_for_state(client, "r3", "rescue wait")
    assert provision(client, "r3", "abort").status_code == 202
    aborted = wait_for_state(client, "r3", "rescue failed")
    assert aborted["last_error"] == "By request, the rescue operation was aborted."
    assert "rescue_password" not in aborted["instance_info"]

    # Undeploying a rescued node cleans the rescue up and the node becomes available.
    assert provision(client, "r3", "rescue", rescue_password=PASSWORD).status_code == 202
    wait_for_state(client, "r3", "rescue wait")
    heartbeat(server, agent, "r3", mac)
    wait_for_state(client, "r3", "rescue")
    assert provision(client, "r3", "deleted").status_code == 202
    gone = wait_for_state(client, "r3", "available")
    assert gone["instance_info"] == {} and gone["power_state"] == "power off"


# ------------------------------------------------------------- rebuild


def test_rebuild_with_a_new_config_drive_writes_it_through_the_agent(
        server: AgentServer, agent: FakeAgent, images: ImageServer) -> None:
    client = server.client
    mac = "52:54:00:00:e1:04"
    node = deployed(server, agent, images, "rb", mac)
    first = agent.named("standby.prepare_image")[-1]["params"]
    assert "configdrive" not in first
    new_key = PUBLIC_KEY.replace("tester", "rebuilt")
    configdrive = {"meta_data": {"public_keys": {"0": new_key}}, "user_data": "#!/bin/sh\necho rebuilt\n"}
    # A JSON config drive needs 1.56.
    old = ApiClient(server.url, {"X-Auth-Token": "admin", "X-OpenStack-Ironic-API-Version": "1.55"})
    response = old.put("/v1/nodes/rb/states/provision", json={"target": "rebuild", "configdrive": configdrive})
    assert response.status_code == 400 and "1.56" in faultstring(response)

    response = client.put("/v1/nodes/rb/states/provision", json={"target": "rebuild", "configdrive": configdrive})
    assert response.status_code == 202, response.text
    wait_for_state(client, "rb", "wait call-back")
    token = heartbeat(server, agent, "rb", mac)
    wait_for(lambda: len(agent.named("standby.prepare_image")) == 2)
    heartbeat(server, agent, "rb", mac, token)
    rebuilt = wait_for_state(client, "rb", "active")
    assert rebuilt["last_error"] is None and rebuilt["instance_info"]["configdrive"] == "******"
    params = agent.named("standby.prepare_image")[-1]["params"]
    files = configdrive_iso.read(configdrive_iso.decode(params["configdrive"]))
    meta_data = json.loads(files["openstack/latest/meta_data.json"])
    assert meta_data["public_keys"] == {"0": new_key} and meta_data["uuid"] == node["uuid"]
    assert files["openstack/latest/user_data"] == b"#!/bin/sh\necho rebuilt\n"


# ------------------------------------------------------------- fast track


@pytest.fixture
def fast_server(database_factory: DatabaseFactory, tmp_path: Path) -> Iterator[AgentServer]:
    running = AgentServer(database_factory, tmp_path / "corral", groups={"deploy": {"fast_track": True}},
                          deploy_callback_timeout=60, clean_callback_timeout=60)
    yield running
    running.stop()


def cleaned_through_the_agent(server: AgentServer, agent: FakeAgent, name: str, mac: str) -> str:
    """Automated cleaning with the agent (it has no steps to run); its token."""
    client = server.client
    enroll(client, name, mac, automated_clean=True)
    assert provision(client, name, "provide").status_code == 202
    wait_for_state(client, name, "clean wait")
    token = heartbeat(server, agent, name, mac)
    wait_for_state(client, name, "available")
    return token


def test_fast_track_deploys_through_the_agent_left_running_by_cleaning(
        fast_server: AgentServer, agent: FakeAgent, images: ImageServer) -> None:
    server = fast_server
    client = server.client
    mac = "52:54:00:00:e2:01"
    token = cleaned_through_the_agent(server, agent, "ft1", mac)
    idle = client.get("/v1/nodes/ft1").json()
    # The machine stays on with its agent, which may go on heartbeating (and looking the node up) meanwhile.
    assert idle["power_state"] == "power on" and idle["driver_internal_info"]["agent_url"] == agent.url
    assert server.agent_api.get(f"/v1/lookup?addresses={mac}").status_code == 200
    heartbeat(server, agent, "ft1", mac, token)

    url, sha256 = images.publish("ft1.img", raw_image(PAYLOAD))
    set_image(client, "ft1", url, sha256)
    assert provision(client, "ft1", "active").status_code == 202
    # No reboot, no waiting for a heartbeat: the image is being written already.
    wait_for(lambda: agent.named("standby.prepare_image"))
    assert client.get("/v1/nodes/ft1").json()["power_state"] == "power on"
    heartbeat(server, agent, "ft1", mac, token)
    active = wait_for_state(client, "ft1", "active")
    assert active["last_error"] is None
    assert active["driver_internal_info"]["fake_boot_device"] == {"boot_device": "disk", "persistent": True}

    # An agent silent for longer than fast_track_timeout is not trusted: the deployment boots the ramdisk.
    token = cleaned_through_the_agent(server, agent, "ft2", "52:54:00:00:e2:02")
    server.conf.set_override("fast_track_timeout", 0, group="deploy")
    set_image(client, "ft2", url, sha256)
    assert provision(client, "ft2", "active").status_code == 202
    waiting = wait_for_state(client, "ft2", "wait call-back")
    assert "agent_url" not in waiting["driver_internal_info"]
    assert waiting["driver_internal_info"]["fake_boot_device"] == {"boot_device": "pxe", "persistent": False}
    assert len(agent.named("standby.prepare_image")) == 1


def test_fast_track_keeps_the_agent_of_inspection_for_cleaning_and_deployment(
        fast_server: AgentServer, agent: FakeAgent, images: ImageServer) -> None:
    server = fast_server
    client = server.client
    mac = MAC_ACTIVE
    enroll(client, "ft3", mac, inspect_interface="agent", automated_clean=True)
    assert provision(client, "ft3", "inspect").status_code == 202
    wait_for_state(client, "ft3", "inspect wait")
    data = {**INSPECTION_DATA, "inventory": {**INSPECTION_DATA["inventory"], "bmc_address": None}}
    response = requests.post(f"{server.url}/v1/continue_inspection", json=data, timeout=30)
    assert response.status_code == 202, response.text
    inspected = wait_for_state(client, "ft3", "manageable")
    # The machine stays on with its agent, which then looks the node up and heartbeats.
    assert (inspected["power_state"], inspected["last_error"]) == ("power on", None)
    token = heartbeat(server, agent, "ft3", mac)

    assert provision(client, "ft3", "provide").status_code == 202
    waiting = wait_for_state(client, "ft3", "clean wait")
    # No reboot: the running agent is kept, its next heartbeat hands over its clean steps.
    assert waiting["driver_internal_info"]["agent_url"] == agent.url
    heartbeat(server, agent, "ft3", mac, token)
    assert wait_for_state(client, "ft3", "available")["power_state"] == "power on"
    assert agent.named("clean.get_clean_steps")

    url, sha256 = images.publish("ft3.img", raw_image(PAYLOAD))
    set_image(client, "ft3", url, sha256)
    assert provision(client, "ft3", "active").status_code == 202
    wait_for(lambda: agent.named("standby.prepare_image"))
    heartbeat(server, agent, "ft3", mac, token)
    active = wait_for_state(client, "ft3", "active")
    assert active["last_error"] is None

    # A failed inspection powers the machine off all the same.
    enroll(client, "ft4", "52:54:00:00:e2:04", inspect_interface="agent")
    assert provision(client, "ft4", "inspect").status_code == 202
    wait_for_state(client, "ft4", "inspect wait")
    failing = {**INSPECTION_DATA, "inventory": {**INSPECTION_DATA["inventory"], "interfaces": [
        {**INSPECTION_DATA["inventory"]["interfaces"][0], "mac_address": "52:54:00:00:e2:04"}]}, "error": "boom"}
    assert requests.post(f"{server.url}/v1/continue_inspection", json=failing, timeout=30).status_code == 202
    failed = wait_for_state(client, "ft4", "inspect failed")
    assert failed["power_state"] == "power off"


# ------------------------------------------------- over Redfish virtual media


@pytest.fixture
def rescue_server(database_factory: DatabaseFactory, tmp_path: Path) -> Iterator[AgentServer]:
    """Redfish nodes booting the agent over virtual media; the rescue ramdisk is another kernel and initramfs."""
    require(os.path.exists("/usr/lib/ISOLINUX/isolinux.bin"), "isolinux is not installed (tools/baremetal-lab)")
    ramdisk = tmp_path / "ramdisk"
    ramdisk.mkdir()
    for name, data in {"ipa.kernel": b"a kernel ", "ipa.initramfs": b"an initramfs ",
                       "rescue.kernel": b"a rescue kernel ", "rescue.initramfs": b"a rescue initramfs "}.items():
        (ramdisk / name).write_bytes(data * 100)
    port = free_port()
    running = AgentServer(
        database_factory, tmp_path / "corral",
        groups={"deploy": {"http_server_port": port, "http_url": f"http://192.0.2.1:{port}",
                           "external_http_url": f"http://127.0.0.1:{port}",
                           "external_callback_url": "http://192.0.2.1:6385/baremetal"}},
        deploy_callback_timeout=60, rescue_callback_timeout=3,
        deploy_kernel=f"file://{ramdisk / 'ipa.kernel'}", deploy_ramdisk=f"file://{ramdisk / 'ipa.initramfs'}",
        rescue_kernel=f"file://{ramdisk / 'rescue.kernel'}", rescue_ramdisk=f"file://{ramdisk / 'rescue.initramfs'}",
        file_url_allowed_paths=[str(ramdisk)])
    yield running
    running.stop()


def test_rescue_over_virtual_media_boots_the_rescue_ramdisk_and_a_timeout_ejects_it(
        rescue_server: AgentServer, bmc: Emulator, agent: FakeAgent) -> None:
    server = rescue_server
    client = server.client
    node = vmedia_node(client, bmc.url)
    assert client.patch("/v1/nodes/vm1", json=[
        {"op": "replace", "path": "/rescue_interface", "value": "agent"}]).status_code == 200
    # An active node (adopted: the image is on its disk), with its disk as boot device.
    assert client.patch("/v1/nodes/vm1", json=[{"op": "add", "path": "/instance_info", "value": {
        "image_source": "http://192.0.2.1/image.raw", "image_checksum": "0" * 32}}]).status_code == 200
    assert provision(client, "vm1", "adopt").status_code == 202
    wait_for_state(client, "vm1", "active", timeout=60)
    # Without a rescue ramdisk the rescue is refused at once.
    rescue_ramdisk = server.conf.conductor.rescue_ramdisk
    server.conf.set_override("rescue_ramdisk", None, group="conductor")
    response = provision(client, "vm1", "rescue", rescue_password=PASSWORD)
    assert response.status_code == 400
    assert "Missing are: ['rescue_ramdisk']" in faultstring(response)
    server.conf.set_override("rescue_ramdisk", rescue_ramdisk, group="conductor")

    assert provision(client, "vm1", "rescue", rescue_password=PASSWORD).status_code == 202
    waiting = wait_for_state(client, "vm1", "rescue wait", timeout=60)
    assert waiting["power_state"] == "power on" and bmc.system(SYSTEM_ID)["PowerState"] == "On"
    published = f"http://127.0.0.1:{server.conf.deploy.http_server_port}/redfish/boot-{node['uuid']}.iso"
    cd = bmc.cd(SYSTEM_ID)
    assert (cd["Image"], cd["Inserted"]) == (published, True)
    assert bmc.system(SYSTEM_ID)["Boot"]["BootSourceOverrideTarget"] == "Cd"
    iso = requests.get(published, timeout=10).content
    assert iso_file(iso, "/isolinux/vmlinuz") == "a rescue kernel " * 100
    assert iso_file(iso, "/isolinux/initrd") == "a rescue initramfs " * 100
    assert "ipa-api-url=http://192.0.2.1:6385/baremetal" in iso_file(iso, "/isolinux/isolinux.cfg")

    failed = wait_for_state(client, "vm1", "rescue failed", timeout=60)
    assert failed["last_error"] == "Timeout reached while waiting for rescue ramdisk callback for node"
    assert failed["power_state"] == "power off" and bmc.system(SYSTEM_ID)["PowerState"] == "Off"
    assert not bmc.cd(SYSTEM_ID)["Inserted"]
    assert requests.get(published, timeout=10).status_code == 404

    # Unrescue: the machine boots its disk again.
    assert provision(client, "vm1", "unrescue").status_code == 202
    active = wait_for_state(client, "vm1", "active", timeout=60)
    assert active["power_state"] == "power on" and bmc.system(SYSTEM_ID)["PowerState"] == "On"
    assert bmc.system(SYSTEM_ID)["Boot"]["BootSourceOverrideTarget"] == "Hdd"
