"""Chassis and volume connectors/targets over HTTP, and the node fields that point at them."""

from __future__ import annotations

import uuid

from tests.baremetal.support import faultstring, wait_for_power
from tests.baremetal.test_ports import node


def test_chassis_lifecycle_and_node_membership(baremetal) -> None:
    client = baremetal.client()
    response = client.post("/v1/chassis", json={"description": "rack 1", "extra": {"row": "a"}})
    assert response.status_code == 201
    chassis = response.json()
    assert response.headers["Location"] == f"{baremetal.url}/v1/chassis/{chassis['uuid']}"
    assert list(chassis) == ["uuid", "created_at", "updated_at", "description", "extra", "links", "nodes"]
    # Upstream nests the nodes link list in a second list.
    assert chassis["nodes"] == [[
        {"href": f"{baremetal.url}/v1/chassis/{chassis['uuid']}/nodes", "rel": "self"},
        {"href": f"{baremetal.url}/chassis/{chassis['uuid']}/nodes", "rel": "bookmark"},
    ]]
    assert client.get("/v1/chassis").json() == {"chassis": [
        {"uuid": chassis["uuid"], "description": "rack 1", "links": chassis["links"]}]}
    assert client.get("/v1/chassis/detail").json() == {"chassis": [chassis]}
    n1 = node(client, name="n1", chassis_uuid=chassis["uuid"])
    node(client, name="n2")
    assert n1["chassis_uuid"] == chassis["uuid"]
    assert [n["name"] for n in client.get(f"/v1/chassis/{chassis['uuid']}/nodes").json()["nodes"]] == ["n1"]
    assert [n["name"] for n in client.get(f"/v1/nodes?chassis_uuid={chassis['uuid']}").json()["nodes"]] == ["n1"]
    detail = client.get(f"/v1/chassis/{chassis['uuid']}/nodes/detail").json()["nodes"]
    assert [n["chassis_uuid"] for n in detail] == [chassis["uuid"]]
    assert client.get("/v1/nodes/detail").json()["nodes"][1]["chassis_uuid"] is None
    response = client.delete(f"/v1/chassis/{chassis['uuid']}")
    assert (response.status_code, faultstring(response)) == (
        400, f"Cannot complete the requested action because chassis {chassis['uuid']} contains nodes.")
    # 1.25 allows unsetting chassis_uuid.
    response = baremetal.client("1.24").patch("/v1/nodes/n1", json=[{"op": "remove", "path": "/chassis_uuid"}])
    assert response.status_code == 400
    response = client.patch("/v1/nodes/n1", json=[{"op": "remove", "path": "/chassis_uuid"}])
    assert response.status_code == 200, response.text
    assert response.json()["chassis_uuid"] is None
    response = client.patch("/v1/chassis/" + chassis["uuid"], json=[
        {"op": "replace", "path": "/description", "value": "rack 2"}])
    assert response.json()["description"] == "rack 2"
    response = client.patch("/v1/chassis/" + chassis["uuid"], json=[
        {"op": "replace", "path": "/uuid", "value": str(uuid.UUID(int=2))}])
    assert (response.status_code, faultstring(response)) == (400, "Cannot overwrite UUID for an existing Chassis.")
    response = client.get("/v1/chassis/nope")
    assert (response.status_code, faultstring(response)) == (400, "Expected UUID for chassis_uuid: nope")
    assert client.delete(f"/v1/chassis/{chassis['uuid']}").status_code == 204
    response = client.get(f"/v1/chassis/{chassis['uuid']}")
    assert (response.status_code, faultstring(response)) == (404, f"Chassis {chassis['uuid']} could not be found.")


def test_node_with_unknown_chassis_is_refused(baremetal) -> None:
    client = baremetal.client()
    missing = str(uuid.UUID(int=9))
    response = client.post("/v1/nodes", json={"driver": "fake-hardware", "chassis_uuid": missing})
    assert (response.status_code, faultstring(response)) == (400, f"Chassis {missing} could not be found.")
    node(client, name="n1")
    response = client.patch("/v1/nodes/n1", json=[{"op": "add", "path": "/chassis_uuid", "value": missing}])
    assert (response.status_code, faultstring(response)) == (400, f"Chassis {missing} could not be found.")
    assert client.get("/v1/nodes").json()["nodes"][0]["name"] == "n1"
    assert len(client.get("/v1/nodes").json()["nodes"]) == 1


