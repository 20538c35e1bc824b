"""Allocations over HTTP: create, process, list, show, delete, and their effect on nodes."""

from __future__ import annotations

import uuid

import pytest

from corral.baremetal.db import nodes as node_db
from tests.baremetal.support import fault, faultstring, wait_for
from tests.baremetal.test_nodes import create as create_node


def available_node(baremetal, client, name: str, *, resource_class: str = "rc", traits: list[str] | None = None,
                   **values: object) -> dict:
    """A node in 'available' with a known power state (set in the database: no cleaning to wait for)."""
    node = create_node(client, name=name, resource_class=resource_class)
    row = {"provision_state": "available", "power_state": "power off", **values}
    baremetal.state.db.write(lambda conn: node_db.update(conn, node_db.get(conn, uuid=node["uuid"])["id"], row))
    if traits:
        assert client.put(f"/v1/nodes/{name}/traits", json={"traits": traits}).status_code == 204
    return node


def allocate(client, **body) -> dict:
    body.setdefault("resource_class", "rc")
    response = client.post("/v1/allocations", json=body)
    assert response.status_code == 201, response.text
    return response.json()


def settled(client, ident: str) -> dict:
    """The allocation once processing finished (active or error)."""

    def check() -> dict | None:
        allocation = client.get(f"/v1/allocations/{ident}").json()
        return allocation if allocation["state"] != "allocating" else None

    return wait_for(check)


def test_create_process_show(baremetal) -> None:
    client = baremetal.client()
    n1 = available_node(baremetal, client, "n1", traits=["CUSTOM_GPU", "CUSTOM_FAST"])
    available_node(baremetal, client, "n2", traits=["CUSTOM_GPU"])
    wanted = str(uuid.uuid4())
    response = client.post("/v1/allocations", json={
        "resource_class": "rc", "traits": ["CUSTOM_GPU", "CUSTOM_FAST"], "name": "a1", "uuid": wanted,
        "extra": {"x": 1}})
    assert response.status_code == 201
    assert response.headers["Location"] == f"{baremetal.url}/v1/allocations/{wanted}"
    body = response.json()
    assert list(body) == ["uuid", "created_at", "updated_at", "candidate_nodes", "extra", "last_error", "name",
                          "owner", "resource_class", "state", "traits", "links", "node_uuid"]
    assert body["state"] == "allocating"
    assert body["updated_at"] is None and body["node_uuid"] is None and body["last_error"] is None
    assert body["traits"] == ["CUSTOM_GPU", "CUSTOM_FAST"]
    assert body["extra"] == {"x": 1}
    assert body["candidate_nodes"] == []
    assert body["created_at"].endswith("+00:00")
    assert body["links"] == [
        {"href": f"{baremetal.url}/v1/allocations/{wanted}", "rel": "self"},
        {"href": f"{baremetal.url}/allocations/{wanted}", "rel": "bookmark"},
    ]
    done = settled(client, "a1")
    assert done["state"] == "active"
    assert done["node_uuid"] == n1["uuid"]  # the only node with both traits
    assert done["updated_at"] is not None
    assert client.get(f"/v1/allocations/{wanted}").json() == done
    node = client.get("/v1/nodes/n1").json()
    assert node["instance_uuid"] == wanted
    assert node["allocation_uuid"] == wanted
    assert node["instance_info"]["traits"] == ["CUSTOM_GPU", "CUSTOM_FAST"]
    assert node["provision_state"] == "available"
    assert client.get("/v1/nodes/n2").json()["allocation_uuid"] is None
    listed = client.get("/v1/nodes?fields=uuid,allocation_uuid").json()["nodes"]
    assert {item["uuid"]: item["allocation_uuid"] for item in listed}[n1["uuid"]] == wanted
    detail = client.get("/v1/nodes/detail").json()["nodes"]
    assert {item["name"]: item["allocation_uuid"] for item in detail} == {"n1": wanted, "n2": None}
    shown = client.get("/v1/nodes/n1/allocation")
    assert shown.status_code == 200
    assert shown.json() == done
    partial = client.get("/v1/nodes/n1/allocation?fields=uuid,state").json()
    assert set(partial) == {"uuid", "state", "links"}


