"""Real clients against the service: python-ironicclient's CLI and openstacksdk."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from tests.baremetal.support import wait_for_state


@pytest.fixture
def client_backend(backend: str) -> str:
    return backend


# Client tests exercise the wire, not the database: the first selected backend is enough.
pytestmark = pytest.mark.backends("first")


def _cli(baremetal, *args: str) -> str:
    command = shutil.which("openstack")
    if command is None:
        pytest.skip("the openstack command (python-openstackclient) is not installed")
    env = {
        **os.environ,
        "OS_AUTH_TYPE": "admin_token",
        "OS_TOKEN": "admin",
        "OS_ENDPOINT": baremetal.url,
    }
    for name in ("OS_CLOUD", "OS_AUTH_URL", "OS_USERNAME", "OS_PASSWORD"):
        env.pop(name, None)
    result = subprocess.run(
        [command, "baremetal", *args], capture_output=True, text=True, timeout=120, env=env, check=False
    )
    assert result.returncode == 0, result.stderr
    # The client logs an error when a 202 body cannot be decoded; upstream's
    # empty answers must not trigger that.
    assert "Could not decode" not in result.stderr
    return result.stdout


def test_openstack_baremetal_cli(baremetal, client_backend, tmp_path) -> None:
    created = json.loads(_cli(baremetal, "node", "create", "--driver", "fake-hardware", "--name", "cli1",
                              "--resource-class", "rc", "-f", "json"))
    assert created["provision_state"] == "enroll"
    listed = json.loads(_cli(baremetal, "node", "list", "-f", "json"))
    assert [(node["name"], node["provision_state"]) for node in listed] == [("cli1", "enroll")]
    # Waiting through the HTTP API is quicker than the client's 2-second polls.
    client = baremetal.client()
    _cli(baremetal, "node", "manage", "cli1")
    wait_for_state(client, "cli1", "manageable")
    steps = tmp_path / "steps.json"
    steps.write_text(json.dumps([
        {"interface": "bios", "step": "apply_configuration", "args": {"settings": [{"name": "a", "value": "b"}]}},
        {"interface": "bios", "step": "factory_reset"},
    ]))
    before = client.get("/v1/nodes/cli1").json()["provision_updated_at"]
    _cli(baremetal, "node", "clean", "cli1", "--clean-steps", str(steps))
    wait_for_state(client, "cli1", "manageable", changed_since=before)
    _cli(baremetal, "node", "provide", "cli1")
    wait_for_state(client, "cli1", "available")
    shown = json.loads(_cli(baremetal, "node", "show", "cli1", "-f", "json"))
    assert shown["provision_state"] == "available"
    assert shown["driver_internal_info"]["fake_actions"] == [
        "bios.apply_configuration", "bios.factory_reset", "vendor.log_passthrough",
    ]


@pytest.mark.filterwarnings("ignore::openstack.warnings._RemovedInSDKWarning")
def test_openstacksdk_baremetal_proxy(baremetal, client_backend) -> None:
    openstack = pytest.importorskip("openstack")
    conn = openstack.connect(
        auth_type="admin_token", token="admin", endpoint=baremetal.url, baremetal_endpoint_override=baremetal.url,
        load_yaml_config=False, load_envvars=False,
    )
    proxy = conn.baremetal
    node = proxy.create_node(driver="fake-hardware", name="sdk1", resource_class="rc")
    assert node.provision_state == "enroll"
    node = proxy.set_node_provision_state(node, "manage", wait=True, timeout=60)
    assert node.provision_state == "manageable"
    node = proxy.set_node_provision_state(
        node, "clean", clean_steps=[{"interface": "bios", "step": "factory_reset"}], wait=True, timeout=60
    )
    assert node.provision_state == "manageable"
    proxy.set_node_traits(node, ["CUSTOM_GPU"])
    proxy.set_node_power_state(node, "power off", wait=True, timeout=60)
    proxy.update_node(node, extra={"rack": "r1"})
    fetched = proxy.get_node("sdk1")
    assert (fetched.traits, fetched.power_state, fetched.extra) == (["CUSTOM_GPU"], "power off", {"rack": "r1"})
    node = proxy.set_node_provision_state(node, "provide", wait=True, timeout=60)
    assert node.provision_state == "available"
    assert [found.name for found in proxy.nodes(provision_state="available")] == ["sdk1"]
    assert [driver.name for driver in proxy.drivers()] == ["fake-hardware", "redfish"]
    proxy.delete_node(node)
    assert list(proxy.nodes()) == []


def test_openstack_baremetal_cli_later_resources(baremetal, client_backend) -> None:
    steps = json.dumps([{"interface": "bios", "step": "factory_reset", "args": {}, "priority": 120}])
    created = json.loads(_cli(baremetal, "deploy", "template", "create", "CUSTOM_RESET", "--steps", steps,
                              "-f", "json"))
    assert created["name"] == "CUSTOM_RESET"
    listed = json.loads(_cli(baremetal, "deploy", "template", "list", "-f", "json"))
    assert [item.get("Name", item.get("name")) for item in listed] == ["CUSTOM_RESET"], listed
    _cli(baremetal, "deploy", "template", "set", "CUSTOM_RESET", "--extra", "k=v")
    shown = json.loads(_cli(baremetal, "deploy", "template", "show", "CUSTOM_RESET", "-f", "json"))
    assert shown["extra"] == {"k": "v"}
    _cli(baremetal, "node", "create", "--driver", "fake-hardware", "--name", "cli2", "--owner", "p1",
         "--lessee", "p2", "--shard", "s1", "--description", "later fields")
    _cli(baremetal, "node", "set", "cli2", "--retired", "--retired-reason", "old")
    node = json.loads(_cli(baremetal, "node", "show", "cli2", "-f", "json"))
    assert (node["owner"], node["lessee"], node["shard"], node["retired"], node["retired_reason"]) == (
        "p1", "p2", "s1", True, "old")
    history = json.loads(_cli(baremetal, "node", "history", "list", "cli2", "-f", "json"))
    assert history == []
    shards = json.loads(_cli(baremetal, "shard", "list", "-f", "json"))
    assert {"name": "s1", "count": 1} in shards
    _cli(baremetal, "deploy", "template", "delete", "CUSTOM_RESET")
    assert json.loads(_cli(baremetal, "deploy", "template", "list", "-f", "json")) == []


@pytest.mark.filterwarnings("ignore::openstack.warnings._RemovedInSDKWarning")
def test_openstacksdk_later_resources(baremetal, client_backend) -> None:
    openstack = pytest.importorskip("openstack")
    conn = openstack.connect(
        auth_type="admin_token", token="admin", endpoint=baremetal.url, baremetal_endpoint_override=baremetal.url,
        load_yaml_config=False, load_envvars=False,
    )
    proxy = conn.baremetal
    template = proxy.create_deploy_template(
        name="CUSTOM_SDK", steps=[{"interface": "bios", "step": "factory_reset", "args": {}, "priority": 110}])
    assert [found.name for found in proxy.deploy_templates()] == ["CUSTOM_SDK"]
    proxy.update_deploy_template(template, extra={"a": "b"})
    assert proxy.get_deploy_template("CUSTOM_SDK").extra == {"a": "b"}
    node = proxy.create_node(driver="fake-hardware", name="sdk2", lessee="p2", description="d")
    fetched = proxy.get_node("sdk2")
    assert (fetched.lessee, fetched.description, fetched.is_retired) == ("p2", "d", False)
    proxy.delete_deploy_template(template)
    proxy.delete_node(node)
    assert list(proxy.deploy_templates()) == []
