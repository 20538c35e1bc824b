"""The provision state machine over HTTP: verbs, power, automated cleaning."""

from __future__ import annotations

import uuid

from tests.baremetal.support import faultstring, wait_for, wait_for_state
from tests.baremetal.test_nodes import create


def provision(client, ident, target, **extra):
    return client.put(f"/v1/nodes/{ident}/states/provision", json={"target": target, **extra})


def manageable(client, name="n1", **fields):
    node = create(client, name=name, **fields)
    assert provision(client, name, "manage").status_code == 202
    wait_for_state(client, name, "manageable")
    return node


def available(client, name="n1", **fields):
    node = manageable(client, name, **fields)
    assert provision(client, name, "provide").status_code == 202
    wait_for_state(client, name, "available")
    return node


def test_manage_provide_deploy_undeploy(baremetal) -> None:
    client = baremetal.client()
    node = create(client, name="n1")
    response = provision(client, "n1", "manage")
    assert response.status_code == 202
    assert response.content == b""
    assert response.headers["Location"] == f"{baremetal.url}/v1/nodes/n1/states"
    managed = wait_for_state(client, "n1", "manageable")
    assert managed["target_provision_state"] is None
    assert managed["provision_updated_at"] is not None
    assert provision(client, "n1", "provide").status_code == 202
    done = wait_for_state(client, "n1", "available")
    # Automated cleaning ran the one priority>0 fake step.
    assert done["driver_internal_info"]["fake_actions"] == ["vendor.log_passthrough"]
    assert done["driver_internal_info"]["clean_steps"] is None
    assert done["clean_step"] == {}
    instance = str(uuid.uuid4())
    client.patch("/v1/nodes/n1", json=[{"op": "add", "path": "/instance_uuid", "value": instance}])
    assert provision(client, "n1", "active", configdrive="data").status_code == 202
    active = wait_for_state(client, "n1", "active")
    # Stored, and masked in answers (show_instance_secrets allows nobody by default).
    assert active["instance_info"]["configdrive"] == "******"
    assert client.delete("/v1/nodes/n1").status_code == 409
    assert provision(client, "n1", "deleted").status_code == 202
    torn_down = wait_for_state(client, "n1", "available")
    assert torn_down["instance_uuid"] is None
    assert torn_down["instance_info"] == {}
    states = client.get("/v1/nodes/n1/states").json()
    assert states["provision_state"] == "available"
    assert set(states) >= {"console_enabled", "last_error", "power_state", "target_power_state",
                            "target_provision_state", "provision_updated_at", "raid_config", "target_raid_config"}
    assert client.delete(f"/v1/nodes/{node['uuid']}").status_code == 204


def test_automated_clean_can_be_disabled_per_node(baremetal) -> None:
    client = baremetal.client()
    done = available(client, automated_clean=False)
    assert "fake_actions" not in done["driver_internal_info"]


def test_invalid_transitions(baremetal) -> None:
    client = baremetal.client()
    node = create(client, name="n1")
    response = provision(client, "n1", "provide")
    assert response.status_code == 400
    assert faultstring(response) == (
        f'The requested action "provide" can not be performed on node "{node["uuid"]}" while it is in state '
        '"enroll".'
    )
    response = provision(client, "n1", "bogus")
    assert response.status_code == 400
    assert 'action "bogus"' in faultstring(response)
    response = client.put("/v1/nodes/n1/states/provision", json={})
    assert response.status_code == 400
    assert faultstring(response) == "Missing mandatory parameter: target"
    assert provision(client, "n1", "abort").status_code == 400
    assert provision(client, "n1", "provide", clean_steps=[]).status_code == 400
    assert baremetal.client("1.3").put(f"/v1/nodes/{node['uuid']}/states/provision",
                                       json={"target": "manage"}).status_code == 406
    assert client.get("/v1/nodes/n1").json()["provision_state"] == "enroll"


