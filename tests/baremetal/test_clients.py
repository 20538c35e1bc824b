"""Real clients against the service: python-ironicclient's CLI and openstacksdk."""

from __future__ import annotations

import json

import pytest

from tests.baremetal.support import wait_for_power, wait_for_state
from tests.support import osc


@pytest.fixture
def client_backend(backend: str) -> str:
    return backend


# Client tests exercise the wire, not the database: the first selected backend is enough.
pytestmark = pytest.mark.backends("first")


def _cli(baremetal, *args: str) -> str:
    pytest.importorskip("openstackclient")
    env = {"OS_AUTH_TYPE": "admin_token", "OS_TOKEN": "admin", "OS_ENDPOINT": baremetal.url}
    result = osc.run(["baremetal", *args], env=env)
    assert result.code == 0, result.stderr
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


def test_openstack_baremetal_resource_commands(baremetal, client_backend) -> None:
    def cli_json(*args: str) -> object:
        return json.loads(_cli(baremetal, *args, "-f", "json"))

    chassis = cli_json("chassis", "create", "--description", "rack 1")
    assert chassis["description"] == "rack 1"
    node = cli_json("node", "create", "--driver", "fake-hardware", "--name", "res1", "--chassis-uuid",
                    chassis["uuid"], "--network-interface", "flat")
    assert node["chassis_uuid"] == chassis["uuid"]
    assert [item["uuid"] for item in cli_json("chassis", "list")] == [chassis["uuid"]]
    _cli(baremetal, "chassis", "set", chassis["uuid"], "--extra", "row=a")
    assert cli_json("chassis", "show", chassis["uuid"])["extra"] == {"row": "a"}

    group = cli_json("port", "group", "create", "--node", node["uuid"], "--name", "bond0", "--address",
                     "52:54:00:00:00:10", "--mode", "802.3ad", "--property", "miimon=100")
    assert (group["name"], group["mode"], group["properties"]) == ("bond0", "802.3ad", {"miimon": 100})
    _cli(baremetal, "port", "group", "set", "bond0", "--extra", "k=v")
    assert cli_json("port", "group", "show", "bond0")["extra"] == {"k": "v"}
    assert [item["name"] for item in cli_json("port", "group", "list")] == ["bond0"]
    assert [item["address"] for item in cli_json("port", "group", "list", "--node", "res1", "--long")] == [
        "52:54:00:00:00:10"]

    port = cli_json("port", "create", "52:54:00:00:00:01", "--node", node["uuid"], "--port-group", group["uuid"],
                    "--local-link-connection", "switch_id=52:54:00:00:00:ff", "--local-link-connection",
                    "port_id=Ethernet1/1", "--physical-network", "physnet1")
    assert (port["address"], port["portgroup_uuid"], port["physical_network"]) == (
        "52:54:00:00:00:01", group["uuid"], "physnet1")
    assert port["local_link_connection"] == {"switch_id": "52:54:00:00:00:ff", "port_id": "Ethernet1/1"}
    _cli(baremetal, "port", "set", port["uuid"], "--extra", "rack=r1", "--pxe-enabled")
    shown = cli_json("port", "show", port["uuid"])
    assert (shown["extra"], shown["pxe_enabled"]) == ({"rack": "r1"}, True)
    assert [item["address"] for item in cli_json("port", "list", "--node", "res1")] == ["52:54:00:00:00:01"]
    assert [item["address"] for item in cli_json("port", "list", "--address", "52:54:00:00:00:01")] == [
        "52:54:00:00:00:01"]
    assert cli_json("port", "list", "--long")[0]["physical_network"] == "physnet1"

    _cli(baremetal, "node", "vif", "attach", "res1", "vif-1")
    assert [item["id"] for item in cli_json("node", "vif", "list", "res1")] == ["vif-1"]
    _cli(baremetal, "node", "vif", "detach", "res1", "vif-1")
    assert cli_json("node", "vif", "list", "res1") == []

    connector = cli_json("volume", "connector", "create", "--node", node["uuid"], "--type", "iqn",
                         "--connector-id", "iqn.2010-10.org.openstack:res1")
    assert connector["type"] == "iqn"
    target = cli_json("volume", "target", "create", "--node", node["uuid"], "--type", "iscsi", "--boot-index",
                      "0", "--volume-id", "vol-1")
    assert (target["volume_type"], target["boot_index"]) == ("iscsi", 0)
    # Volume records change only while the node is powered off.
    _cli(baremetal, "node", "power", "off", "res1")
    wait_for_power(baremetal.client(), "res1", "power off")
    _cli(baremetal, "volume", "target", "set", target["uuid"], "--extra", "a=b")
    assert cli_json("volume", "target", "show", target["uuid"])["extra"] == {"a": "b"}
    assert [item["uuid"] for item in cli_json("volume", "connector", "list", "--node", "res1")] == [
        connector["uuid"]]
    _cli(baremetal, "volume", "connector", "set", connector["uuid"], "--extra", "c=d", "--type", "ip",
         "--connector-id", "192.0.2.10")
    shown = cli_json("volume", "connector", "show", connector["uuid"])
    assert (shown["type"], shown["connector_id"], shown["extra"]) == ("ip", "192.0.2.10", {"c": "d"})
    assert cli_json("volume", "connector", "list", "--long")[0]["extra"] == {"c": "d"}
    assert [item["uuid"] for item in cli_json("volume", "target", "list", "--node", "res1")] == [target["uuid"]]
    _cli(baremetal, "volume", "connector", "delete", connector["uuid"])
    _cli(baremetal, "volume", "target", "delete", target["uuid"])
    assert cli_json("volume", "target", "list") == []

    _cli(baremetal, "port", "unset", port["uuid"], "--port-group")
    _cli(baremetal, "port", "delete", port["uuid"])
    _cli(baremetal, "port", "group", "delete", "bond0")
    _cli(baremetal, "node", "delete", "res1")
    _cli(baremetal, "chassis", "delete", chassis["uuid"])
    assert cli_json("port", "list") == [] and cli_json("chassis", "list") == []


