"""The ``openstack`` command line with server actions, metadata, tags, events and the console log.

Each command runs as a child process against the compute test fixture
(two fake hosts, the Image service the boots use); the compute services
run a pass between commands, as they would every poll interval. Client
behaviour does not depend on the database: first backend only.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.compute.conftest import IMAGE, ComputeServer
from tests.compute.test_keypair_group_clients import VERSION, _environment, _osc
from tests.compute.test_real_clients import identity_url  # noqa: F401 - the fixture
from tests.image.conftest import active

pytestmark = [pytest.mark.slow, pytest.mark.backends("first")]

USER_A = "user-a:project-a"


def _run(cloud: ComputeServer, identity: str, tmp_path: Path, *args: str,
         token: str = USER_A) -> subprocess.CompletedProcess[str]:
    """A command that prints no table (actions): no ``-f json``."""
    command = [sys.executable, "-m", "openstackclient.shell", "--os-cloud", "corral",
               "--os-compute-api-version", VERSION, *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120,
                          env=_environment(cloud, identity, tmp_path, token))


def test_server_actions_with_the_openstack_cli(cloud: ComputeServer, identity_url: str,  # noqa: F811
                                               tmp_path: Path) -> None:
    def osc(*args: str, token: str = USER_A) -> Any:
        return _osc(cloud, identity_url, tmp_path, *args, token=token)

    def run(*args: str, token: str = USER_A) -> str:
        result = _run(cloud, identity_url, tmp_path, *args, token=token)
        assert result.returncode == 0, f"openstack {' '.join(args)} failed:\n{result.stderr}"
        return result.stdout

    osc("server", "create", "--image", IMAGE, "--flavor", "m1.tiny", "--nic", "none", "vm")
    cloud.run_computes()
    assert osc("server", "show", "vm")["status"] == "ACTIVE"

    run("server", "stop", "vm")
    assert osc("server", "show", "vm")["OS-EXT-STS:task_state"] == "powering-off"
    cloud.run_computes()
    assert osc("server", "show", "vm")["status"] == "SHUTOFF"
    run("server", "start", "vm")
    cloud.run_computes()
    assert osc("server", "show", "vm")["status"] == "ACTIVE"

    run("server", "reboot", "vm")
    assert osc("server", "show", "vm")["status"] == "REBOOT"
    cloud.run_computes()
    run("server", "reboot", "--hard", "vm")
    assert osc("server", "show", "vm")["status"] == "HARD_REBOOT"
    cloud.run_computes()
    assert osc("server", "show", "vm")["status"] == "ACTIVE"

    other = active(cloud.images.admin(), name="other", visibility="public")["id"]
    rebuilt = osc("server", "rebuild", "--image", other, "vm")
    assert rebuilt["status"] == "REBUILD" and other in str(rebuilt["image"])
    cloud.run_computes()
    assert osc("server", "show", "vm")["status"] == "ACTIVE"

    run("server", "rescue", "vm")
    cloud.run_computes()
    assert osc("server", "show", "vm")["status"] == "RESCUE"
    run("server", "unrescue", "vm")
    cloud.run_computes()
    assert osc("server", "show", "vm")["status"] == "ACTIVE"

    run("server", "lock", "--reason", "maintenance", "vm")
    shown = osc("server", "show", "vm")
    assert shown["locked"] is True and shown["locked_reason"] == "maintenance"
    refused = _run(cloud, identity_url, tmp_path, "server", "stop", "vm")
    assert refused.returncode != 0 and "is locked" in refused.stderr
    run("server", "unlock", "vm")
    assert osc("server", "show", "vm")["locked"] is False

    run("server", "set", "--property", "role=web", "--tag", "blue", "--tag", "prod", "vm")
    shown = osc("server", "show", "vm")
    assert shown["properties"] == {"role": "web"} and sorted(shown["tags"]) == ["blue", "prod"]
    assert [row["Name"] for row in osc("server", "list", "--tags", "blue")] == ["vm"]
    assert osc("server", "list", "--not-tags", "blue") == []

    events = osc("server", "event", "list", "vm")
    assert [row["Action"] for row in events] == [
        "unlock", "lock", "unrescue", "rescue", "rebuild", "reboot", "reboot", "start", "stop", "create"]
    stop = osc("server", "event", "show", "vm", events[-2]["Request ID"])
    assert stop["action"] == "stop" and "compute_stop_instance" in str(stop["events"])

    console = run("console", "log", "show", "vm")
    assert console.strip() == "FAKE CONSOLE OUTPUT\nANOTHER\nLAST LINE"
    assert run("console", "log", "show", "--lines", "1", "vm").strip() == "LAST LINE"


def test_console_log_and_image_refused_with_the_openstack_cli(cloud: ComputeServer, identity_url: str,  # noqa: F811
                                                              tmp_path: Path) -> None:
    _osc(cloud, identity_url, tmp_path, "server", "create", "--image", IMAGE, "--flavor", "m1.tiny", "--nic", "none",
         "vm")
    cloud.run_computes()
    cloud.conf.set_override("console_log", False, group="fake_driver")
    try:
        refused = _run(cloud, identity_url, tmp_path, "console", "log", "show", "vm")
    finally:
        cloud.conf.clear_override("console_log", group="fake_driver")
    assert refused.returncode != 0
    assert "501" in refused.stderr and "The requested functionality is not supported." in refused.stderr

    # The fake driver, as Ironic's, cannot snapshot: the compute service deletes the image it was to fill.
    done = threading.Event()

    def computes() -> None:
        while not done.wait(0.2):
            cloud.run_computes()

    worker = threading.Thread(target=computes)
    worker.start()
    try:
        snapshot = subprocess.run(
            [sys.executable, "-m", "openstackclient.shell", "--os-cloud", "corral", "--os-compute-api-version",
             VERSION, "server", "image", "create", "--name", "snap", "--wait", "vm"],
            capture_output=True, text=True, timeout=120, env=_environment(cloud, identity_url, tmp_path, USER_A))
    finally:
        done.set()
        worker.join()
    assert snapshot.returncode != 0, snapshot.stdout
    images = cloud.images.admin().get("/v2/images?name=snap").json()["images"]
    assert images == []
    events = _osc(cloud, identity_url, tmp_path, "server", "event", "list", "vm")
    assert events[0]["Action"] == "createImage"
    failed = _osc(cloud, identity_url, tmp_path, "server", "event", "show", "vm", events[0]["Request ID"])
    assert failed["message"] == "Error" and "'result': 'Error'" in str(failed["events"])
    assert _osc(cloud, identity_url, tmp_path, "server", "show", "vm")["status"] == "ACTIVE"
