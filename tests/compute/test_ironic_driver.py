"""Servers on bare metal: ``corral serve`` with its default ironic virt driver and fake-hardware nodes.

One ``corral serve`` per backend, every service's database on it, with
its own identity service and the clouds.yaml its first start wrote: the
compute service reaches its own Bare Metal service with the service
credentials the server created. The ``openstack`` CLI boots servers
onto enrolled fake-hardware nodes; the node shows the server, its image
and the config drive Compute built. The nodes are made ready once per
backend and every test leaves them available again.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import requests
import sqlalchemy as sa

from corral.core import configdrive
from tests.baremetal.support import wait_for
from tests.support import osc
from tests.support.databases import DatabaseFactory
from tests.support.images import active_image
from tests.support.ports import free_port
from tests.support.process import CorralProcess, write_config

pytestmark = pytest.mark.slow

IRONIC = {"X-OpenStack-Ironic-API-Version": "1.82"}
PUBLIC_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHcorralcorralcorralcorralcorralcorralcorral k@corral"
NODES = ("bm-0", "bm-1")


class BareMetalCloud:
    def __init__(self, process: CorralProcess, data_dir: Path, baremetal_url: str) -> None:
        self.process = process
        self.url = process.url
        self.baremetal_url = baremetal_url
        self.env = {"OS_CLIENT_CONFIG_FILE": str(data_dir / "clouds.yaml"), "OS_CLOUD": "corral"}
        self.token = self.osc("token", "issue")["id"]
        self.nodes: dict[str, str] = {}
        # The public image the servers boot from.
        self.image = ""

    def run(self, *args: str, json_output: bool = True) -> osc.OscResult:
        """``openstack`` in this process (a child process per command would cost seconds)."""
        command = ["--os-compute-api-version", "2.73", *args]
        if json_output:
            command += ["-f", "json"]
        return osc.run(command, env=self.env)

    def osc(self, *args: str, json_output: bool = True) -> Any:
        result = self.run(*args, json_output=json_output)
        assert result.code == 0, f"openstack {' '.join(args)} failed:\n{result.stderr}\n{self.process.log()[-3000:]}"
        return json.loads(result.stdout) if json_output and result.stdout.strip() else result.stdout

    def api(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        headers = {"X-Auth-Token": self.token, **IRONIC, **kwargs.pop("headers", {})}
        return requests.request(method, self.url + path, headers=headers, timeout=30, **kwargs)

    def node(self, name: str) -> dict[str, Any]:
        response = self.api("GET", f"/baremetal/v1/nodes/{name}")
        assert response.status_code == 200, response.text
        return response.json()  # type: ignore[no-any-return]

    def wait_node(self, name: str, provision_state: str, timeout: float = 30) -> dict[str, Any]:
        def reached() -> dict[str, Any] | None:
            node = self.node(name)
            settled = node["provision_state"] == provision_state and node["target_provision_state"] is None
            return node if settled and node["reservation"] is None else None

        return wait_for(reached, timeout=timeout, interval=0.1)  # type: ignore[no-any-return]

    def server(self, server_id: str) -> dict[str, Any]:
        response = self.api("GET", f"/compute/v2.1/servers/{server_id}",
                            headers={"OpenStack-API-Version": "compute 2.73"})
        assert response.status_code == 200, response.text
        return response.json()["server"]  # type: ignore[no-any-return]

    def wait_server(self, server_id: str, status: str, timeout: float = 30) -> dict[str, Any]:
        def reached() -> dict[str, Any] | None:
            server = self.server(server_id)
            return server if server["status"] == status and server["OS-EXT-STS:task_state"] is None else None

        return wait_for(reached, timeout=timeout, interval=0.1)  # type: ignore[no-any-return]

    def placement(self, path: str) -> requests.Response:
        return self.api("GET", "/placement" + path, headers={"OpenStack-API-Version": "placement 1.36"})

    def allocations(self, consumer: str) -> dict[str, Any]:
        response = self.placement(f"/allocations/{consumer}")
        return response.json()["allocations"]  # type: ignore[no-any-return]

    def inventory(self, node_uuid: str, resource_class: str) -> dict[str, Any]:
        response = self.placement(f"/resource_providers/{node_uuid}/inventories")
        assert response.status_code == 200, response.text
        return response.json()["inventories"][resource_class]  # type: ignore[no-any-return]


def _enroll(cloud: BareMetalCloud, name: str, resource_class: str | None, traits: list[str] | None = None,
            **extra: str) -> str:
    body: dict[str, Any] = {"name": name, "driver": "fake-hardware", "deploy_interface": "fake",
                            "rescue_interface": "fake", **extra}
    if resource_class:
        body["resource_class"] = resource_class
    created = cloud.api("POST", "/baremetal/v1/nodes", json=body)
    assert created.status_code == 201, created.text
    uuid = str(created.json()["uuid"])
    if traits:
        assert cloud.api("PUT", f"/baremetal/v1/nodes/{uuid}/traits", json={"traits": traits}).status_code == 204
    assert cloud.api("PUT", f"/baremetal/v1/nodes/{uuid}/states/provision",
                     json={"target": "manage"}).status_code == 202
    cloud.wait_node(uuid, "manageable")
    assert cloud.api("PUT", f"/baremetal/v1/nodes/{uuid}/states/power",
                     json={"target": "power off"}).status_code == 202
    wait_for(lambda: cloud.node(uuid)["power_state"] == "power off", timeout=30)
    assert cloud.api("PUT", f"/baremetal/v1/nodes/{uuid}/states/provision",
                     json={"target": "provide"}).status_code == 202
    cloud.wait_node(uuid, "available")
    return uuid


@pytest.fixture(scope="module")
def bm_cloud(database_factory: DatabaseFactory, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BareMetalCloud]:
    base = tmp_path_factory.mktemp("ironic-driver")
    data_dir = base / "state"
    data_dir.mkdir()
    port = free_port()
    baremetal_url = database_factory.new_url("baremetal")
    # No compute_driver: the all-in-one default is the ironic driver against this server's Bare Metal.
    config = write_config(base / "corral.conf", {
        "DEFAULT": {"host": "bm-host", "update_resources_interval": 1, "sync_power_state_interval": 1},
        "compute": {"poll_interval": 0.1, "cell0_connection": database_factory.new_url("cell0")},
        "ironic": {"api_retry_interval": 0.1},
        "identity": {"password_hash_rounds": 8},
        **database_factory.all_in_one_sections(baremetal_url),
    })
    process = CorralProcess(config, data_dir, port=port, extra_args=["--migrate"]).start(
        wait_path="/identity/v3", timeout=120)
    try:
        cloud = BareMetalCloud(process, data_dir, baremetal_url)
        for name in NODES:
            cloud.nodes[name] = _enroll(cloud, name, "baremetal")
        # Its deployments fail: its trait selects a deploy template whose step cannot run.
        cloud.nodes["broken"] = _enroll(cloud, "broken", "broken", ["CUSTOM_FAIL_DEPLOY"])
        # Without a resource class a node is no hypervisor.
        cloud.nodes["unclassified"] = _enroll(cloud, "unclassified", None)
        # Two nodes for one flavor whose template sets the BIOS: the one without a BIOS
        # interface fails its deploy. The scheduler breaks the tie between equal nodes by
        # name (the node's UUID), so the failing one is tried first.
        cloud.nodes["retry-bad"] = _enroll(cloud, "retry-bad", "retry", ["CUSTOM_RETRY"], bios_interface="no-bios",
                                           uuid="00000000-0000-4000-8000-000000000001")
        cloud.nodes["retry-good"] = _enroll(cloud, "retry-good", "retry", ["CUSTOM_RETRY"],
                                            uuid="ffffffff-0000-4000-8000-000000000001")
        for name, settings in (("CUSTOM_FAIL_DEPLOY", "not a list"),
                               ("CUSTOM_RETRY", [{"name": "boot_mode", "value": "uefi"}])):
            template = {"name": name, "steps": [
                {"interface": "bios", "step": "apply_configuration", "args": {"settings": settings},
                 "priority": 150}]}
            created = cloud.api("POST", "/baremetal/v1/deploy_templates", json=template,
                                headers={"X-OpenStack-Ironic-API-Version": "1.55"})
            assert created.status_code == 201, created.text
        image = active_image(cloud.url + "/image", {"X-Auth-Token": cloud.token}, name="bm-image",
                             visibility="public")
        cloud.image = image["id"]
        bare = ["--ram", "1024", "--vcpus", "1", "--disk", "10", "--property", "resources:VCPU=0",
                "--property", "resources:MEMORY_MB=0", "--property", "resources:DISK_GB=0"]
        cloud.osc("flavor", "create", *bare, "--property", "resources:CUSTOM_BAREMETAL=1", "BM")
        cloud.osc("flavor", "create", *bare, "--property", "resources:CUSTOM_BROKEN=1", "--property",
                  "trait:CUSTOM_FAIL_DEPLOY=required", "BM-BROKEN")
        cloud.osc("flavor", "create", *bare, "--property", "resources:CUSTOM_RETRY=1", "--property",
                  "trait:CUSTOM_RETRY=required", "BM-RETRY")
        key_file = base / "key.pub"
        key_file.write_text(PUBLIC_KEY + "\n")
        cloud.osc("keypair", "create", "--public-key", str(key_file), "K")
        yield cloud
    finally:
        process.stop()


def _hypervisors(cloud: BareMetalCloud) -> dict[str, str]:
    return {row["Hypervisor Hostname"]: row["Hypervisor Type"] for row in cloud.osc("hypervisor", "list")}


def _wait_ready(cloud: BareMetalCloud, names: tuple[str, ...]) -> None:
    """Until the nodes are hypervisors whose unit Placement offers (not reserved)."""
    wanted = {cloud.nodes[name] for name in names}

    def ready() -> bool:
        listed = cloud.api("GET", "/compute/v2.1/os-hypervisors").json()["hypervisors"]
        if not wanted <= {hypervisor["hypervisor_hostname"] for hypervisor in listed}:
            return False
        for name in names:
            response = cloud.placement(f"/resource_providers/{cloud.nodes[name]}/inventories")
            inventories = response.json().get("inventories", {}) if response.status_code == 200 else {}
            if not any(item["reserved"] == 0 for item in inventories.values()):
                return False
        return True

    wait_for(ready, timeout=30, interval=0.3)


def _stored_instance_info(cloud: BareMetalCloud, node_uuid: str) -> dict[str, Any]:
    """The node's instance_info as stored (the API masks the config drive)."""
    engine = sa.create_engine(cloud.baremetal_url)
    try:
        with engine.connect() as conn:
            text = conn.execute(sa.text("SELECT instance_info FROM nodes WHERE uuid = :uuid"),
                                {"uuid": node_uuid}).scalar_one()
    finally:
        engine.dispose()
    return orjson.loads(text)  # type: ignore[no-any-return]


