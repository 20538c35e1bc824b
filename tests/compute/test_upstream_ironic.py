"""Compute's ironic virt driver against upstream Ironic 39, from PyPI.

``tools/upstream-ironic setup`` (run by CI) makes a venv with
``ironic==39.*`` and a schema-only sqlite template; the test starts
Ironic's all-in-one ``ironic`` command (API and conductor in one process,
``rpc_transport = none``) on loopback with ``auth_strategy = http_basic``,
fake-hardware with the fake boot, deploy, power and management
interfaces, on a copy of that template. Two nodes with a resource class
are enrolled through upstream's API; ``corral serve`` reaches them with
``[ironic] endpoint_override`` and keystoneauth's ``auth_type =
http_basic``, as upstream Nova reaches a standalone Ironic.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import bcrypt
import pytest
import requests

from corral.compute.virt.ironic import BareMetalError, negotiate_version
from corral.core import configdrive
from tests.baremetal.support import wait_for
# The same client of corral serve as the ironic driver's tests against Corral's own Bare Metal.
from tests.compute.test_ironic_driver import BareMetalCloud
from tests.support.databases import DatabaseFactory
from tests.support.images import active_image
from tests.support.ports import free_port
from tests.support.process import CorralProcess, write_config

pytestmark = [pytest.mark.slow, pytest.mark.backends("first")]

SETUP_DIR = Path(os.environ.get("CORRAL_UPSTREAM_IRONIC_DIR", "/var/tmp/corral-upstream/ironic-39"))
USER, PASSWORD = "nova", "upstream-ironic-password"
RESOURCE_CLASS = "baremetal-gold"
FAKE_INTERFACES = {"boot_interface": "fake", "deploy_interface": "fake", "power_interface": "fake",
                   "management_interface": "fake", "rescue_interface": "fake"}


def _missing(reason: str) -> None:
    """Skip with the reason, as the labs do; under CI (``CORRAL_TEST_REQUIRE_BACKENDS=1``) fail instead."""
    message = f"{reason}: run tools/upstream-ironic setup (CI's .ci/run does)"
    if os.environ.get("CORRAL_TEST_REQUIRE_BACKENDS") == "1":
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


def _setup() -> dict[str, str]:
    """What ``tools/upstream-ironic setup`` wrote."""
    path = SETUP_DIR / "ironic.env"
    if not path.exists():
        _missing(f"upstream Ironic 39 is not set up ({path} is missing)")
    found = dict(line.strip().split("=", 1) for line in path.read_text().splitlines() if "=" in line)
    for key in ("CORRAL_UPSTREAM_IRONIC_BIN", "CORRAL_UPSTREAM_IRONIC_TEMPLATE_DB"):
        if not os.path.exists(found.get(key, "")):
            _missing(f"upstream Ironic 39 is incomplete ({key} missing in {path})")
    if not found.get("CORRAL_UPSTREAM_IRONIC_VERSION", "").startswith("39."):
        _missing(f"{path} is not Ironic 39")
    return found


def test_the_api_version_is_the_lower_of_the_driver_s_and_the_server_s() -> None:
    assert negotiate_version("1.115") == "1.82"  # upstream Ironic 39
    assert negotiate_version("1.82") == "1.82"
    assert negotiate_version("1.58") == "1.58"
    assert negotiate_version(None) == "1.82"  # a server that announces nothing
    with pytest.raises(BareMetalError, match="needs 1.46 or later"):
        negotiate_version("1.45")
    with pytest.raises(BareMetalError, match=r"\[ironic\] shard needs Bare Metal API 1.82"):
        negotiate_version("1.81", shard=True)


class UpstreamIronic:
    """``ironic`` (all-in-one) in a process group of its own, and its API as an operator calls it."""

    def __init__(self, setup: dict[str, str], base: Path) -> None:
        self.base = base
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.database = base / "ironic.sqlite"
        shutil.copyfile(setup["CORRAL_UPSTREAM_IRONIC_TEMPLATE_DB"], self.database)
        users = base / "htpasswd"
        users.write_text(f"{USER}:{bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(4)).decode()}\n")
        self.config = write_config(base / "ironic.conf", {
            "DEFAULT": {
                "host": "upstream-ironic", "rpc_transport": "none", "auth_strategy": "http_basic",
                "http_basic_auth_user_file": users, "use_stderr": "true", "minimum_memory_warning_only": "true",
                "enabled_hardware_types": "fake-hardware",
                **{f"enabled_{name}s": "fake" for name in FAKE_INTERFACES},
                "enabled_network_interfaces": "noop", "enabled_storage_interfaces": "noop",
                "enabled_inspect_interfaces": "no-inspect", "enabled_vendor_interfaces": "no-vendor",
                "enabled_raid_interfaces": "no-raid", "enabled_bios_interfaces": "no-bios",
                "enabled_console_interfaces": "no-console",
                "enabled_firmware_interfaces": "no-firmware",
            },
            "api": {"host_ip": "127.0.0.1", "port": self.port},
            "database": {"connection": f"sqlite:///{self.database}"},
            "dhcp": {"dhcp_provider": "none"},
        })
        self.log_path = base / "ironic.log"
        self.session = requests.Session()
        self.session.trust_env = False
        self.session.auth = (USER, PASSWORD)
        self.session.headers["X-OpenStack-Ironic-API-Version"] = "1.82"
        log = open(self.log_path, "ab")
        self.process = subprocess.Popen([setup["CORRAL_UPSTREAM_IRONIC_BIN"], "--config-file", str(self.config)],
                                        stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()

    def wait_ready(self, timeout: float = 60) -> None:
        def answers() -> bool:
            assert self.process.poll() is None, f"ironic exited with {self.process.returncode}:\n{self.log()}"
            try:
                return self.session.get(self.url + "/v1/nodes", timeout=2).status_code == 200
            except requests.RequestException:
                return False

        wait_for(answers, timeout=timeout, interval=0.2)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-6000:]

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=20)

    def api(self, method: str, path: str, expect: int, **kwargs: Any) -> Any:
        response = self.session.request(method, self.url + path, timeout=30, **kwargs)
        assert response.status_code == expect, f"{method} {path}: {response.status_code} {response.text}"
        return response.json() if response.content else None

    def node(self, uuid: str) -> dict[str, Any]:
        return self.api("GET", f"/v1/nodes/{uuid}", 200)  # type: ignore[no-any-return]

    def wait_node(self, uuid: str, provision_state: str, timeout: float = 30) -> dict[str, Any]:
        def settled() -> dict[str, Any] | None:
            node = self.node(uuid)
            done = node["provision_state"] == provision_state and node["target_provision_state"] is None
            return node if done and node["reservation"] is None else None

        return wait_for(settled, timeout=timeout, interval=0.1)  # type: ignore[no-any-return]

    def enroll(self, name: str) -> str:
        """A fake-hardware node made available, powered on as a deployed machine would be left.

        Upstream's fake deploy leaves the power as it found it, and a fake
        node has no power state until it is set once.
        """
        uuid = str(self.api("POST", "/v1/nodes", 201, json={
            "name": name, "driver": "fake-hardware", "resource_class": RESOURCE_CLASS, **FAKE_INTERFACES,
            "properties": {"cpus": 8, "memory_mb": 16384, "local_gb": 100}})["uuid"])
        self.api("PUT", f"/v1/nodes/{uuid}/states/provision", 202, json={"target": "manage"})
        self.wait_node(uuid, "manageable")
        self.api("PUT", f"/v1/nodes/{uuid}/states/power", 202, json={"target": "power on"})
        wait_for(lambda: self.node(uuid)["power_state"] == "power on", timeout=30, interval=0.1)
        self.api("PUT", f"/v1/nodes/{uuid}/states/provision", 202, json={"target": "provide"})
        self.wait_node(uuid, "available")
        return uuid

    def stored_instance_info(self, uuid: str) -> dict[str, Any]:
        """The node's instance_info as Ironic stored it (its API masks the config drive)."""
        with sqlite3.connect(self.database) as conn:
            (text,) = conn.execute("SELECT instance_info FROM nodes WHERE uuid = ?", (uuid,)).fetchone()
        return json.loads(text)  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def clouds(database_factory: DatabaseFactory,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BareMetalCloud, UpstreamIronic]]:
    setup = _setup()
    base = tmp_path_factory.mktemp("upstream-ironic")
    (base / "state").mkdir()
    ironic = UpstreamIronic(setup, base)
    process: CorralProcess | None = None
    try:
        config = write_config(base / "corral.conf", {
            "DEFAULT": {"host": "metal-host", "update_resources_interval": 1, "sync_power_state_interval": 1},
            "compute": {"poll_interval": 0.1, "cell0_connection": database_factory.new_url("cell0")},
            # As upstream Nova reaches a standalone Ironic.
            "ironic": {"endpoint_override": ironic.url, "auth_type": "http_basic", "username": USER,
                       "password": PASSWORD, "api_retry_interval": 0.1},
            "identity": {"password_hash_rounds": 8},
            **database_factory.all_in_one_sections(),
        })
        # Both start at once: Corral's compute service reads the nodes again every second.
        process = CorralProcess(config, base / "state", port=free_port(), extra_args=["--migrate"]).start(
            wait_path="/identity/v3", timeout=120)
        ironic.wait_ready()
        yield BareMetalCloud(process, base / "state", ""), ironic
    finally:
        if process is not None:
            process.stop()
        ironic.stop()


