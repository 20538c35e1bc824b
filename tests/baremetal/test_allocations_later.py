"""Allocations of later microversions: updates (1.57), backfill (1.58), owners (1.60)."""

from __future__ import annotations

import uuid

from corral.baremetal.db import nodes as node_db
from tests.baremetal.support import faultstring
from tests.baremetal.test_allocations_api import allocate, available_node, settled


def _active_node(baremetal, client, name: str = "n1", **values: object) -> dict:
    node = available_node(baremetal, client, name, **values)
    baremetal.state.db.write(lambda conn: node_db.update(conn, node_db.get(conn, name=name)["id"],
                                                         {"provision_state": "active"}))
    return node


def test_update_name_and_extra(baremetal) -> None:
    client = baremetal.client()
    available_node(baremetal, client, "n1")
    allocate(client, name="a1")
    settled(client, "a1")
    response = client.patch("/v1/allocations/a1", json=[{"op": "replace", "path": "/name", "value": "a2"},
                                                        {"op": "add", "path": "/extra/k", "value": "v"}])
    assert response.status_code == 200, response.text
    assert (response.json()["name"], response.json()["extra"]) == ("a2", {"k": "v"})
    assert client.get("/v1/allocations/a2").json()["extra"] == {"k": "v"}
    response = client.patch("/v1/allocations/a2", json=[{"op": "replace", "path": "/resource_class", "value": "x"}])
    assert response.status_code == 400
    assert faultstring(response) == "Cannot patch /resource_class. Only the following can be updated: name, extra"
    response = client.patch("/v1/allocations/a2", json=[{"op": "replace", "path": "/name", "value": "bad name"}])
    assert response.status_code == 400
    assert faultstring(response) == "Cannot update allocation with invalid name 'bad name'"
    allocate(client, name="b1", resource_class="other")
    response = client.patch("/v1/allocations/b1", json=[{"op": "replace", "path": "/name", "value": "a2"}])
    assert response.status_code == 409
    assert faultstring(response) == "An allocation with name a2 already exists."
    old = baremetal.client(version="1.56").patch("/v1/allocations/a2", json=[
        {"op": "replace", "path": "/name", "value": "a3"}])
    assert old.status_code == 405
    assert faultstring(old) == "The API version does not allow updating allocations"


def test_backfill_onto_a_deployed_node(baremetal) -> None:
    client = baremetal.client()
    node = _active_node(baremetal, client, "n1")
    old = baremetal.client(version="1.57").post("/v1/allocations", json={"node": "n1", "name": "bf"})
    assert old.status_code == 400
    assert faultstring(old) == "Schema error: Additional properties are not allowed ('node' was unexpected)"
    response = client.post("/v1/allocations", json={"node": "n1", "name": "bf"})
    assert response.status_code == 201, response.text
    allocation = response.json()
    assert (allocation["state"], allocation["node_uuid"], allocation["resource_class"]) == (
        "active", node["uuid"], "rc")
    assert response.headers["Location"] == f"{baremetal.url}/v1/allocations/{allocation['uuid']}"
    shown = client.get("/v1/nodes/n1").json()
    assert shown["allocation_uuid"] == shown["instance_uuid"] == allocation["uuid"]
    again = client.post("/v1/allocations", json={"node": "n1"})
    assert again.status_code == 409
    assert faultstring(again) == f"An allocation with UUID {allocation['uuid']} already exists."


def test_backfill_keeps_the_instance_uuid_already_there(baremetal) -> None:
    client = baremetal.client()
    instance = str(uuid.uuid4())
    _active_node(baremetal, client, "n1", instance_uuid=instance)
    allocation = client.post("/v1/allocations", json={"node": "n1"}).json()
    assert allocation["uuid"] == instance


def test_backfill_refusals_change_nothing(baremetal) -> None:
    client = baremetal.client()
    node = available_node(baremetal, client, "n1")
    response = client.post("/v1/allocations", json={"node": "n1"})
    assert response.status_code == 400
    assert faultstring(response) == (f"Cannot backfill an allocation for node {node['uuid']}: Node must be in the "
                                     '"active" state, but the current state is "available".')
    _active_node(baremetal, client, "n2")
    response = client.post("/v1/allocations", json={"node": "n2", "resource_class": "other"})
    assert response.status_code == 400
    assert "Resource class rc does not match the requested resource class other" in faultstring(response)
    response = client.post("/v1/allocations", json={"node": "nope"})
    assert response.status_code == 400
    assert faultstring(response) == "Node nope could not be found."
    assert client.get("/v1/allocations").json()["allocations"] == []


def test_owner_from_1_60(baremetal) -> None:
    client = baremetal.client()
    available_node(baremetal, client, "n1", owner="p1")
    response = baremetal.client(version="1.59").post("/v1/allocations", json={"resource_class": "rc",
                                                                              "owner": "p1"})
    assert response.status_code == 406
    allocation = allocate(client, owner="p1", name="a1")
    assert allocation["owner"] == "p1"
    assert settled(client, "a1")["state"] == "active"
    assert "owner" not in baremetal.client(version="1.59").get("/v1/allocations/a1").json()
    assert [item["name"] for item in client.get("/v1/allocations?owner=p1").json()["allocations"]] == ["a1"]


def test_duplicate_uuid_of_an_active_allocation(baremetal) -> None:
    client = baremetal.client()
    available_node(baremetal, client, "n1")
    first = allocate(client, name="a1")
    assert settled(client, "a1")["state"] == "active"
    response = client.post("/v1/allocations", json={"resource_class": "rc", "uuid": first["uuid"]})
    assert response.status_code == 409
    assert faultstring(response) == f"An allocation with UUID {first['uuid']} already exists."
    assert len(client.get("/v1/allocations").json()["allocations"]) == 1