def _delete(cloud: BareMetalCloud, *servers: str) -> None:
    cloud.osc("server", "delete", *servers, json_output=False)
    for server in servers:
        wait_for(lambda server=server: cloud.api("GET", f"/compute/v2.1/servers/{server}").status_code == 404,
                 timeout=30, interval=0.1)


def test_nodes_with_a_resource_class_are_hypervisors(bm_cloud: BareMetalCloud) -> None:
    cloud = bm_cloud
    classified = (*NODES, "broken", "retry-bad", "retry-good")
    _wait_ready(cloud, classified)
    hypervisors = _hypervisors(cloud)
    assert hypervisors == {cloud.nodes[name]: "ironic" for name in classified}
    inventory = cloud.inventory(cloud.nodes["bm-0"], "CUSTOM_BAREMETAL")
    assert (inventory["total"], inventory["reserved"], inventory["max_unit"]) == (1, 0, 1)
    traits = cloud.placement(f"/resource_providers/{cloud.nodes['broken']}/traits").json()["traits"]
    assert {"CUSTOM_FAIL_DEPLOY", "COMPUTE_NODE"} <= set(traits)
    # A node in maintenance cannot take a server: its unit is reserved.
    assert cloud.api("PUT", f"/baremetal/v1/nodes/{cloud.nodes['bm-1']}/maintenance",
                     json={"reason": "fan"}).status_code == 202
    wait_for(lambda: cloud.inventory(cloud.nodes["bm-1"], "CUSTOM_BAREMETAL")["reserved"] == 1, timeout=15)
    assert cloud.api("DELETE", f"/baremetal/v1/nodes/{cloud.nodes['bm-1']}/maintenance").status_code == 202
    wait_for(lambda: cloud.inventory(cloud.nodes["bm-1"], "CUSTOM_BAREMETAL")["reserved"] == 0, timeout=15)