def test_candidate_nodes_by_name_or_uuid_and_named_node_first(baremetal) -> None:
    client = baremetal.client()
    n1 = available_node(baremetal, client, "n1")
    n2 = available_node(baremetal, client, "n2")
    available_node(baremetal, client, "n3")
    body = allocate(client, candidate_nodes=["n1", n2["uuid"]], name="n2")
    assert body["candidate_nodes"] == [n1["uuid"], n2["uuid"]]
    # A node named like the allocation is tried first.
    assert settled(client, "n2")["node_uuid"] == n2["uuid"]
    third = allocate(client, candidate_nodes=["n1"])
    assert settled(client, third["uuid"])["node_uuid"] == n1["uuid"]


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ({"traits": ["CUSTOM_MISSING"]}, "no suitable nodes have the requested traits CUSTOM_MISSING."),
        ({"resource_class": "rc-none"}, "no available nodes match the resource class rc-none."),
        ({"candidate_nodes": ["nopower"]},
         "none of the requested nodes are available and match the resource class rc."),
        ({"candidate_nodes": ["other"]},
         "none of the requested nodes are available and match the resource class rc."),
        ({"candidate_nodes": ["maint"]},
         "none of the requested nodes are available and match the resource class rc."),
    ],
)
def test_processing_failures_end_in_error(baremetal, body, reason) -> None:
    client = baremetal.client()
    available_node(baremetal, client, "n1", traits=["CUSTOM_GPU"])
    available_node(baremetal, client, "nopower", power_state=None)
    available_node(baremetal, client, "other", resource_class="other")
    available_node(baremetal, client, "maint", maintenance=True)
    created = allocate(client, **body)
    done = settled(client, created["uuid"])
    assert done["state"] == "error"
    assert done["node_uuid"] is None
    assert done["last_error"] == f"Failed to process allocation {created['uuid']}: {reason}"
    partial = client.get(f"/v1/allocations/{created['uuid']}?fields=state,last_error").json()
    assert set(partial) == {"state", "last_error", "links"}
    # Nothing was reserved.
    assert all(node["instance_uuid"] is None for node in client.get("/v1/nodes").json()["nodes"])


def test_nodes_already_taken_are_not_allocated_again(baremetal) -> None:
    client = baremetal.client()
    node = available_node(baremetal, client, "n1")
    first = allocate(client)
    assert settled(client, first["uuid"])["node_uuid"] == node["uuid"]
    second = allocate(client)
    done = settled(client, second["uuid"])
    assert done["state"] == "error"
    assert done["last_error"].endswith("no available nodes match the resource class rc.")


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        ({}, 400, "The resource_class field is mandatory when not backfilling"),
        ({"resource_class": "rc", "traits": ["bad trait"]}, 400,
         "Schema error: 'bad trait' is not valid under any of the given schemas. Possible root cause: "
         "'bad trait' does not match '^CUSTOM_[A-Z0-9_]+$'"),
        ({"resource_class": "rc", "traits": "CUSTOM_X"}, 400, "Schema error: 'CUSTOM_X' is not of type"),
        ({"resource_class": "rc", "candidate_nodes": ["nonexistent"]}, 400, "Nodes cannot be found: nonexistent"),
        ({"resource_class": "rc", "candidate_nodes": ["banana?"]}, 400,
         "Schema error: 'banana?' is not valid under any of the given schemas."),
        ({"resource_class": "rc", "state": "active"}, 400,
         "Schema error: Additional properties are not allowed ('state' was unexpected)"),
        ({"resource_class": "rc", "name": "not a valid name!"}, 400,
         "Cannot create allocation with invalid name 'not a valid name!'"),
        ({"resource_class": "x" * 81}, 400, "Schema error: "),
        ({"resource_class": 5}, 400, "Schema error: 5 is not of type"),
        ({"resource_class": "rc", "uuid": "!@#$^*&%^"}, 400, "Schema error: '!@#$^*&%^' is not a 'uuid'"),
        ({"resource_class": "rc", "node": "n1"}, 400,
         "Schema error: Additional properties are not allowed ('node' was unexpected)"),
        ({"resource_class": "rc", "owner": "p1"}, 406, "Request not acceptable."),
        (["resource_class"], 400, "Schema error: ['resource_class'] is not of type 'object'"),
    ],
)
def test_create_errors(baremetal, body, status, message) -> None:
    # The version before backfilling (1.58) and owners (1.60).
    client = baremetal.client(version="1.57")
    available_node(baremetal, client, "n1")
    response = client.post("/v1/allocations", json=body)
    assert response.status_code == status, response.text
    assert faultstring(response).startswith(message)
    assert fault(response)["faultcode"] == "Client"
    assert client.get("/v1/allocations").json()["allocations"] == []


