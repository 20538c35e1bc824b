"""The real ironic-python-agent against a Corral server: lookup, heartbeats, in-band cleaning, direct deploy.

Each node's "machine" is the real agent process with a file as its only
disk (``agent_machine``); powering the node on through the fake power
interface is the test starting that process.  Images come from an http
server in the test, with their sha256.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from corral.baremetal.api.app import build_state, make_app
from corral.baremetal.conductor.service import ConductorService
from corral.baremetal.db.schema import TREE
from corral.core import migrations
from corral.core.db import create_engine
from corral.core.server import ThreadedServer
from tests.baremetal.agent_support import ImageServer, TestMachine, raw_image
from tests.baremetal.conftest import make_test_conf
from tests.baremetal.support import wait_for, wait_for_state
from tests.support.databases import DatabaseFactory
from tests.support.http import ApiClient

pytestmark = pytest.mark.slow

AGENT_TIMEOUT = 120
PAYLOAD = b"corral direct deploy " * 1000


class AgentServer:
    """An all-in-one Bare Metal server whose agent settings suit tests (short heartbeats, timeouts)."""

    def __init__(self, database_factory: DatabaseFactory, tmp: Path, groups: dict[str, dict[str, Any]] | None = None,
                 **conductor: Any) -> None:
        url = database_factory.new_url("baremetal")
        self.conf = make_test_conf(
            str(tmp), url,
            conductor={"check_deploy_timeouts_interval": 0.5, "check_rescue_timeouts": 0.5,
                       "clean_step_poll_interval": 0.5,
                       "node_locked_retry_attempts": 3, **conductor},
            api={"ramdisk_heartbeat_timeout": 5},
            **(groups or {}),
        )
        engine = create_engine(url)
        migrations.upgrade(engine, TREE)
        engine.dispose()
        self.state = build_state(self.conf)
        self.conductor = ConductorService(self.conf, rpc_server=False, db=self.state.db).start()
        self.server = ThreadedServer(make_app(self.conf, self.state)).start()
        self.url = self.server.url
        self.client = ApiClient(self.url, {"X-Auth-Token": "admin", "X-OpenStack-Ironic-API-Version": "latest"})
        self.agent_api = ApiClient(self.url, {"X-OpenStack-Ironic-API-Version": "1.68"})

    def stop(self) -> None:
        self.server.stop()
        self.conductor.stop()
        self.state.db.dispose()


@pytest.fixture
def server(database_factory: DatabaseFactory, tmp_path: Path) -> Iterator[AgentServer]:
    running = AgentServer(database_factory, tmp_path / "corral", deploy_callback_timeout=3,
                          clean_callback_timeout=3)
    yield running
    running.stop()


@pytest.fixture
def agent_server(database_factory: DatabaseFactory, tmp_path: Path) -> Iterator[AgentServer]:
    """For the real agent: it heartbeats every 5 s at best, so the callback timeouts are longer."""
    running = AgentServer(database_factory, tmp_path / "corral", deploy_callback_timeout=90,
                          clean_callback_timeout=90)
    yield running
    running.stop()


@pytest.fixture
def images(tmp_path: Path) -> Iterator[ImageServer]:
    directory = tmp_path / "images"
    directory.mkdir()
    server = ImageServer(directory)
    yield server
    server.stop()


@pytest.fixture
def machines(tmp_path: Path) -> Iterator[list[TestMachine]]:
    made: list[TestMachine] = []
    yield made
    for machine in made:
        machine.dispose()


def enroll(client: ApiClient, name: str, mac: str, **fields: Any) -> dict[str, Any]:
    """A direct-deploy node with one port, made manageable."""
    body = {"name": name, "driver": "fake-hardware", "deploy_interface": "direct",
            "driver_info": {"deploy_forces_oob_reboot": True}, **fields}
    node = client.post("/v1/nodes", json=body).json()
    assert client.post("/v1/ports", json={"node_uuid": node["uuid"], "address": mac}).status_code == 201
    assert client.put(f"/v1/nodes/{name}/states/provision", json={"target": "manage"}).status_code == 202
    wait_for_state(client, name, "manageable")
    return node


def set_image(client: ApiClient, name: str, url: str, sha256: str) -> None:
    patch = [{"op": "add", "path": "/instance_info", "value": {
        "image_source": url, "image_os_hash_algo": "sha256", "image_os_hash_value": sha256,
        "image_disk_format": "raw"}}]
    assert client.patch(f"/v1/nodes/{name}", json=patch).status_code == 200


def wait_settled(client: ApiClient, name: str, state: str, machine: TestMachine | None = None) -> dict[str, Any]:
    try:
        return wait_for_state(client, name, state, timeout=AGENT_TIMEOUT)
    except AssertionError as error:
        raise AssertionError(f"{error}\nagent log:\n{machine.log() if machine else ''}") from None


# --------------------------------------------------------------- wire rules


def test_lookup_and_heartbeat_follow_upstream_rules(server: AgentServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    client, agent = server.client, server.agent_api
    node = enroll(client, "wire", "52:54:00:00:00:01")
    old = ApiClient(server.url, {"X-OpenStack-Ironic-API-Version": "1.21"})
    assert old.get("/v1/lookup?addresses=52:54:00:00:00:01").status_code == 404
    assert agent.get("/v1/lookup").status_code == 400
    assert agent.get("/v1/lookup?addresses=not-a-mac").status_code == 400
    # manageable: no agent is expected, so the node is not found.
    assert agent.get("/v1/lookup?addresses=52:54:00:00:00:01").status_code == 404

    client.put("/v1/nodes/wire/states/provision", json={"target": "provide"})
    wait_for(lambda: client.get("/v1/nodes/wire").json()["provision_state"] == "clean wait")
    first = agent.get("/v1/lookup?addresses=52:54:00:00:00:01,zz")
    assert first.status_code == 200
    token = first.json()["config"]["agent_token"]
    assert len(token) >= 32 and first.json()["config"]["agent_token_required"] is True
    assert first.json()["node"]["uuid"] == node["uuid"]
    assert first.json()["node"]["driver_internal_info"]["agent_secret_token"] == "******"
    # The token is handed out once.
    again = agent.get(f"/v1/lookup?node_uuid={node['uuid']}")
    assert again.json()["config"]["agent_token"] == "******"
    shown = client.get("/v1/nodes/wire").json()["driver_internal_info"]
    assert shown["agent_secret_token"] == "******"
    assert token not in client.get("/v1/nodes/wire").text

    # In maintenance a heartbeat is recorded and nothing more (no agent listens at this URL).
    assert client.put("/v1/nodes/wire/maintenance", json={"reason": "wire rules"}).status_code == 202
    beat = {"callback_url": "http://127.0.0.1:9/", "agent_version": "11.0.0"}
    assert agent.post("/v1/heartbeat/wire", json=beat).status_code == 400  # no token
    wrong = agent.post("/v1/heartbeat/wire", json={**beat, "agent_token": "x" * 43})
    assert wrong.status_code == 400
    assert "Invalid or missing agent token received." in wrong.text
    assert agent.post("/v1/heartbeat/wire", json={**beat, "agent_token": token, "bogus": 1}).status_code == 400
    v135 = ApiClient(server.url, {"X-OpenStack-Ironic-API-Version": "1.35"})
    assert v135.post("/v1/heartbeat/wire", json={**beat, "agent_token": token}).status_code == 400
    assert agent.post("/v1/heartbeat/no-such-node", json={**beat, "agent_token": token}).status_code == 404
    accepted = agent.post("/v1/heartbeat/wire", json={**beat, "agent_token": token})
    assert accepted.status_code == 202 and accepted.content == b""
    info = client.get("/v1/nodes/wire").json()["driver_internal_info"]
    assert info["agent_url"] == "http://127.0.0.1:9/" and info["agent_version"] == "11.0.0"
    # Another callback URL than the one on record is refused.
    moved = agent.post("/v1/heartbeat/wire", json={**beat, "callback_url": "http://127.0.0.1:10/",
                                                    "agent_token": token})
    assert moved.status_code == 400
    # The token was never logged.
    assert token not in caplog.text


def test_agent_never_calls_back_deploy_fails_after_the_timeout(server: AgentServer, images: ImageServer) -> None:
    client = server.client
    enroll(client, "silent", "52:54:00:00:00:02", automated_clean=False)
    client.put("/v1/nodes/silent/states/provision", json={"target": "provide"})
    wait_for_state(client, "silent", "available")
    url, sha256 = images.publish("silent.img", raw_image(PAYLOAD))
    set_image(client, "silent", url, sha256)
    client.put("/v1/nodes/silent/states/provision", json={"target": "active"})
    wait_for(lambda: client.get("/v1/nodes/silent").json()["provision_state"] == "wait call-back")
    failed = wait_for_state(client, "silent", "deploy failed", timeout=30)
    assert failed["last_error"] == f"Timeout reached while waiting for callback for node {failed['uuid']}"
    assert failed["power_state"] == "power off"
    assert "agent_secret_token" not in failed["driver_internal_info"]


def test_agent_never_calls_back_cleaning_fails_after_the_timeout(server: AgentServer) -> None:
    client = server.client
    enroll(client, "mute", "52:54:00:00:00:03")
    client.put("/v1/nodes/mute/states/provision", json={"target": "provide"})
    failed = wait_for_state(client, "mute", "clean failed", timeout=30)
    assert failed["last_error"].startswith("Timeout reached while cleaning the node.")
    assert failed["power_state"] == "power off"


# ------------------------------------------------------------ the real agent


def test_real_agent_cleans_then_deploys_an_image(agent_server: AgentServer, images: ImageServer, tmp_path: Path,
                                                 machines: list[TestMachine]) -> None:
    server = agent_server
    client = server.client
    machine = TestMachine(tmp_path / "machines", "m1", "52:54:00:00:01:01")
    machines.append(machine)
    enroll(client, "m1", machine.mac)

    # Manual cleaning: only the metadata is erased (first and last MiB of the disk).
    steps = [{"interface": "deploy", "step": "erase_devices_metadata"}]
    response = client.put("/v1/nodes/m1/states/provision", json={"target": "clean", "clean_steps": steps})
    assert response.status_code == 202
    wait_for(lambda: client.get("/v1/nodes/m1").json()["provision_state"] == "clean wait")
    assert client.get("/v1/nodes/m1").json()["power_state"] == "power on"
    machine.power_on(server.url)
    node = wait_settled(client, "m1", "manageable", machine)
    assert node["last_error"] is None and node["power_state"] == "power off"
    machine.power_off()
    disk = machine.disk_bytes()
    mib = 1024 * 1024
    assert disk[:mib] == b"\0" * mib and disk[-mib:] == b"\0" * mib
    assert disk[mib:-mib] == b"\xaa" * (len(disk) - 2 * mib)

    # Automated cleaning runs the agent's steps with a priority: erase_devices zeroes everything.
    client.put("/v1/nodes/m1/states/provision", json={"target": "provide"})
    wait_for(lambda: client.get("/v1/nodes/m1").json()["provision_state"] == "clean wait")
    machine.power_on(server.url)
    node = wait_settled(client, "m1", "available", machine)
    machine.power_off()
    assert node["last_error"] is None
    assert machine.disk_bytes() == b"\0" * len(disk)

    # The direct deploy: the agent streams the image onto the disk and checks its sha256.
    image = raw_image(PAYLOAD)
    url, sha256 = images.publish("m1.img", image)
    set_image(client, "m1", url, sha256)
    client.put("/v1/nodes/m1/states/provision", json={"target": "active"})
    wait_for(lambda: client.get("/v1/nodes/m1").json()["provision_state"] == "wait call-back")
    machine.power_on(server.url)
    node = wait_settled(client, "m1", "active", machine)
    machine.power_off()
    assert node["last_error"] is None and node["power_state"] == "power on"
    assert machine.disk_bytes()[:len(image)] == image
    assert hashlib.sha256(machine.disk_bytes()[:len(image)]).hexdigest() == sha256
    boot = client.get("/v1/nodes/m1/management/boot_device").json()
    assert boot == {"boot_device": "disk", "persistent": True}
    assert "agent_secret_token" not in node["driver_internal_info"]
    # The agent was asked to sync, never to shut the host down.
    assert "poweroff" not in machine.events.read_text() and "reboot" not in machine.events.read_text()


def test_checksum_mismatch_reported_by_the_agent_fails_the_deploy(
        agent_server: AgentServer, images: ImageServer, tmp_path: Path, machines: list[TestMachine]) -> None:
    server = agent_server
    client = server.client
    machine = TestMachine(tmp_path / "machines", "m2", "52:54:00:00:01:02")
    machines.append(machine)
    enroll(client, "m2", machine.mac, automated_clean=False)
    client.put("/v1/nodes/m2/states/provision", json={"target": "provide"})
    wait_for_state(client, "m2", "available")
    url, _ = images.publish("m2.img", raw_image(PAYLOAD))
    set_image(client, "m2", url, hashlib.sha256(b"another image").hexdigest())
    client.put("/v1/nodes/m2/states/provision", json={"target": "active"})
    wait_for(lambda: client.get("/v1/nodes/m2").json()["provision_state"] == "wait call-back")
    # This agent serves its API over https with a certificate it made and sent in its heartbeats
    # (agent_verify_ca): the conductor reads the failed command through that channel.
    machine.power_on(server.url, tls=True)
    node = wait_settled(client, "m2", "deploy failed", machine)
    assert "Generating TLS parameters automatically" in machine.log()
    assert "Agent returned error for deploy step" in node["last_error"]
    assert "write_image" in node["last_error"]
    assert "checksum" in node["last_error"].lower()
    assert node["power_state"] == "power off"


def test_abort_in_wait_call_back_stops_the_ramdisk_and_voids_the_token(server: AgentServer,
                                                                       images: ImageServer) -> None:
    client, agent = server.client, server.agent_api
    enroll(client, "aborted", "52:54:00:00:00:04", automated_clean=False)
    client.put("/v1/nodes/aborted/states/provision", json={"target": "provide"})
    wait_for_state(client, "aborted", "available")
    url, sha256 = images.publish("aborted.img", raw_image(PAYLOAD))
    set_image(client, "aborted", url, sha256)
    client.put("/v1/nodes/aborted/states/provision", json={"target": "active"})
    wait_for(lambda: client.get("/v1/nodes/aborted").json()["provision_state"] == "wait call-back")
    token = agent.get("/v1/lookup?addresses=52:54:00:00:00:04").json()["config"]["agent_token"]
    assert client.put("/v1/nodes/aborted/states/provision", json={"target": "abort"}).status_code == 202
    node = wait_for_state(client, "aborted", "deploy failed")
    assert node["last_error"] == "By request, the wait call-back operation was aborted"
    assert node["power_state"] == "power off"
    beat = {"callback_url": "http://127.0.0.1:9/", "agent_token": token}
    assert agent.post("/v1/heartbeat/aborted", json=beat).status_code == 400