def test_volume_connectors_and_targets(baremetal) -> None:
    client = baremetal.client()
    n1 = node(client, name="n1")
    root = client.get("/v1/volume").json()
    assert root["connectors"][0] == {"href": f"{baremetal.url}/v1/volume/connectors", "rel": "self"}
    assert client.get("/v1/nodes/n1/volume").json()["targets"][0] == {
        "href": f"{baremetal.url}/v1/nodes/n1/volume/targets", "rel": "self"}
    response = client.post("/v1/volume/connectors", json={
        "node_uuid": n1["uuid"], "type": "iqn", "connector_id": "iqn.2010-10.org.openstack:1"})
    assert response.status_code == 201, response.text
    connector = response.json()
    assert list(connector) == ["uuid", "created_at", "updated_at", "connector_id", "extra", "type", "links",
                               "node_uuid"]
    response = client.post("/v1/volume/connectors", json={
        "node_uuid": n1["uuid"], "type": "iqn", "connector_id": "iqn.2010-10.org.openstack:1"})
    assert (response.status_code, faultstring(response)) == (
        409, "A volume connector with type iqn and connector ID iqn.2010-10.org.openstack:1 already exists.")
    response = client.post("/v1/volume/targets", json={
        "node_uuid": n1["uuid"], "volume_type": "iscsi", "boot_index": 0, "volume_id": "v1",
        "properties": {"target_iqn": "iqn.x", "auth_password": "secret"}})
    assert response.status_code == 201, response.text
    target = response.json()
    assert list(target) == ["uuid", "created_at", "updated_at", "boot_index", "extra", "properties", "volume_id",
                            "volume_type", "links", "node_uuid"]
    response = client.post("/v1/volume/targets", json={
        "node_uuid": n1["uuid"], "volume_type": "iscsi", "boot_index": 0, "volume_id": "v2"})
    assert (response.status_code, faultstring(response)) == (
        409, "A volume target with boot index '0' for the same node already exists.")
    missing = str(uuid.UUID(int=3))
    response = client.post("/v1/volume/targets", json={
        "node_uuid": missing, "volume_type": "iscsi", "boot_index": 1, "volume_id": "v2"})
    assert (response.status_code, faultstring(response)) == (
        400, f"Invalid input for field/attribute node_uuid. Value: '{missing}'. ")
    response = client.post("/v1/volume/targets", json={"node_uuid": n1["uuid"], "volume_type": "iscsi"})
    assert response.status_code == 400
    assert faultstring(response).startswith("Schema error for target:")
    assert client.get("/v1/volume/connectors").json()["connectors"] == [
        {key: connector[key] for key in ("uuid", "connector_id", "type", "links", "node_uuid")}]
    assert client.get("/v1/nodes/n1/volume/targets").json()["targets"] == [
        {key: target[key] for key in ("uuid", "boot_index", "volume_id", "volume_type", "links", "node_uuid")}]
    assert client.get("/v1/volume/targets?detail=True").json()["targets"] == [target]
    # Volumes arrived in 1.32.
    old = baremetal.client("1.31").get("/v1/volume")
    assert (old.status_code, faultstring(old)) == (404, "The API is not supported for this version")
    old = baremetal.client("1.31").get("/v1/volume/targets")
    assert (old.status_code, faultstring(old)) == (404, "")