def test_malformed_json_is_a_client_error(baremetal) -> None:
    client = baremetal.client()
    response = client.post("/v1/allocations", data=b"{nope", headers={"Content-Type": "application/json"})
    assert response.status_code == 400
    assert client.get("/v1/allocations").json()["allocations"] == []


def test_duplicates_conflict(baremetal) -> None:
    client = baremetal.client()
    first = allocate(client, name="a1")
    response = client.post("/v1/allocations", json={"resource_class": "rc", "name": "a1"})
    assert response.status_code == 409
    assert faultstring(response) == "An allocation with name a1 already exists."
    response = client.post("/v1/allocations", json={"resource_class": "rc", "uuid": first["uuid"]})
    assert response.status_code == 409
    assert faultstring(response) == f"An allocation with UUID {first['uuid']} already exists."
    # A UUID already used as some node's instance UUID.
    instance = str(uuid.uuid4())
    node = create_node(client, name="n9", instance_uuid=instance)
    response = client.post("/v1/allocations", json={"resource_class": "rc", "uuid": instance})
    assert response.status_code == 409
    assert faultstring(response) == f"Instance {instance} is already associated with node {node['uuid']}."
    assert len(client.get("/v1/allocations").json()["allocations"]) == 1


def test_versions_below_1_52(baremetal) -> None:
    old = baremetal.client(version="1.51")
    response = old.get("/v1/allocations")
    assert response.status_code == 404
    assert faultstring(response) == "The API version does not allow allocations"
    response = old.post("/v1/allocations", json={"resource_class": "rc"})
    assert response.status_code == 405
    assert faultstring(response) == "The API version does not allow allocations"
    client = baremetal.client()
    create_node(client, name="n1")
    assert "allocation_uuid" not in old.get("/v1/nodes/n1").json()
    assert "allocation_uuid" in client.get("/v1/nodes/n1").json()
    response = old.get("/v1/nodes/n1/allocation")
    assert response.status_code == 404
    assert fault(response) == {"code": 404, "title": "Not Found", "description": ""}
    # Upstream's node router refuses the path before negotiating: no version headers, 404 for any method.
    assert "X-OpenStack-Ironic-API-Version" not in response.headers
    assert old.delete("/v1/nodes/n1/allocation").status_code == 404


def test_show_and_delete_errors(baremetal) -> None:
    client = baremetal.client()
    response = client.get("/v1/allocations/nope")
    assert response.status_code == 404
    assert faultstring(response) == "Allocation nope could not be found."
    assert client.get(f"/v1/allocations/{uuid.uuid4()}").status_code == 404
    assert client.delete("/v1/allocations/nope").status_code == 404
    response = client.get("/v1/allocations/bad%20name!")
    assert response.status_code == 400
    allocate(client, name="a1")
    response = client.get("/v1/allocations/a1?fields=bogus")
    assert response.status_code == 400
    assert faultstring(response).startswith("Schema error: 'bogus' is not one of ['candidate_nodes', 'created_at'")
    create_node(client, name="n1")
    response = client.get("/v1/nodes/n1/allocation")
    assert response.status_code == 404
    assert faultstring(response) == "Allocation for node n1 was not found"
    assert client.delete("/v1/nodes/n1/allocation").status_code == 404
    assert client.get("/v1/nodes/nope/allocation").status_code == 404


def test_delete_frees_the_node(baremetal) -> None:
    client = baremetal.client()
    available_node(baremetal, client, "n1")
    created = allocate(client, name="a1")
    assert settled(client, "a1")["state"] == "active"
    response = client.delete("/v1/allocations/a1")
    assert response.status_code == 204
    assert response.content == b""
    node = client.get("/v1/nodes/n1").json()
    assert node["instance_uuid"] is None and node["allocation_uuid"] is None
    assert node["instance_info"] == {"traits": []}  # upstream leaves the recorded traits
    assert client.get(f"/v1/allocations/{created['uuid']}").status_code == 404
    assert client.delete("/v1/allocations/a1").status_code == 404
    # The node serves the next allocation.
    again = allocate(client)
    assert settled(client, again["uuid"])["state"] == "active"
    assert client.delete("/v1/nodes/n1/allocation").status_code == 204
    assert client.get("/v1/nodes/n1").json()["allocation_uuid"] is None


