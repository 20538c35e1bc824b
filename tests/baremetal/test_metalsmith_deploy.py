"""metalsmith (from PyPI, its command line) deploying and undeploying a direct-deploy node against Corral.

The machine is the fake agent of test_direct_deploy.py: the test plays
the booted ramdisk (lookup, heartbeats) while metalsmith waits for the
node, and reads the config drive the agent was given.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from corral.core import configdrive as configdrive_iso
from tests.baremetal.agent_support import ImageServer, raw_image
from tests.baremetal.support import wait_for, wait_for_state
from tests.baremetal.test_agent import PAYLOAD, AgentServer
from tests.baremetal.test_direct_deploy import PUBLIC_KEY, FakeAgent, agent, available, images
from tests.support.databases import DatabaseFactory

__all__ = ["agent", "images"]
# metalsmith talks to the wire; one backend is enough.
pytestmark = pytest.mark.backends("first")


@pytest.fixture
def server(database_factory: DatabaseFactory, tmp_path: Path) -> Iterator[AgentServer]:
    running = AgentServer(database_factory, tmp_path / "corral", deploy_callback_timeout=60)
    yield running
    running.stop()


def metalsmith(server: AgentServer, *args: str) -> subprocess.Popen[str]:
    command = shutil.which("metalsmith")
    assert command is not None, "metalsmith is in the test extra (pip install metalsmith)"
    env = {**os.environ, "OS_AUTH_TYPE": "admin_token", "OS_TOKEN": "admin", "OS_ENDPOINT": server.url,
           "OS_BAREMETAL_ENDPOINT_OVERRIDE": server.url}
    for name in ("OS_CLOUD", "OS_AUTH_URL", "OS_USERNAME", "OS_PASSWORD", "OS_BAREMETAL_API_VERSION"):
        env.pop(name, None)
    return subprocess.Popen([command, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def finished(process: subprocess.Popen[str]) -> str:
    try:
        out, err = process.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
    assert process.returncode == 0, err
    return out


def test_metalsmith_deploys_with_an_ssh_key_and_undeploys(server: AgentServer, agent: FakeAgent,
                                                         images: ImageServer, tmp_path: Path) -> None:
    client = server.client
    mac = "52:54:00:00:f1:01"
    node = available(client, "ms1", mac, resource_class="baremetal-small")
    # Allocations take nodes with a known power state only (fake power knows what it was told).
    assert client.put("/v1/nodes/ms1/states/power", json={"target": "power off"}).status_code == 202
    wait_for(lambda: client.get("/v1/nodes/ms1").json()["power_state"] == "power off")
    url, sha256 = images.publish("ms1.img", raw_image(PAYLOAD))
    key_file = tmp_path / "id_ed25519.pub"
    key_file.write_text(PUBLIC_KEY + "\n")

    # Quiet: its report of a deployment lists the Networking service's ports, which Corral does not offer.
    deploying = metalsmith(server, "-q", "deploy", "--image", url, "--image-checksum", sha256,
                           "--ssh-public-key", str(key_file), "--resource-class", "baremetal-small",
                           "--hostname", "web-1", "--wait", "60")
    try:
        # The machine boots the agent, which looks the node up and heartbeats.
        wait_for_state(client, "ms1", "wait call-back", timeout=30)
        token = server.agent_api.get(f"/v1/lookup?addresses={mac}").json()["config"]["agent_token"]
        beat = {"callback_url": agent.url, "agent_token": token, "agent_version": "13.0.0"}
        assert server.agent_api.post("/v1/heartbeat/ms1", json=beat).status_code == 202
        wait_for(lambda: agent.named("standby.prepare_image"))
        assert server.agent_api.post("/v1/heartbeat/ms1", json=beat).status_code == 202
    except AssertionError as error:
        deploying.kill()
        out, err = deploying.communicate()
        raise AssertionError(f"{error}\nmetalsmith said:\n{out}\n{err}") from None
    finished(deploying)
    active = client.get("/v1/nodes/ms1").json()
    assert active["provision_state"] == "active" and active["power_state"] == "power on"
    allocation = client.get(f"/v1/allocations/{active['allocation_uuid']}").json()
    assert (allocation["name"], allocation["resource_class"]) == ("web-1", "baremetal-small")
    assert active["instance_info"]["image_source"] == url
    (command,) = agent.named("standby.prepare_image")
    image_info = command["params"]["image_info"]
    assert image_info["urls"] == [url] and image_info["checksum"] == sha256
    # The config drive metalsmith asked for, built by Corral: the key, the host name, the node's UUID.
    files = configdrive_iso.read(configdrive_iso.decode(command["params"]["configdrive"]))
    meta_data = json.loads(files["openstack/latest/meta_data.json"])
    assert meta_data["public_keys"] == {"0": PUBLIC_KEY}
    assert meta_data["uuid"] == node["uuid"] and meta_data["hostname"] == "web-1"

    finished(metalsmith(server, "-q", "undeploy", node["uuid"], "--wait", "60"))
    gone = client.get("/v1/nodes/ms1").json()
    assert gone["provision_state"] == "available" and gone["instance_info"] == {}
    assert gone["allocation_uuid"] is None and gone["instance_uuid"] is None
    assert client.get("/v1/allocations").json()["allocations"] == []
