"""Real clients against ``corral serve`` with its default authentication, knowing only the clouds.yaml it wrote.

The first start creates the admin and a clouds.yaml (auth URL, user name,
password, project); the ``openstack`` CLI, openstacksdk and metalsmith use
nothing else: every endpoint comes from the catalog.  Client behaviour does
not depend on the database, so these run on the first backend only.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.ports import free_port
from tests.support.process import CorralProcess, write_config

pytestmark = [
    pytest.mark.slow,
    pytest.mark.backends("first"),
    pytest.mark.filterwarnings(r"ignore::PendingDeprecationWarning:openstack\..*"),
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::openstack.warnings._RemovedInSDKWarning"),
]

IMAGE = "70a599e0-31e7-49b7-b260-868f441e862b"


class Cloud:
    def __init__(self, process: CorralProcess, data_dir: Path) -> None:
        self.process = process
        self.clouds_yaml = data_dir / "clouds.yaml"
        self.env = {name: value for name, value in os.environ.items() if not name.startswith("OS_")}
        self.env.update(OS_CLIENT_CONFIG_FILE=str(self.clouds_yaml), OS_CLOUD="corral")

    def osc(self, *args: str, parse: bool = True) -> Any:
        command = [sys.executable, "-m", "openstackclient.shell", *args] + (["-f", "json"] if parse else [])
        result = subprocess.run(command, capture_output=True, text=True, timeout=180, env=self.env)
        assert result.returncode == 0, f"openstack {' '.join(args)} failed:\n{result.stderr}"
        return json.loads(result.stdout) if parse and result.stdout.strip() else result.stdout

    def connect(self, monkeypatch: pytest.MonkeyPatch) -> Any:
        import openstack

        monkeypatch.setenv("OS_CLIENT_CONFIG_FILE", str(self.clouds_yaml))
        return openstack.connect(cloud="corral")


@pytest.fixture(scope="module")
def cloud(backend: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cloud]:
    base = tmp_path_factory.mktemp("clients")
    data_dir = base / "state"
    data_dir.mkdir()
    port = free_port()
    config = write_config(base / "corral.conf", {
        "DEFAULT": {"host": "cloud-host", "compute_driver": "fake.FakeDriver"},
        "placement": {"local_port": port},
        "compute": {"poll_interval": 0.2},
    })
    process = CorralProcess(config, data_dir, port=port).start(wait_path="/identity/v3")
    try:
        yield Cloud(process, data_dir)
    finally:
        process.stop()


def test_first_start_writes_a_private_clouds_yaml_and_logs_no_password(cloud: Cloud) -> None:
    assert stat.S_IMODE(cloud.clouds_yaml.stat().st_mode) == 0o600
    data_dir = cloud.clouds_yaml.parent
    assert stat.S_IMODE((data_dir / "identity.sqlite").stat().st_mode) == 0o600
    assert stat.S_IMODE((data_dir / "fernet-keys").stat().st_mode) == 0o700
    entry = yaml.safe_load(cloud.clouds_yaml.read_text())["clouds"]["corral"]
    assert entry["auth"]["auth_url"] == cloud.process.url + "/identity"
    assert (entry["auth"]["username"], entry["auth"]["project_name"]) == ("admin", "admin")
    log = cloud.process.log()
    assert str(cloud.clouds_yaml) in log
    assert entry["auth"]["password"] not in log


def test_openstack_cli_with_the_written_clouds_yaml(cloud: Cloud) -> None:
    token = cloud.osc("token", "issue")
    assert token["project_id"] and token["user_id"] and token["id"]
    catalog = {row["Type"] for row in cloud.osc("catalog", "list")}
    assert catalog == {"identity", "placement", "baremetal", "compute", "image"}
    # The compute service reports its host to Placement through a service token of its own:
    # the provider first, then its inventory (a boot before that finds no host).
    deadline = time.monotonic() + 60
    providers: list[Any] = []
    inventory: list[Any] = []
    while not inventory and time.monotonic() < deadline:
        providers = cloud.osc("resource", "provider", "list")
        if providers:
            inventory = cloud.osc("resource", "provider", "inventory", "list", providers[0]["uuid"])
        time.sleep(0.3)
    assert [row["name"] for row in providers] == ["cloud-host"]
    assert "MEMORY_MB" in {row["resource_class"] for row in inventory}
    node = cloud.osc("baremetal", "node", "create", "--driver", "fake-hardware", "--name", "metal-1")
    assert [row["name"] for row in cloud.osc("baremetal", "node", "list")] == [node["name"]]
    cloud.osc("flavor", "create", "--ram", "256", "--vcpus", "1", "--disk", "1", "--id", "1", "tiny")
    assert [row["Name"] for row in cloud.osc("flavor", "list")] == ["tiny"]
    # A boot from a block device mapping: the image is recorded, not looked up.
    server = cloud.osc("server", "create", "--flavor", "tiny", "--nic", "none", "--wait", "--block-device",
                       f"uuid={IMAGE},source_type=image,destination_type=local,boot_index=0", "vm-1")
    assert server["status"] == "ACTIVE"
    assert [(row["Name"], row["Status"]) for row in cloud.osc("server", "list")] == [("vm-1", "ACTIVE")]
    services = cloud.osc("compute", "service", "list")
    assert [(row["Host"], row["State"]) for row in services] == [("cloud-host", "up")]
    usages = cloud.osc("resource", "provider", "usage", "show", providers[0]["uuid"])
    assert {row["resource_class"]: row["usage"] for row in usages}["MEMORY_MB"] == 256


def test_openstacksdk_finds_every_service_from_the_catalog(cloud: Cloud, monkeypatch: pytest.MonkeyPatch) -> None:
    conn = cloud.connect(monkeypatch)
    try:
        assert conn.placement.get_endpoint().rstrip("/") == cloud.process.url + "/placement"
        # The compute service reports its host on its own, after the server started.
        deadline = time.monotonic() + 60
        while not (providers := list(conn.placement.resource_providers())) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert [rp.name for rp in providers] == ["cloud-host"]
        node = conn.baremetal.create_node(driver="fake-hardware", name="sdk-node", resource_class="metal")
        assert conn.baremetal.get_node("sdk-node").id == node.id
        flavor = conn.compute.create_flavor(name="sdk-flavor", ram=128, vcpus=1, disk=1)
        image = conn.image.create_image(name="sdk-image", data=b"\0" * 4096, disk_format="raw",
                                        container_format="bare", wait=True, allow_duplicates=True)
        created = conn.compute.create_server(name="sdk-vm", flavor_id=flavor.id, image_id=image.id, networks="none")
        assert conn.compute.wait_for_server(created, wait=60).status == "ACTIVE"
        assert conn.compute.get_server(created).image.id == image.id
        assert "sdk-vm" in {server.name for server in conn.compute.servers()}
        conn.compute.delete_server(created)
        conn.compute.wait_for_delete(created, wait=60)
    finally:
        conn.close()


def test_metalsmith_reserves_a_node(cloud: Cloud, monkeypatch: pytest.MonkeyPatch) -> None:
    metalsmith = pytest.importorskip("metalsmith")
    conn = cloud.connect(monkeypatch)
    try:
        node = conn.baremetal.create_node(driver="fake-hardware", name="ms-node", resource_class="ms-class")
        conn.baremetal.set_node_provision_state(node, "manage", wait=True, timeout=60)
        conn.baremetal.set_node_provision_state(node, "provide", wait=True, timeout=60)
        conn.baremetal.set_node_power_state(node, "power off", wait=True, timeout=60)
        provisioner = metalsmith.Provisioner(cloud_region=conn.config)
        reserved = provisioner.reserve_node("ms-class", hostname="ms-host")
        assert reserved.id == node.id
        allocation = conn.baremetal.get_allocation("ms-host")
        assert (allocation.node_id, allocation.state) == (node.id, "active")
    finally:
        conn.close()