def test_rebuild_rescue_inspect_adopt(baremetal) -> None:
    client = baremetal.client()
    manageable(client)
    assert provision(client, "n1", "inspect").status_code == 202
    inspected = wait_for_state(client, "n1", "manageable")
    assert inspected["inspection_finished_at"] is not None
    assert provision(client, "n1", "adopt").status_code == 202
    wait_for_state(client, "n1", "active")
    assert provision(client, "n1", "rebuild").status_code == 202
    wait_for_state(client, "n1", "active")
    assert provision(client, "n1", "rescue").status_code == 400
    assert provision(client, "n1", "rescue", rescue_password="secret").status_code == 202
    rescued = wait_for_state(client, "n1", "rescue")
    assert rescued["instance_info"]["rescue_password"] == "******"
    assert provision(client, "n1", "unrescue").status_code == 202
    wait_for_state(client, "n1", "active")


def test_maintenance_blocks_deploy(baremetal) -> None:
    client = baremetal.client()
    available(client)
    client.put("/v1/nodes/n1/maintenance", json={})
    response = provision(client, "n1", "active")
    assert response.status_code == 400
    assert "maintenance mode" in faultstring(response)
    assert client.get("/v1/nodes/n1").json()["provision_state"] == "available"


def test_protected_node(baremetal) -> None:
    client = baremetal.client()
    available(client)
    response = client.patch("/v1/nodes/n1", json=[{"op": "replace", "path": "/protected", "value": True}])
    assert response.status_code == 400
    provision(client, "n1", "active")
    wait_for_state(client, "n1", "active")
    response = client.patch("/v1/nodes/n1", json=[{"op": "replace", "path": "/protected", "value": True},
                                                  {"op": "replace", "path": "/protected_reason", "value": "db"}])
    assert response.status_code == 200
    response = provision(client, "n1", "deleted")
    assert response.status_code == 403
    assert client.get("/v1/nodes/n1").json()["provision_state"] == "active"


def test_power(baremetal) -> None:
    client = baremetal.client()
    create(client, name="n1")
    response = client.put("/v1/nodes/n1/states/power", json={"target": "power off"})
    assert response.status_code == 202
    assert response.headers["Location"] == f"{baremetal.url}/v1/nodes/n1/states"
    wait_for(lambda: client.get("/v1/nodes/n1").json()["power_state"] == "power off")
    client.put("/v1/nodes/n1/states/power", json={"target": "rebooting"})
    wait_for(lambda: client.get("/v1/nodes/n1").json()["power_state"] == "power on")
    client.put("/v1/nodes/n1/states/power", json={"target": "soft power off", "timeout": 10})
    node = wait_for(lambda: (n := client.get("/v1/nodes/n1").json())["power_state"] == "power off" and n)
    assert node["target_power_state"] is None
    assert client.put("/v1/nodes/n1/states/power", json={"target": "sideways"}).status_code == 400
    assert client.put("/v1/nodes/n1/states/power", json={"target": "power on", "timeout": 0}).status_code == 400
    assert client.put("/v1/nodes/n1/states/power", json={}).status_code == 400
    old = baremetal.client("1.26")
    assert old.put("/v1/nodes/n1/states/power", json={"target": "soft power off"}).status_code == 406
    assert client.get("/v1/nodes/n1").json()["power_state"] == "power off"


def test_boot_device_and_validate(baremetal) -> None:
    client = baremetal.client()
    create(client, name="n1")
    assert client.get("/v1/nodes/n1/management/boot_device").json() == {"boot_device": "pxe", "persistent": False}
    response = client.put("/v1/nodes/n1/management/boot_device", json={"boot_device": "disk", "persistent": True})
    assert response.status_code == 204
    assert client.get("/v1/nodes/n1/management/boot_device").json() == {"boot_device": "disk", "persistent": True}
    assert client.put("/v1/nodes/n1/management/boot_device", json={"boot_device": "floppy"}).status_code == 400
    supported = client.get("/v1/nodes/n1/management/boot_device/supported").json()
    assert "pxe" in supported["supported_boot_devices"]
    validation = client.get("/v1/nodes/n1/validate").json()
    assert validation["power"] == {"result": True}
    assert client.put("/v1/nodes/n1/management/inject_nmi", json={}).status_code == 204


