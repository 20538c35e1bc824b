"""Node fields and endpoints of later microversions, over HTTP on every backend."""

from __future__ import annotations

import uuid

from corral.baremetal.db import nodes as node_db
from tests.baremetal.support import faultstring, wait_for_state
from tests.baremetal.test_nodes import create
from tests.baremetal.test_provisioning import available, manageable, provision


def _set(baremetal, name: str, **values: object) -> None:
    """Put a node straight into a state (no work to wait for)."""
    baremetal.state.db.write(lambda conn: node_db.update(conn, node_db.get(conn, name=name)["id"], values))


# ------------------------------------------------------- owner and lessee


def test_owner_and_lessee_decide_what_projects_see_and_do(baremetal) -> None:
    admin = baremetal.client()
    create(admin, name="owned", owner="p1")
    create(admin, name="leased", owner="p2", lessee="p1")
    create(admin, name="other", owner="p2")
    owner = baremetal.client(token="alice:p1")
    # A project lists only what it owns or leases; the rest does not exist for it.
    assert sorted(node["name"] for node in owner.get("/v1/nodes").json()["nodes"]) == ["leased", "owned"]
    assert owner.get("/v1/nodes/other").status_code == 404
    assert owner.get("/v1/nodes?project=p2").status_code == 403
    assert owner.get("/v1/nodes?owner=p1").json()["nodes"][0]["name"] == "owned"
    assert [node["name"] for node in admin.get("/v1/nodes?lessee=p1").json()["nodes"]] == ["leased"]
    assert sorted(node["name"] for node in admin.get("/v1/nodes?project=p1").json()["nodes"]) == ["leased", "owned"]
    # The owner's member changes its node; the lessee's member may not change the owner's fields.
    response = owner.patch("/v1/nodes/owned", json=[{"op": "add", "path": "/extra/k", "value": "v"}])
    assert response.status_code == 200, response.text
    response = owner.patch("/v1/nodes/owned", json=[{"op": "replace", "path": "/owner", "value": "p3"}])
    assert response.status_code == 403
    response = owner.patch("/v1/nodes/leased", json=[{"op": "add", "path": "/properties/x", "value": 1}])
    assert response.status_code == 403
    # A lessee sees its node with the owner's details redacted.
    leased = owner.get("/v1/nodes/leased").json()
    assert leased["driver_info"] == "** Value Redacted - Requires baremetal:node:get:driver_info permission. **"
    assert leased["last_error"].startswith("** Value Redacted")
    assert owner.get("/v1/nodes/owned").json()["driver_info"] == {}
    # Only an administrator creates and deletes nodes.
    assert owner.post("/v1/nodes", json={"driver": "fake-hardware"}).status_code == 403
    assert owner.delete("/v1/nodes/owned").status_code == 403
    assert owner.delete("/v1/nodes/other").status_code == 404
    # A project with a lessee's admin role provisions the node it leases.
    lessee_admin = baremetal.client(token="bob:p1")
    lessee_admin.headers["X-Roles"] = "admin"
    assert lessee_admin.put("/v1/nodes/leased/states/provision", json={"target": "manage"}).status_code == 202
    wait_for_state(admin, "leased", "manageable")


def test_lessee_field_and_filter(baremetal) -> None:
    client = baremetal.client()
    create(client, name="n1", lessee="p9")
    assert client.get("/v1/nodes/n1").json()["lessee"] == "p9"
    assert [node["name"] for node in client.get("/v1/nodes?lessee=p9").json()["nodes"]] == ["n1"]
    assert client.get("/v1/nodes?lessee=nobody").json()["nodes"] == []


# ------------------------------------------------- retired and protected


