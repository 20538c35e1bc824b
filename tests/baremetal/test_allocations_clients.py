"""Real clients reserving nodes through allocations: the openstack CLI, openstacksdk, metalsmith."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from tests.baremetal.support import wait_for
from tests.baremetal.test_allocations_api import available_node


@pytest.fixture
def client_backend(backend: str) -> str:
    return backend


# Client tests exercise the wire, not the database: the first selected backend is enough.
pytestmark = pytest.mark.backends("first")


def _cli(baremetal, *args: str) -> str:
    command = shutil.which("openstack")
    if command is None:
        pytest.skip("the openstack command (python-openstackclient) is not installed")
    env = {**os.environ, "OS_AUTH_TYPE": "admin_token", "OS_TOKEN": "admin", "OS_ENDPOINT": baremetal.url}
    for name in ("OS_CLOUD", "OS_AUTH_URL", "OS_USERNAME", "OS_PASSWORD", "OS_BAREMETAL_API_VERSION"):
        env.pop(name, None)
    result = subprocess.run(
        [command, "baremetal", *args], capture_output=True, text=True, timeout=120, env=env, check=False
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def _connect(baremetal):
    openstack = pytest.importorskip("openstack")
    return openstack.connect(
        auth_type="admin_token", token="admin", endpoint=baremetal.url, baremetal_endpoint_override=baremetal.url,
        load_yaml_config=False, load_envvars=False,
    )


def test_openstack_baremetal_allocation_commands(baremetal, client_backend) -> None:
    client = baremetal.client()
    node = available_node(baremetal, client, "n1", traits=["CUSTOM_GPU"])
    created = json.loads(_cli(baremetal, "allocation", "create", "--resource-class", "rc", "--trait", "CUSTOM_GPU",
                              "--name", "cli-a1", "--wait", "30", "-f", "json"))
    assert created["name"] == "cli-a1"
    assert created["state"] == "active"
    assert created["node_uuid"] == node["uuid"]
    assert created["traits"] == ["CUSTOM_GPU"]
    listed = json.loads(_cli(baremetal, "allocation", "list", "--state", "active", "--node", "n1",
                             "--resource-class", "rc", "-f", "json"))
    assert [(item["name"], item["node_uuid"]) for item in listed] == [("cli-a1", node["uuid"])]
    shown = json.loads(_cli(baremetal, "allocation", "show", "cli-a1", "-f", "json"))
    assert shown["uuid"] == created["uuid"]
    assert client.get("/v1/nodes/n1").json()["allocation_uuid"] == created["uuid"]
    _cli(baremetal, "allocation", "delete", "cli-a1")
    assert client.get("/v1/allocations").json()["allocations"] == []
    assert client.get("/v1/nodes/n1").json()["instance_uuid"] is None


@pytest.mark.filterwarnings("ignore::openstack.warnings._RemovedInSDKWarning")
def test_openstacksdk_allocations(baremetal, client_backend) -> None:
    client = baremetal.client()
    node = available_node(baremetal, client, "n1")
    proxy = _connect(baremetal).baremetal
    allocation = proxy.create_allocation(resource_class="rc", name="sdk-a1", candidate_nodes=["n1"])
    assert allocation.state == "allocating"
    allocation = proxy.wait_for_allocation(allocation, timeout=30)
    assert allocation.state == "active"
    assert allocation.node_id == node["uuid"]
    assert [found.name for found in proxy.allocations(state="active")] == ["sdk-a1"]
    assert proxy.get_allocation("sdk-a1").id == allocation.id
    assert proxy.get_node("n1").allocation_id == allocation.id
    failed = proxy.create_allocation(resource_class="none")
    with pytest.raises(Exception, match="no available nodes match the resource class none"):
        proxy.wait_for_allocation(failed, timeout=30)
    proxy.delete_allocation(allocation)
    proxy.delete_allocation(failed)
    assert list(proxy.allocations()) == []


@pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::openstack.warnings._RemovedInSDKWarning")
def test_metalsmith_reserves_a_node(baremetal, client_backend) -> None:
    metalsmith = pytest.importorskip("metalsmith")
    client = baremetal.client()
    available_node(baremetal, client, "n1", resource_class="compute")
    gpu = available_node(baremetal, client, "n2", resource_class="compute", traits=["CUSTOM_GPU"])
    provisioner = metalsmith.Provisioner(cloud_region=_connect(baremetal).config)
    node = provisioner.reserve_node("compute", traits=["CUSTOM_GPU"], hostname="host-1")
    assert node.id == gpu["uuid"]
    shown = wait_for(lambda: (body := client.get(f"/v1/nodes/{gpu['uuid']}").json())["allocation_uuid"] and body)
    allocation = client.get(f"/v1/allocations/{shown['allocation_uuid']}").json()
    assert allocation["name"] == "host-1"
    assert allocation["state"] == "active"
    assert shown["instance_info"]["traits"] == ["CUSTOM_GPU"]
    with pytest.raises(metalsmith.exceptions.ReservationFailed):
        provisioner.reserve_node("compute", traits=["CUSTOM_MISSING"])
    # The failed allocation was cleaned up by metalsmith.
    assert [item["name"] for item in client.get("/v1/allocations").json()["allocations"]] == ["host-1"]