def test_servers_on_upstream_ironic_nodes(clouds: tuple[BareMetalCloud, UpstreamIronic], tmp_path: Path) -> None:
    cloud, ironic = clouds
    nodes = [ironic.enroll(name) for name in ("gold-0", "gold-1")]

    # Each node is a hypervisor and a Placement provider of one free unit of its class.
    def ready() -> bool:
        listed = cloud.api("GET", "/compute/v2.1/os-hypervisors/detail").json()["hypervisors"]
        if {h["hypervisor_hostname"] for h in listed if h["hypervisor_type"] == "ironic"} != set(nodes):
            return False
        for uuid in nodes:
            response = cloud.placement(f"/resource_providers/{uuid}/inventories")
            inventory = response.json().get("inventories", {}) if response.status_code == 200 else {}
            if inventory.get("CUSTOM_BAREMETAL_GOLD", {}).get("reserved") != 0:
                return False
        return True

    wait_for(ready, timeout=30, interval=0.3)
    for uuid in nodes:
        inventory = cloud.inventory(uuid, "CUSTOM_BAREMETAL_GOLD")
        assert (inventory["total"], inventory["max_unit"]) == (1, 1)
        traits = cloud.placement(f"/resource_providers/{uuid}/traits").json()["traits"]
        assert {"COMPUTE_NODE", "OWNER_NOVA"} <= set(traits)

    image = active_image(cloud.url + "/image", {"X-Auth-Token": cloud.token}, name="gold-image",
                         visibility="public")
    cloud.osc("flavor", "create", "--ram", "1024", "--vcpus", "1", "--disk", "10",
              "--property", "resources:VCPU=0", "--property", "resources:MEMORY_MB=0",
              "--property", "resources:DISK_GB=0", "--property", "resources:CUSTOM_BAREMETAL_GOLD=1", "GOLD")
    user_data = tmp_path / "user-data"
    user_data.write_text("#cloud-config\nhostname: gold\n")
    server_id = cloud.osc("server", "create", "--image", image["id"], "--flavor", "GOLD", "--config-drive", "true",
                          "--user-data", str(user_data), "--property", "tier=gold", "gold")["id"]
    server = cloud.wait_server(server_id, "ACTIVE")
    node_uuid = server["OS-EXT-SRV-ATTR:hypervisor_hostname"]
    assert node_uuid in nodes
    node = ironic.node(node_uuid)
    assert (node["provision_state"], node["instance_uuid"], node["power_state"]) == ("active", server_id, "power on")
    info = node["instance_info"]
    assert (info["image_source"], info["display_name"], info["root_gb"]) == (image["id"], "gold", "10")
    # Upstream keeps the config drive Compute built in instance_info, as it came.
    drive = configdrive.read(configdrive.decode(ironic.stored_instance_info(node_uuid)["configdrive"]))
    meta = json.loads(drive["openstack/latest/meta_data.json"])
    assert (meta["uuid"], meta["name"], meta["meta"]) == (server_id, "gold", {"tier": "gold"})
    assert drive["openstack/latest/user_data"] == user_data.read_bytes()
    allocations = cloud.allocations(server_id)
    assert {rp: item["resources"] for rp, item in allocations.items()} == {node_uuid: {"CUSTOM_BAREMETAL_GOLD": 1}}

    cloud.osc("server", "stop", server_id, json_output=False)
    assert cloud.wait_server(server_id, "SHUTOFF")["OS-EXT-STS:power_state"] == 4
    assert ironic.node(node_uuid)["power_state"] == "power off"
    cloud.osc("server", "start", server_id, json_output=False)
    assert cloud.wait_server(server_id, "ACTIVE")["OS-EXT-STS:power_state"] == 1
    assert ironic.node(node_uuid)["power_state"] == "power on"

    # Rescue and unrescue are the node's provision targets. (Not rebuild: Ironic 39 answers its
    # rebuild target with a 500 when it cannot read the image from an image service.)
    cloud.osc("server", "rescue", server_id, json_output=False)
    cloud.wait_server(server_id, "RESCUE")
    assert ironic.node(node_uuid)["provision_state"] == "rescue"
    cloud.osc("server", "unrescue", server_id, json_output=False)
    cloud.wait_server(server_id, "ACTIVE")
    assert ironic.node(node_uuid)["provision_state"] == "active"

    cloud.osc("server", "delete", server_id, json_output=False)
    wait_for(lambda: cloud.api("GET", f"/compute/v2.1/servers/{server_id}").status_code == 404,
             timeout=30, interval=0.1)
    node = ironic.wait_node(node_uuid, "available")
    assert (node["instance_uuid"], node["instance_info"]) == (None, {})
    assert cloud.allocations(server_id) == {}
    usages = cloud.placement(f"/resource_providers/{node_uuid}/usages").json()["usages"]
    assert usages == {"CUSTOM_BAREMETAL_GOLD": 0}
    # The node is offered again once Compute has read it available.
    wait_for(lambda: cloud.inventory(node_uuid, "CUSTOM_BAREMETAL_GOLD")["reserved"] == 0, timeout=30)
    # Compute got in with its Basic credentials: without them upstream refuses.
    assert requests.get(ironic.url + "/v1/nodes", timeout=30).status_code == 401