def test_retired_nodes_are_not_provided_and_end_cleaning_manageable(baremetal) -> None:
    client = baremetal.client()
    manageable(client)
    node = client.patch("/v1/nodes/n1", json=[{"op": "add", "path": "/retired", "value": True},
                                              {"op": "add", "path": "/retired_reason", "value": "old"}]).json()
    assert (node["retired"], node["retired_reason"]) == (True, "old")
    assert [item["name"] for item in client.get("/v1/nodes?retired=true").json()["nodes"]] == ["n1"]
    assert client.get("/v1/nodes?retired=false").json()["nodes"] == []
    response = provision(client, "n1", "provide")
    assert response.status_code == 400
    assert faultstring(response) == (f"The provide operation can't be performed on node {node['uuid']} because it "
                                     "is retired.")
    client.patch("/v1/nodes/n1", json=[{"op": "replace", "path": "/retired", "value": False}])
    assert provision(client, "n1", "provide").status_code == 202
    wait_for_state(client, "n1", "available")
    provision(client, "n1", "active")
    wait_for_state(client, "n1", "active")
    client.patch("/v1/nodes/n1", json=[{"op": "replace", "path": "/retired", "value": True}])
    assert provision(client, "n1", "deleted").status_code == 202
    # Tear-down cleaning of a retired node ends in manageable, not available.
    assert wait_for_state(client, "n1", "manageable")["retired"] is True


def test_protected_nodes_refuse_undeploy_and_delete(baremetal) -> None:
    client = baremetal.client()
    available(client)
    response = client.patch("/v1/nodes/n1", json=[{"op": "replace", "path": "/protected", "value": True}])
    assert response.status_code == 400
    provision(client, "n1", "active")
    wait_for_state(client, "n1", "active")
    node = client.patch("/v1/nodes/n1", json=[{"op": "replace", "path": "/protected", "value": True},
                                              {"op": "add", "path": "/protected_reason", "value": "prod"}]).json()
    assert (node["protected"], node["protected_reason"]) == (True, "prod")
    assert provision(client, "n1", "deleted").status_code == 403
    assert provision(client, "n1", "rebuild").status_code == 403
    client.patch("/v1/nodes/n1", json=[{"op": "replace", "path": "/protected", "value": False},
                                       {"op": "remove", "path": "/protected_reason"}])
    assert provision(client, "n1", "deleted").status_code == 202


# ----------------------------------------- description, group, clean, data


def test_plain_fields_round_trip(baremetal) -> None:
    client = baremetal.client()
    node = create(client, name="n1", description="rack 4", automated_clean=False, conductor_group="",
                  instance_name="vm-7", disable_power_off=True)
    assert (node["description"], node["automated_clean"], node["instance_name"], node["disable_power_off"]) == (
        "rack 4", False, "vm-7", True)
    assert node["health"] is None and node["service_step"] == {} and node["network_data"] == {}
    assert [item["name"] for item in client.get("/v1/nodes?description_contains=ack").json()["nodes"]] == ["n1"]
    assert [item["name"] for item in client.get("/v1/nodes?instance_name=vm-7").json()["nodes"]] == ["n1"]
    data = {"links": [{"id": "eth0", "type": "phy", "ethernet_mac_address": "52:54:00:12:34:56"}],
            "networks": [{"id": "net0", "type": "ipv4_dhcp", "link": "eth0"}],
            "services": [{"type": "dns", "address": "8.8.8.8"}]}
    node = client.patch("/v1/nodes/n1", json=[{"op": "add", "path": "/network_data", "value": data}]).json()
    assert node["network_data"] == data
    broken = {**data, "networks": [{"id": "net0", "type": "ipv4_dhcp", "link": "eth9"}]}
    response = client.patch("/v1/nodes/n1", json=[{"op": "replace", "path": "/network_data", "value": broken}])
    assert response.status_code == 400
    assert faultstring(response).startswith("Invalid network_data: network 'net0' is on link 'eth9'")
    assert client.get("/v1/nodes/n1").json()["network_data"] == data


def test_automated_clean_false_skips_cleaning(baremetal) -> None:
    client = baremetal.client()
    manageable(client, automated_clean=False)
    provision(client, "n1", "provide")
    node = wait_for_state(client, "n1", "available")
    assert "vendor.log_passthrough" not in node["driver_internal_info"].get("fake_actions", [])


# -------------------------------------------------------------- shards


def test_shards_filter_and_list(baremetal) -> None:
    client = baremetal.client()
    create(client, name="a", shard="s1")
    create(client, name="b", shard="s1")
    create(client, name="c", shard="s2")
    create(client, name="d")
    assert sorted(node["name"] for node in client.get("/v1/nodes?shard=s1").json()["nodes"]) == ["a", "b"]
    assert sorted(node["name"] for node in client.get("/v1/nodes?shard=s1,s2").json()["nodes"]) == ["a", "b", "c"]
    assert [node["name"] for node in client.get("/v1/nodes?sharded=false").json()["nodes"]] == ["d"]
    assert len(client.get("/v1/nodes?sharded=true").json()["nodes"]) == 3
    shards = client.get("/v1/shards").json()["shards"]
    assert shards == [{"name": "s1", "count": 2}, {"name": "None", "count": 1}, {"name": "s2", "count": 1}]
    assert baremetal.client(token="alice:p1").get("/v1/shards").status_code == 403