def test_drivers_and_conductors(baremetal) -> None:
    client = baremetal.client()
    drivers = client.get("/v1/drivers").json()["drivers"]
    assert [(driver["name"], driver["hosts"], driver["type"]) for driver in drivers] == [
        ("fake-hardware", ["test-conductor"], "dynamic"), ("redfish", ["test-conductor"], "dynamic"),
    ]
    detail = client.get("/v1/drivers?detail=True").json()["drivers"][0]
    assert detail["default_power_interface"] == "fake"
    assert detail["enabled_network_interfaces"] == ["flat", "noop"]
    assert client.get("/v1/drivers/fake-hardware").json()["name"] == "fake-hardware"
    assert client.get("/v1/drivers/nope").status_code == 404
    conductors = client.get("/v1/conductors").json()["conductors"]
    assert [(c["hostname"], c["alive"]) for c in conductors] == [("test-conductor", True)]
    assert client.get("/v1/conductors/test-conductor").json()["drivers"] == ["fake-hardware", "redfish"]
    assert baremetal.client("1.48").get("/v1/conductors").status_code == 404


def test_console(baremetal) -> None:
    client = baremetal.client()
    create(client, name="n1")
    assert client.get("/v1/nodes/n1/states/console").json() == {"console_enabled": False, "console_info": None}
    response = client.put("/v1/nodes/n1/states/console", json={"enabled": True})
    assert response.status_code == 202
    assert response.headers["Location"] == f"{baremetal.url}/v1/nodes/n1/states/console"
    assert client.get("/v1/nodes/n1/states/console").json() == {
        "console_enabled": True, "console_info": {"type": "fake", "url": "fake://console"}}
    assert client.get("/v1/nodes/n1").json()["console_enabled"] is True
    assert client.put("/v1/nodes/n1/states/console", json={"enabled": "maybe"}).status_code == 400
    assert client.put("/v1/nodes/n1/states/console", json={}).status_code == 400
    client.put("/v1/nodes/n1/states/console", json={"enabled": False})
    assert client.get("/v1/nodes/n1").json()["console_enabled"] is False


def test_vifs_on_noop_network_are_accepted_and_not_listed(baremetal) -> None:
    client = baremetal.client()
    node = create(client, name="n1")
    assert node["network_interface"] == "noop"
    assert client.get("/v1/nodes/n1/vifs").json() == {"vifs": []}
    # Upstream's noop network interface accepts attach and detach and records nothing.
    assert client.post("/v1/nodes/n1/vifs", json={"id": "vif-1"}).status_code == 204
    assert client.get("/v1/nodes/n1/vifs").json() == {"vifs": []}
    assert client.delete("/v1/nodes/n1/vifs/vif-1").status_code == 204
    assert baremetal.client("1.27").get(f"/v1/nodes/{node['uuid']}/vifs").status_code == 404


def test_vifs_on_flat_network_need_free_ports(baremetal) -> None:
    client = baremetal.client()
    node = create(client, name="n1", network_interface="flat")
    response = client.post("/v1/nodes/n1/vifs", json={"id": "vif-1"})
    assert response.status_code == 400
    assert faultstring(response) == "Unable to attach VIF vif-1, not enough free physical ports."
    response = client.delete("/v1/nodes/n1/vifs/vif-1")
    assert response.status_code == 400
    assert faultstring(response) == (
        f"Unable to detach VIF vif-1 from node {node['uuid']} because it is not attached to it."
    )