def test_server_on_a_node_with_its_config_drive_and_power_actions(bm_cloud: BareMetalCloud, tmp_path: Path) -> None:
    cloud = bm_cloud
    _wait_ready(cloud, NODES)
    user_data = tmp_path / "user-data"
    user_data.write_text("#cloud-config\nhostname: metal\n")
    server = cloud.osc("server", "create", "--image", cloud.image, "--flavor", "BM", "--key-name", "K",
                       "--config-drive", "true", "--user-data", str(user_data), "--property", "role=db",
                       "--wait", "metal")
    assert server["status"] == "ACTIVE"
    server_id = server["id"]
    node_uuid = server["OS-EXT-SRV-ATTR:hypervisor_hostname"]
    assert node_uuid in (cloud.nodes["bm-0"], cloud.nodes["bm-1"])
    node = cloud.node(node_uuid)
    assert (node["provision_state"], node["instance_uuid"], node["power_state"]) == (
        "active", server_id, "power on")
    info = node["instance_info"]
    assert (info["image_source"], info["display_name"], info["root_gb"]) == (cloud.image, "metal", "10")
    assert info["configdrive"] == "******"
    # The config drive Compute built, as the node stores it.
    drive = configdrive.read(configdrive.decode(_stored_instance_info(cloud, node_uuid)["configdrive"]))
    meta = json.loads(drive["openstack/latest/meta_data.json"])
    assert (meta["uuid"], meta["name"], meta["meta"]) == (server_id, "metal", {"role": "db"})
    # The key as imported (the file's trailing newline included).
    assert {name: key.strip() for name, key in meta["public_keys"].items()} == {"K": PUBLIC_KEY}
    assert drive["openstack/latest/user_data"] == user_data.read_bytes()
    assert json.loads(drive["openstack/latest/network_data.json"])["links"] == []
    assert len(cloud.allocations(server_id)) == 1

    cloud.osc("server", "stop", "metal", json_output=False)
    cloud.wait_server(server_id, "SHUTOFF")
    assert cloud.node(node_uuid)["power_state"] == "power off"
    cloud.osc("server", "start", "metal", json_output=False)
    cloud.wait_server(server_id, "ACTIVE")
    assert cloud.node(node_uuid)["power_state"] == "power on"
    cloud.osc("server", "reboot", "--hard", "metal", json_output=False)
    cloud.wait_server(server_id, "ACTIVE")

    # Rebuild: the node is redeployed with the new image and a new config drive.
    other = active_image(cloud.url + "/image", {"X-Auth-Token": cloud.token}, name="bm-other", visibility="public")
    cloud.osc("server", "rebuild", "--image", other["id"], "metal", json_output=False)
    cloud.wait_server(server_id, "ACTIVE")
    node = cloud.node(node_uuid)
    assert (node["provision_state"], node["instance_info"]["image_source"]) == ("active", other["id"])
    drive = configdrive.read(configdrive.decode(_stored_instance_info(cloud, node_uuid)["configdrive"]))
    assert json.loads(drive["openstack/latest/meta_data.json"])["uuid"] == server_id
    cloud.osc("server", "rescue", "metal", json_output=False)
    cloud.wait_server(server_id, "RESCUE")
    assert cloud.node(node_uuid)["provision_state"] == "rescue"
    cloud.osc("server", "unrescue", "metal", json_output=False)
    cloud.wait_server(server_id, "ACTIVE")
    assert cloud.node(node_uuid)["provision_state"] == "active"
    # Powered off behind Compute's back: the power state sync shows the server SHUTOFF.
    assert cloud.api("PUT", f"/baremetal/v1/nodes/{node_uuid}/states/power",
                     json={"target": "power off"}).status_code == 202
    assert cloud.wait_server(server_id, "SHUTOFF")["OS-EXT-STS:power_state"] == 4

    _delete(cloud, server_id)
    node = cloud.wait_node(node_uuid, "available")
    assert (node["instance_uuid"], node["instance_info"]) == (None, {})
    assert cloud.allocations(server_id) == {}