def test_volume_changes_need_power_off(baremetal) -> None:
    client = baremetal.client()
    n1 = node(client, name="n1")
    client.put("/v1/nodes/n1/states/power", json={"target": "power on"})
    wait_for_power(client, "n1", "power on")
    connector = client.post("/v1/volume/connectors", json={
        "node_uuid": n1["uuid"], "type": "ip", "connector_id": "192.0.2.10"}).json()
    response = client.patch(f"/v1/volume/connectors/{connector['uuid']}", json=[
        {"op": "replace", "path": "/connector_id", "value": "192.0.2.11"}])
    assert (response.status_code, faultstring(response)) == (
        400, f'The requested action "volume connector update" can not be performed on node "{n1["uuid"]}" while '
             'it is in state "power on".')
    client.put("/v1/nodes/n1/states/power", json={"target": "power off"})
    wait_for_power(client, "n1", "power off")
    response = client.patch(f"/v1/volume/connectors/{connector['uuid']}", json=[
        {"op": "replace", "path": "/connector_id", "value": "192.0.2.11"}])
    assert response.status_code == 200, response.text
    assert response.json()["connector_id"] == "192.0.2.11"
    assert client.delete(f"/v1/volume/connectors/{connector['uuid']}").status_code == 204
    assert client.get(f"/v1/volume/connectors/{connector['uuid']}").status_code == 404


def test_deleting_a_node_deletes_its_volume_records(baremetal) -> None:
    client = baremetal.client()
    n1 = node(client, name="n1")
    client.post("/v1/volume/connectors", json={"node_uuid": n1["uuid"], "type": "iqn", "connector_id": "iqn.1"})
    client.post("/v1/volume/targets", json={"node_uuid": n1["uuid"], "volume_type": "iscsi", "boot_index": 0,
                                            "volume_id": "v1"})
    assert client.delete("/v1/nodes/n1").status_code == 204
    assert client.get("/v1/volume/connectors").json() == {"connectors": []}
    assert client.get("/v1/volume/targets").json() == {"targets": []}


def test_cinder_storage_validates_boot_from_volume_without_cinder(baremetal) -> None:
    client = baremetal.client()
    n1 = node(client, name="n1", storage_interface="cinder", properties={"capabilities": "iscsi_boot:true"})
    assert n1["storage_interface"] == "cinder"

    def storage() -> dict:
        return client.get("/v1/nodes/n1/validate").json()["storage"]

    prefix = f"Failed to validate cinder storage interface for node {n1['uuid']}. "
    assert storage() == {"result": False, "reason": prefix + (
        "In order to enable the 'iscsi_boot' capability for the node, an associated volume_connector type must be "
        "valid for iSCSI (iqn).")}
    client.post("/v1/volume/connectors", json={"node_uuid": n1["uuid"], "type": "iqn", "connector_id": "iqn.1"})
    assert storage() == {"result": True}
    target = client.post("/v1/volume/targets", json={"node_uuid": n1["uuid"], "volume_type": "nfs",
                                                     "boot_index": 0, "volume_id": "v1"}).json()
    assert storage() == {"result": False, "reason": prefix + (
        f"Volume target {target['uuid']} is of an unknown type 'nfs'. Supported types: 'iscsi' or 'fibre_channel'")}
    client.delete(f"/v1/volume/targets/{target['uuid']}")
    client.post("/v1/volume/targets", json={"node_uuid": n1["uuid"], "volume_type": "iscsi", "boot_index": 0,
                                            "volume_id": "v1"})
    assert storage() == {"result": True}
    fc = client.post("/v1/volume/targets", json={"node_uuid": n1["uuid"], "volume_type": "fibre_channel",
                                                 "boot_index": 1, "volume_id": "v2"}).json()
    assert storage() == {"result": False, "reason": prefix + (
        f"Volume target {fc['uuid']} is configured for 'fibre_channel', however no Fibre Channel WWPNs are "
        "configured for the node volume connectors.")}
    client.post("/v1/volume/connectors", json={"node_uuid": n1["uuid"], "type": "wwpn", "connector_id": "w1"})
    assert storage()["reason"] == prefix + (
        "Cinder requires both wwnn and wwpn entries for FCoE connections. There must be a wwpn entry for every wwnn "
        "entry. There are 1 wwpn entries and 0 wwnn entries.")
    client.post("/v1/volume/connectors", json={"node_uuid": n1["uuid"], "type": "wwnn", "connector_id": "w2"})
    assert storage() == {"result": True}
    # The noop storage interface has nothing to check.
    node(client, name="n2")
    assert client.get("/v1/nodes/n2/validate").json()["storage"] == {"result": True}