def test_delete_allocation_in_error(baremetal) -> None:
    client = baremetal.client()
    created = allocate(client, resource_class="none")
    assert settled(client, created["uuid"])["state"] == "error"
    assert client.delete(f"/v1/allocations/{created['uuid']}").status_code == 204
    assert client.get("/v1/allocations").json()["allocations"] == []


def test_list_filters_fields_and_pages(baremetal) -> None:
    client = baremetal.client()
    n1 = available_node(baremetal, client, "n1")
    allocate(client, name="a-ok")
    assert settled(client, "a-ok")["state"] == "active"
    for name in ("b-err", "c-err"):
        allocate(client, name=name, resource_class="other")
        assert settled(client, name)["state"] == "error"
    listed = client.get("/v1/allocations").json()["allocations"]
    assert [item["name"] for item in listed] == ["a-ok", "b-err", "c-err"]
    assert "traits" in listed[0]  # full items, not a summary
    by_state = client.get("/v1/allocations?state=error&fields=name").json()["allocations"]
    assert by_state == [{"name": "b-err", "links": by_state[0]["links"]},
                        {"name": "c-err", "links": by_state[1]["links"]}]
    assert client.get("/v1/allocations?state=bogus").json()["allocations"] == []
    by_class = client.get("/v1/allocations?resource_class=other").json()["allocations"]
    assert [item["name"] for item in by_class] == ["b-err", "c-err"]
    for ident in ("n1", n1["uuid"]):
        by_node = client.get(f"/v1/allocations?node={ident}").json()["allocations"]
        assert [item["name"] for item in by_node] == ["a-ok"]
    response = client.get("/v1/allocations?node=nope")
    assert response.status_code == 400
    assert faultstring(response) == "Node nope could not be found."
    assert client.get("/v1/allocations?fields=bogus").status_code == 400
    assert client.get(f"/v1/allocations?resource_class={'x' * 81}").status_code == 400
    assert baremetal.client(version="1.59").get("/v1/allocations?owner=p1").status_code == 406
    assert client.get("/v1/allocations?owner=p1").json()["allocations"] == []
    page = client.get("/v1/allocations?sort_key=name&sort_dir=desc&fields=name&limit=2").json()
    assert [item["name"] for item in page["allocations"]] == ["c-err", "b-err"]
    marker = client.get("/v1/allocations/b-err").json()["uuid"]
    assert page["next"] == (f"{baremetal.url}/v1/allocations?sort_key=name&sort_dir=desc&fields=name&limit=2"
                            f"&marker={marker}")
    rest = client.get(page["next"].removeprefix(baremetal.url)).json()
    assert [item["name"] for item in rest["allocations"]] == ["a-ok"]
    assert "next" not in rest
    assert client.get("/v1/allocations?sort_key=bogus").status_code == 400
    assert client.get("/v1/allocations?sort_dir=up").status_code == 400
    assert client.get("/v1/allocations?limit=0").status_code == 400
    assert client.get("/v1/allocations?limit=x").status_code == 400
    assert client.get(f"/v1/allocations?marker={uuid.uuid4()}").status_code == 404


def test_projects_see_only_their_allocations(baremetal) -> None:
    admin = baremetal.client()
    allocate(admin, name="admins")
    project = baremetal.client(token="demo:p1")
    mine = allocate(project, name="mine")
    assert [item["name"] for item in project.get("/v1/allocations").json()["allocations"]] == ["mine"]
    assert project.get("/v1/allocations/admins").status_code == 404
    assert project.get("/v1/allocations/mine").status_code == 200
    assert {item["name"] for item in admin.get("/v1/allocations").json()["allocations"]} == {"admins", "mine"}
    assert project.delete("/v1/allocations/admins").status_code == 404
    assert project.delete(f"/v1/allocations/{mine['uuid']}").status_code == 204


# ------------------------------------------------------- node rules