def test_driver_change_with_reset_interfaces(baremetal) -> None:
    client = baremetal.client()
    create(client, name="n1")
    response = client.patch("/v1/nodes/n1", json=[{"op": "replace", "path": "/driver", "value": "redfish"}])
    # fake power is not a redfish power interface: without a reset the change is refused.
    assert response.status_code == 400
    response = client.patch("/v1/nodes/n1?reset_interfaces=True",
                            json=[{"op": "replace", "path": "/driver", "value": "redfish"}])
    assert response.status_code == 200, response.text
    node = response.json()
    assert (node["driver"], node["power_interface"], node["bios_interface"]) == ("redfish", "redfish", "redfish")
    response = client.patch("/v1/nodes/n1?reset_interfaces=True",
                            json=[{"op": "add", "path": "/extra/a", "value": 1}])
    assert response.status_code == 400
    assert faultstring(response) == (
        "The reset_interfaces parameter can be set only when the node's driver is updated."
    )
    old = baremetal.client("1.44")
    response = old.patch(f"/v1/nodes/{node['uuid']}?reset_interfaces=True",
                         json=[{"op": "replace", "path": "/driver", "value": "fake-hardware"}])
    assert response.status_code == 406
    assert client.get("/v1/nodes/n1").json()["driver"] == "redfish"


def test_restart_recovers_work_left_in_progress(baremetal) -> None:
    from corral.baremetal.db import nodes as node_db

    client = baremetal.client()
    node = available(client)
    # As if this conductor had stopped in the middle of a deployment.
    node_id = _node_id(baremetal, node["uuid"])
    baremetal.state.db.write(lambda conn: node_db.update(
        conn, node_id,
        {"provision_state": "deploying", "target_provision_state": "active", "reservation": "test-conductor"},
    ))
    baremetal.conductor.recover_after_restart()
    recovered = client.get("/v1/nodes/n1").json()
    assert (recovered["provision_state"], recovered["target_provision_state"]) == ("deploy failed", "active")
    assert recovered["reservation"] is None
    assert recovered["last_error"] == (
        f"The deploying operation on node {node['uuid']} was interrupted because conductor test-conductor "
        "stopped while working on it."
    )
    assert provision(client, "n1", "deleted").status_code == 202
    wait_for_state(client, "n1", "available")


def _node_id(baremetal, uuid: str) -> int:
    from corral.baremetal.db import nodes as node_db

    with baremetal.state.db.read() as conn:
        return node_db.get(conn, uuid=uuid)["id"]


def test_raid_bios_and_driver_properties(baremetal) -> None:
    client = baremetal.client()
    node = manageable(client)
    config = {"logical_disks": [{"size_gb": 100, "raid_level": "1", "is_root_volume": True}]}
    assert client.put("/v1/nodes/n1/states/raid", json=config).status_code == 204
    assert client.get("/v1/nodes/n1/states").json()["target_raid_config"] == config
    assert client.put("/v1/nodes/n1/states/raid", json={"logical_disks": "all"}).status_code == 400
    assert baremetal.client("1.11").put(f"/v1/nodes/{node['uuid']}/states/raid", json=config).status_code == 405
    provision(client, "n1", "clean", clean_steps=[
        {"interface": "bios", "step": "apply_configuration", "args": {"settings": [{"name": "a", "value": "b"}]}}])
    wait_for_state(client, "n1", "manageable", changed_since=node["provision_updated_at"])
    setting = client.get("/v1/nodes/n1/bios/a").json()["a"]
    assert (setting["name"], setting["value"]) == ("a", "b")
    assert client.get("/v1/nodes/n1/bios/missing").status_code == 404
    assert client.get(f"/v1/nodes/validate?node={node['uuid']}").json()["power"] == {"result": True}
    assert client.get("/v1/nodes/validate").status_code == 400
    properties = client.get("/v1/drivers/redfish/properties").json()
    assert "redfish_address" in properties
    assert client.get("/v1/drivers/fake-hardware/properties").json() == {}