# ------------------------------------------------------- parent, children


def test_child_nodes_hide_under_their_parent(baremetal) -> None:
    client = baremetal.client()
    parent = create(client, name="parent")
    child = create(client, name="child", parent_node="parent")
    assert child["parent_node"] == parent["uuid"]
    assert [node["name"] for node in client.get("/v1/nodes").json()["nodes"]] == ["parent"]
    assert sorted(node["name"] for node in client.get("/v1/nodes?include_children=true").json()["nodes"]) == [
        "child", "parent"]
    assert [node["name"] for node in client.get("/v1/nodes?parent_node=parent").json()["nodes"]] == ["child"]
    children = client.get("/v1/nodes/parent/children").json()
    assert children == {"children": [child["uuid"]],
                        "links": {"href": f"{baremetal.url}/v1/nodes?parent_node={parent['uuid']}",
                                  "rel": "children"}}
    response = client.patch("/v1/nodes/parent", json=[{"op": "add", "path": "/parent_node", "value": "parent"}])
    assert response.status_code == 400
    client.patch("/v1/nodes/child", json=[{"op": "remove", "path": "/parent_node"}])
    assert client.get("/v1/nodes/parent/children").json()["children"] == []


# ------------------------------------------------- history and inventory


def test_history_records_failures(baremetal) -> None:
    client = baremetal.client()
    node = manageable(client)
    assert client.get("/v1/nodes/n1/history").json() == {"history": []}
    response = provision(client, "n1", "clean", clean_steps=[{"interface": "raid", "step": "no_such"}])
    assert response.status_code == 202
    failed = wait_for_state(client, "n1", "clean failed")
    history = client.get("/v1/nodes/n1/history").json()["history"]
    assert len(history) == 1
    entry = history[0]
    assert list(entry) == ["uuid", "created_at", "severity", "event", "links"]
    assert entry["severity"] == "ERROR"
    assert entry["event"] == failed["last_error"]
    assert entry["links"] == [{"href": f"{baremetal.url}/v1/nodes/{node['uuid']}/history/{entry['uuid']}",
                               "rel": "self"}]
    detail = client.get(f"/v1/nodes/n1/history/{entry['uuid']}").json()
    assert list(detail) == ["uuid", "created_at", "severity", "event_type", "event", "conductor", "user", "project",
                            "state", "target_provision_state", "duration_seconds", "links"]
    assert (detail["event_type"], detail["state"], detail["conductor"]) == ("cleaning", "clean failed",
                                                                           "test-conductor")
    older = baremetal.client(version="1.112").get(f"/v1/nodes/n1/history/{entry['uuid']}").json()
    assert "project" not in older and "state" not in older
    assert "state" not in baremetal.client(version="1.114").get(f"/v1/nodes/n1/history/{entry['uuid']}").json()
    missing = client.get(f"/v1/nodes/n1/history/{uuid.uuid4()}")
    assert missing.status_code == 404
    assert faultstring(missing).startswith("Node history record ")


def test_inventory_from_inspection(baremetal) -> None:
    client = baremetal.client()
    node = manageable(client, properties={"cpus": 8, "memory_mb": 4096, "local_gb": 20})
    response = client.get("/v1/nodes/n1/inventory")
    assert response.status_code == 404
    assert faultstring(response) == f"Node inventory record for node {node['uuid']} could not be found."
    provision(client, "n1", "inspect")
    wait_for_state(client, "n1", "manageable", changed_since=node["provision_updated_at"])
    found = client.get("/v1/nodes/n1/inventory").json()
    assert found["inventory"]["cpu"]["count"] == 8
    assert found["inventory"]["memory"]["physical_mb"] == 4096
    assert found["plugin_data"] == {"fake": True}


# ------------------------------------- indicators, boot mode, vmedia, firmware