def _allocated(baremetal, client, name: str = "n1") -> dict:
    available_node(baremetal, client, name)
    created = allocate(client, name=f"a-{name}")
    done = settled(client, created["uuid"])
    assert done["state"] == "active"
    return done


def _deploy(client, name: str) -> dict:
    from tests.baremetal.support import wait_for_state

    response = client.put(f"/v1/nodes/{name}/states/provision", json={"target": "active"})
    assert response.status_code == 202, response.text
    return wait_for_state(client, name, "active")


def test_patch_removing_instance_uuid_deletes_the_allocation(baremetal) -> None:
    client = baremetal.client()
    allocation = _allocated(baremetal, client)
    other = str(uuid.uuid4())
    response = client.patch("/v1/nodes/n1", json=[{"op": "replace", "path": "/instance_uuid", "value": other}])
    assert response.status_code == 409
    assert faultstring(response) == (f"Node {allocation['node_uuid']} is associated with instance "
                                     f"{allocation['uuid']}.")
    same = [{"op": "replace", "path": "/instance_uuid", "value": allocation["uuid"]}]
    assert client.patch("/v1/nodes/n1", json=same).status_code == 200
    response = client.patch("/v1/nodes/n1", json=[{"op": "replace", "path": "/allocation_uuid", "value": other}])
    assert response.status_code == 400
    response = client.patch("/v1/nodes/n1", json=[{"op": "remove", "path": "/instance_uuid"}])
    assert response.status_code == 200
    assert response.json()["instance_uuid"] is None
    assert response.json()["allocation_uuid"] is None
    assert client.get(f"/v1/allocations/{allocation['uuid']}").status_code == 404


def test_active_node_keeps_its_allocation_until_maintenance_or_tear_down(baremetal) -> None:
    client = baremetal.client()
    allocation = _allocated(baremetal, client)
    deployed = _deploy(client, "n1")
    assert deployed["allocation_uuid"] == allocation["uuid"]
    assert deployed["instance_uuid"] == allocation["uuid"]
    assert client.get(f"/v1/allocations/{allocation['uuid']}").json()["state"] == "active"
    response = client.delete(f"/v1/allocations/{allocation['uuid']}")
    assert response.status_code == 409
    assert faultstring(response) == (f"Cannot remove allocation {allocation['uuid']} for node "
                                     f"{allocation['node_uuid']}, because the node is active (and maintenance "
                                     "mode is off)")
    response = client.patch("/v1/nodes/n1", json=[{"op": "remove", "path": "/instance_uuid"}])
    assert response.status_code == 409
    assert client.delete("/v1/nodes/n1").status_code == 409
    assert client.get("/v1/nodes/n1").json()["allocation_uuid"] == allocation["uuid"]
    # Tear-down ends the allocation.
    from tests.baremetal.support import wait_for_state

    assert client.put("/v1/nodes/n1/states/provision", json={"target": "deleted"}).status_code == 202
    node = wait_for_state(client, "n1", "available")
    assert node["instance_uuid"] is None and node["allocation_uuid"] is None
    assert client.get(f"/v1/allocations/{allocation['uuid']}").status_code == 404


def test_maintenance_allows_removing_the_allocation_of_an_active_node(baremetal) -> None:
    client = baremetal.client()
    allocation = _allocated(baremetal, client)
    _deploy(client, "n1")
    assert client.put("/v1/nodes/n1/maintenance", json={"reason": "x"}).status_code == 202
    assert client.delete(f"/v1/allocations/{allocation['uuid']}").status_code == 204
    node = client.get("/v1/nodes/n1").json()
    assert node["provision_state"] == "active"
    assert node["instance_uuid"] is None and node["allocation_uuid"] is None


def test_deleting_a_node_in_maintenance_deletes_its_allocation(baremetal) -> None:
    client = baremetal.client()
    allocation = _allocated(baremetal, client)
    response = client.delete("/v1/nodes/n1")
    assert response.status_code == 409
    assert client.get(f"/v1/allocations/{allocation['uuid']}").status_code == 200
    assert client.put("/v1/nodes/n1/maintenance", json={}).status_code == 202
    assert client.delete("/v1/nodes/n1").status_code == 204
    assert client.get(f"/v1/allocations/{allocation['uuid']}").status_code == 404
    assert client.get("/v1/nodes/n1").status_code == 404