def test_more_servers_than_nodes_is_no_valid_host(bm_cloud: BareMetalCloud) -> None:
    cloud = bm_cloud
    _wait_ready(cloud, NODES)
    # Waiting through the API: the CLI's --wait polls every 2 seconds.
    placed = [cloud.osc("server", "create", "--image", cloud.image, "--flavor", "BM", name)["id"]
              for name in ("one", "two")]
    for server in placed:
        cloud.wait_server(server, "ACTIVE")
    assert {cloud.server(server)["OS-EXT-SRV-ATTR:hypervisor_hostname"] for server in placed} == {
        cloud.nodes[name] for name in NODES}
    third = cloud.osc("server", "create", "--image", cloud.image, "--flavor", "BM", "three")
    shown = cloud.wait_server(third["id"], "ERROR")
    assert shown["fault"]["message"].startswith("No valid host was found.")
    assert cloud.osc("server", "show", "three")["status"] == "ERROR"
    cloud.osc("server", "delete", *placed, third["id"], json_output=False)
    for name in NODES:
        cloud.wait_node(cloud.nodes[name], "available")


def test_a_failed_deploy_with_no_node_left_frees_the_node_and_the_claim(bm_cloud: BareMetalCloud) -> None:
    cloud = bm_cloud
    _wait_ready(cloud, ("broken",))
    created = cloud.osc("server", "create", "--image", cloud.image, "--flavor", "BM-BROKEN", "doomed")
    server = cloud.wait_server(created["id"], "ERROR")
    # Rescheduled, but no other node fits: upstream's fault, and no host.
    assert server["fault"]["message"] == (
        "Exceeded maximum number of retries. Exhausted all hosts available for retrying build failures for "
        f"instance {server['id']}.")
    assert (server["OS-EXT-SRV-ATTR:host"], server["OS-EXT-SRV-ATTR:hypervisor_hostname"]) == (None, None)
    node = cloud.wait_node(cloud.nodes["broken"], "available")
    assert (node["instance_uuid"], node["instance_info"]) == (None, {})
    assert cloud.allocations(server["id"]) == {}
    # The deploy's own error is in the build's event.
    events = _create_events(cloud, server["id"])
    assert [(e["event"], e["result"], e["host"]) for e in events] == [
        ("compute__do_build_and_run_instance", "Error", "bm-host")]
    assert f"Failed to provision instance {server['id']}: Deploy step" in events[0]["traceback"]
    _delete(cloud, server["id"])