def test_indicators(baremetal) -> None:
    client = baremetal.client()
    create(client, name="n1")
    indicators = client.get("/v1/nodes/n1/management/indicators").json()["indicators"]
    assert [(item["name"], item["component"], item["readonly"]) for item in indicators] == [
        ("led-0@chassis", "chassis", True), ("led@system", "system", False)]
    assert client.get("/v1/nodes/n1/management/indicators/led@system").json() == {"state": "on"}
    assert client.put("/v1/nodes/n1/management/indicators/led@system", json={"state": "blinking"}).status_code == 204
    assert client.get("/v1/nodes/n1/management/indicators/led@system").json() == {"state": "blinking"}
    response = client.put("/v1/nodes/n1/management/indicators/led-0@chassis", json={"state": "off"})
    assert response.status_code == 400
    response = client.get("/v1/nodes/n1/management/indicators/led")
    assert response.status_code == 400
    assert faultstring(response) == 'Malformed indicator name "led"'


def test_boot_mode_and_secure_boot(baremetal) -> None:
    client = baremetal.client()
    create(client, name="n1")
    assert baremetal.client(version="1.75").put("/v1/nodes/n1/states/boot_mode",
                                                json={"target": "uefi"}).status_code == 404
    response = client.put("/v1/nodes/n1/states/boot_mode", json={"target": "uefi"})
    assert response.status_code == 202
    assert response.headers["Location"] == f"{baremetal.url}/v1/nodes/n1/states"
    assert client.put("/v1/nodes/n1/states/secure_boot", json={"target": True}).status_code == 202
    states = client.get("/v1/nodes/n1/states").json()
    assert (states["boot_mode"], states["secure_boot"]) == ("uefi", True)
    assert "boot_mode" not in baremetal.client(version="1.74").get("/v1/nodes/n1/states").json()
    response = client.put("/v1/nodes/n1/states/boot_mode", json={"target": "floppy"})
    assert response.status_code == 400
    assert faultstring(response) == "Invalid boot mode floppy requested for node. Allowed boot modes are: bios, uefi"
    _set(baremetal, "n1", provision_state="cleaning")
    assert client.put("/v1/nodes/n1/states/boot_mode", json={"target": "bios"}).status_code == 409


def test_virtual_media(baremetal) -> None:
    client = baremetal.client()
    create(client, name="n1")
    body = {"device_type": "cdrom", "image_url": "http://images.example/boot.iso"}
    assert client.post("/v1/nodes/n1/vmedia", json=body).status_code == 204
    media = client.get("/v1/nodes/n1/vmedia").json()
    assert {"media_types": ["CD", "DVD"], "inserted": True, "image": body["image_url"]} in media
    response = client.post("/v1/nodes/n1/vmedia", json={**body, "image_url": "ftp://x/boot.iso"})
    assert response.status_code == 400
    assert faultstring(response) == "Unsupported or missing URL scheme: ftp"
    response = client.post("/v1/nodes/n1/vmedia", json={**body, "device_type": "tape"})
    assert response.status_code == 400
    response = client.delete("/v1/nodes/n1/vmedia?device_types=tape")
    assert response.status_code == 400
    assert faultstring(response) == "Invalid device type(s) tape (valid are disk, cdrom, floppy)"
    assert client.delete("/v1/nodes/n1/vmedia?device_types=cdrom").status_code == 204
    assert all(not item["inserted"] for item in client.get("/v1/nodes/n1/vmedia").json())


def test_firmware_components_after_an_update(baremetal) -> None:
    client = baremetal.client()
    node = manageable(client)
    assert client.get("/v1/nodes/n1/firmware").json() == {"firmware": []}
    steps = [{"interface": "firmware", "step": "update",
              "args": {"settings": [{"component": "bmc", "url": "http://fw.example/bmc-2.1.bin"}]}}]
    provision(client, "n1", "clean", clean_steps=steps)
    wait_for_state(client, "n1", "manageable", changed_since=node["provision_updated_at"])
    firmware = client.get("/v1/nodes/n1/firmware").json()["firmware"]
    assert [(item["component"], item["initial_version"], item["current_version"], item["last_version_flashed"])
            for item in firmware] == [("bmc", "bmc-2.1.bin", "bmc-2.1.bin", "bmc-2.1.bin")]
    assert "vendor" in firmware[0]
    assert "vendor" not in baremetal.client(version="1.113").get("/v1/nodes/n1/firmware").json()["firmware"][0]
