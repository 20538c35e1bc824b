"""The ``openstack`` CLI boots from an image it uploaded, against ``corral serve``.

``corral serve`` with its own identity service, the clouds.yaml its first
start wrote and the fake compute driver: ``openstack image create --file``
uploads an image, ``openstack server create --image NAME`` boots from it
(the CLI finds the image by name in the Image service, Compute looks its
id up there with the user's token). The CLI runs as a child process: in
one process it keeps identities and endpoints between calls. Client
behaviour does not depend on the database, so this runs on the first
backend only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.identity.conftest import wait_for_compute_host
from tests.support.ports import free_port
from tests.support.process import CorralProcess, write_config

pytestmark = [pytest.mark.slow, pytest.mark.backends("first")]


class Cloud:
    def __init__(self, process: CorralProcess, data_dir: Path) -> None:
        self.process = process
        self.env = {name: value for name, value in os.environ.items() if not name.startswith("OS_")}
        self.env.update(OS_CLIENT_CONFIG_FILE=str(data_dir / "clouds.yaml"), OS_CLOUD="corral")

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "openstackclient.shell", *args, "-f", "json"]
        return subprocess.run(command, capture_output=True, text=True, timeout=180, env=self.env)

    def osc(self, *args: str) -> Any:
        result = self.run(*args)
        assert result.returncode == 0, f"openstack {' '.join(args)} failed:\n{result.stderr}"
        return json.loads(result.stdout) if result.stdout.strip() else None


@pytest.fixture(scope="module")
def cloud(backend: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cloud]:
    base = tmp_path_factory.mktemp("image-boot")
    data_dir = base / "state"
    data_dir.mkdir()
    port = free_port()
    config = write_config(base / "corral.conf", {
        "DEFAULT": {"host": "image-host", "compute_driver": "fake.FakeDriver"},
        "compute": {"poll_interval": 0.2},
        "identity": {"password_hash_rounds": 8},
    })
    process = CorralProcess(config, data_dir, port=port).start(wait_path="/identity/v3")
    try:
        yield Cloud(process, data_dir)
    finally:
        process.stop()


def test_openstack_server_create_from_an_uploaded_image(cloud: Cloud, tmp_path: Path) -> None:
    source = tmp_path / "cirros.raw"
    source.write_bytes(bytes(range(256)) * 64)
    image = cloud.osc("image", "create", "--file", str(source), "--disk-format", "raw", "--container-format",
                      "bare", "cirros")
    assert image["status"] == "active"
    cloud.osc("flavor", "create", "--ram", "256", "--vcpus", "1", "--disk", "1", "--id", "1", "tiny")
    wait_for_compute_host(cloud.process.url, cloud.osc("token", "issue")["id"])

    server = cloud.osc("server", "create", "--image", "cirros", "--flavor", "tiny", "--nic", "none", "--wait",
                       "vm-from-image")
    assert server["status"] == "ACTIVE"
    shown = cloud.osc("server", "show", "vm-from-image")
    # The CLI shows the image as "name (id)".
    assert shown["image"] == f"cirros ({image['id']})"
    assert [(row["Name"], row["Status"]) for row in cloud.osc("server", "list", "--image", "cirros")] == [
        ("vm-from-image", "ACTIVE")]

    # An image the flavor's disk cannot hold: the CLI shows Nova's refusal.
    big = cloud.osc("image", "create", "--file", str(source), "--disk-format", "raw", "--container-format", "bare",
                    "--min-disk", "2", "big")
    refused = cloud.run("server", "create", "--image", "big", "--flavor", "tiny", "--nic", "none", "vm-too-small")
    assert refused.returncode != 0
    assert refused.stderr.startswith("BadRequestException: 400")
    assert refused.stderr.rstrip().endswith(
        "Flavor's disk is smaller than the minimum size specified in image metadata. Flavor disk is "
        "1073741824 bytes, minimum size is 2147483648 bytes.")
    assert big["min_disk"] == 2
    assert [row["Name"] for row in cloud.osc("server", "list")] == ["vm-from-image"]