def test_a_failed_deploy_is_rescheduled_to_another_node(bm_cloud: BareMetalCloud) -> None:
    cloud = bm_cloud
    bad, good = cloud.nodes["retry-bad"], cloud.nodes["retry-good"]
    _wait_ready(cloud, ("retry-bad", "retry-good"))
    created = cloud.osc("server", "create", "--image", cloud.image, "--flavor", "BM-RETRY", "second-try")
    server = cloud.wait_server(created["id"], "ACTIVE")
    assert server["OS-EXT-SRV-ATTR:hypervisor_hostname"] == good and "fault" not in server
    assert (cloud.node(good)["provision_state"], cloud.node(good)["instance_uuid"]) == ("active", server["id"])
    # The failed node is freed, and neither the server nor anything else holds it.
    node = cloud.wait_node(bad, "available")
    assert (node["instance_uuid"], node["instance_info"]) == (None, {})
    assert list(cloud.allocations(server["id"])) == [good]
    usages = cloud.placement(f"/resource_providers/{bad}/usages").json()["usages"]
    assert usages == {"CUSTOM_RETRY": 0}
    events = _create_events(cloud, server["id"])
    assert [(e["event"], e["result"]) for e in events] == [
        ("compute__do_build_and_run_instance", "Error"), ("compute__do_build_and_run_instance", "Success")]
    _delete(cloud, server["id"])
    cloud.wait_node(good, "available")