@pytest.mark.filterwarnings("ignore::openstack.warnings._RemovedInSDKWarning")
def test_openstacksdk_ports_and_vifs(baremetal, client_backend) -> None:
    openstack = pytest.importorskip("openstack")
    conn = openstack.connect(
        auth_type="admin_token", token="admin", endpoint=baremetal.url, baremetal_endpoint_override=baremetal.url,
        load_yaml_config=False, load_envvars=False,
    )
    proxy = conn.baremetal
    node = proxy.create_node(driver="fake-hardware", name="sdk-ports", network_interface="flat")
    group = proxy.create_port_group(node_id=node.id, name="bond0", address="52:54:00:00:02:10")
    port = proxy.create_port(node_id=node.id, address="52:54:00:00:02:01", port_group_id=group.id)
    loose = proxy.create_port(node_id=node.id, address="52:54:00:00:02:02", is_pxe_enabled=False)
    assert (port.port_group_id, loose.is_pxe_enabled) == (group.id, False)
    assert sorted(found.address for found in proxy.ports(node=node.id, details=True)) == [
        "52:54:00:00:02:01", "52:54:00:00:02:02"]
    assert [found.id for found in proxy.ports(portgroup=group.id)] == [port.id]
    proxy.update_port(loose, extra={"rack": "r1"})
    assert proxy.get_port(loose.id).extra == {"rack": "r1"}
    proxy.attach_vif_to_node(node, "vif-sdk")
    assert proxy.list_node_vifs(node) == ["vif-sdk"]
    # The port group (with a member port) took the VIF.
    assert proxy.get_port_group("bond0").internal_info == {"tenant_vif_port_id": "vif-sdk"}
    proxy.detach_vif_from_node(node, "vif-sdk")
    assert proxy.list_node_vifs(node) == []
    chassis = proxy.create_chassis(description="sdk chassis")
    assert [found.id for found in proxy.chassis()] == [chassis.id]
    proxy.delete_node(node)
    assert list(proxy.ports()) == [] and list(proxy.port_groups()) == []
    proxy.delete_chassis(chassis)


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


def test_openstack_baremetal_inspection_rule_commands(baremetal, client_backend) -> None:
    def cli_json(*args: str) -> object:
        return json.loads(_cli(baremetal, *args, "-f", "json"))

    actions = json.dumps([{"op": "set-attribute", "args": ["/driver", "fake-hardware"]}])
    conditions = json.dumps([{"op": "is-true", "args": ["{node.auto_discovered}"]}])
    # The client sends create's --priority as text, which upstream's schema
    # (an integer) refuses too; "set" sends it as JSON.
    rule = cli_json("inspection", "rule", "create", "--description", "discovered", "--actions", actions,
                    "--conditions", conditions)
    assert (rule["description"], rule["priority"], rule["phase"]) == ("discovered", 0, "main")
    # This list names its columns by field, not by label.
    assert [(item["uuid"], item["description"]) for item in cli_json("inspection", "rule", "list")] == [
        (rule["uuid"], "discovered")]
    _cli(baremetal, "inspection", "rule", "set", rule["uuid"], "--priority", "20", "--description", "renamed")
    shown = cli_json("inspection", "rule", "show", rule["uuid"])
    assert (shown["priority"], shown["description"]) == (20, "renamed")
    assert shown["actions"] == [{"op": "set-attribute", "args": ["/driver", "fake-hardware"]}]
    _cli(baremetal, "inspection", "rule", "delete", rule["uuid"])
    assert cli_json("inspection", "rule", "list") == []