def test_the_claim_stays_until_the_node_is_undeployed(bm_cloud: BareMetalCloud) -> None:
    cloud = bm_cloud
    _wait_ready(cloud, NODES)
    server = cloud.osc("server", "create", "--image", cloud.image, "--flavor", "BM", "kept")
    node_uuid = cloud.wait_server(server["id"], "ACTIVE")["OS-EXT-SRV-ATTR:hypervisor_hostname"]
    # A protected node refuses to be undeployed: the delete fails as upstream's does.
    assert cloud.api("PATCH", f"/baremetal/v1/nodes/{node_uuid}",
                     json=[{"op": "replace", "path": "/protected", "value": True}]).status_code == 200
    cloud.osc("server", "delete", server["id"], json_output=False)
    failed = cloud.wait_server(server["id"], "ERROR")
    assert "is protected and cannot be undeployed" in failed["fault"]["message"]
    assert (cloud.node(node_uuid)["provision_state"], cloud.node(node_uuid)["instance_uuid"]) == (
        "active", server["id"])
    assert list(cloud.allocations(server["id"])) == [node_uuid]
    assert cloud.api("PATCH", f"/baremetal/v1/nodes/{node_uuid}",
                     json=[{"op": "replace", "path": "/protected", "value": False}]).status_code == 200
    # Deleted again: the node is undeployed, then the claim goes with the server.
    _delete(cloud, server["id"])
    assert cloud.allocations(server["id"]) == {}
    node = cloud.wait_node(node_uuid, "available")
    assert (node["instance_uuid"], node["instance_info"]) == (None, {})


def _create_events(cloud: BareMetalCloud, server_id: str) -> list[dict[str, Any]]:
    """The create action's events once all are finished (the last one ends after the server's state changed)."""
    headers = {"OpenStack-API-Version": "compute 2.73"}
    actions = cloud.api("GET", f"/compute/v2.1/servers/{server_id}/os-instance-actions", headers=headers)
    create = [a for a in actions.json()["instanceActions"] if a["action"] == "create"][0]

    def finished() -> list[dict[str, Any]] | None:
        shown = cloud.api("GET", f"/compute/v2.1/servers/{server_id}/os-instance-actions/{create['request_id']}",
                          headers=headers)
        events = sorted(shown.json()["instanceAction"]["events"], key=lambda e: e["start_time"])
        return events if all(e["result"] is not None for e in events) else None

    return wait_for(finished, timeout=30, interval=0.1)  # type: ignore[no-any-return]
