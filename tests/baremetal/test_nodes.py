"""Nodes over HTTP: create, show, list, patch, delete, traits, maintenance."""

from __future__ import annotations

import uuid

from tests.baremetal.support import fault, faultstring


def create(client, **body):
    body.setdefault("driver", "fake-hardware")
    response = client.post("/v1/nodes", json=body)
    assert response.status_code == 201, response.text
    return response.json()


def test_create_node_defaults(baremetal) -> None:
    client = baremetal.client()
    response = client.post("/v1/nodes", json={"driver": "fake-hardware", "name": "n1", "resource_class": "rc",
                                               "properties": {"cpus": 4}, "extra": {"k": "v"}})
    assert response.status_code == 201
    node = response.json()
    assert response.headers["Location"] == f"{baremetal.url}/v1/nodes/{node['uuid']}"
    assert node["provision_state"] == "enroll"
    assert node["power_state"] is None
    assert node["traits"] == []
    assert node["clean_step"] == {}
    assert node["driver_internal_info"] == {}
    assert node["power_interface"] == "fake"
    assert node["network_interface"] == "noop"
    assert node["storage_interface"] == "noop"
    assert node["conductor"] == "test-conductor"
    assert node["updated_at"] is None
    assert node["created_at"].endswith("+00:00")
    assert node["properties"] == {"cpus": 4}
    assert node["links"] == [
        {"href": f"{baremetal.url}/v1/nodes/{node['uuid']}", "rel": "self"},
        {"href": f"{baremetal.url}/nodes/{node['uuid']}", "rel": "bookmark"},
    ]
    assert list(node)[:3] == ["uuid", "created_at", "updated_at"]


def test_create_errors_change_nothing(baremetal) -> None:
    client = baremetal.client()
    create(client, name="n1")
    response = client.post("/v1/nodes", json={"driver": "fake-hardware", "name": "n1"})
    assert response.status_code == 409
    assert faultstring(response) == "A node with name n1 already exists."
    response = client.post("/v1/nodes", json={"driver": "no-such-driver"})
    assert response.status_code == 400
    assert faultstring(response).startswith(
        "No valid host was found. Reason: No conductor service registered which supports driver no-such-driver"
    )
    for bad in ("traits", "provision_state", "bogus_field"):
        response = client.post("/v1/nodes", json={"driver": "fake-hardware", bad: 1})
        assert response.status_code == 400
        assert faultstring(response) == (
            f"Schema error for node: Additional properties are not allowed ('{bad}' was unexpected)"
        )
    response = client.post("/v1/nodes", data="{not json", headers={"Content-Type": "application/json"})
    assert response.status_code == 400
    assert fault(response)["faultcode"] == "Client"
    response = client.post("/v1/nodes", json={"driver": "fake-hardware", "power_interface": "bogus"})
    assert response.status_code == 400
    response = client.post("/v1/nodes", json={"driver": "fake-hardware", "name": "bad name"})
    assert response.status_code == 400
    assert len(client.get("/v1/nodes").json()["nodes"]) == 1


def test_old_versions(baremetal) -> None:
    old = baremetal.client("1.10")
    node = create(old)
    # Before 1.11 nodes start available; before 1.2 that state had no name.
    assert node["provision_state"] == "available"
    assert "resource_class" not in node
    assert baremetal.client("1.1").get(f"/v1/nodes/{node['uuid']}").json()["provision_state"] is None
    response = old.post("/v1/nodes", json={"driver": "fake-hardware", "resource_class": "x"})
    assert response.status_code == 406
    create(baremetal.client(), name="named")
    response = baremetal.client("1.1").get("/v1/nodes/named")
    assert response.status_code == 404
    assert faultstring(response) == "Node named could not be found."
    response = baremetal.client("1.20").get("/v1/nodes?resource_class=x")
    assert response.status_code == 406
    assert faultstring(response) == "Request not acceptable. The minimal required API version should be 1.21"


def test_show_by_uuid_or_name_and_fields(baremetal) -> None:
    client = baremetal.client()
    node = create(client, name="n1", resource_class="rc")
    assert client.get(f"/v1/nodes/{node['uuid']}").json()["name"] == "n1"
    assert client.get("/v1/nodes/n1").json()["uuid"] == node["uuid"]
    response = client.get("/v1/nodes/n1?fields=uuid,provision_state")
    assert set(response.json()) == {"uuid", "provision_state", "links"}
    response = client.get("/v1/nodes/n1?fields=uuid,bogus")
    assert response.status_code == 400
    response = client.get(f"/v1/nodes/{uuid.uuid4()}")
    assert response.status_code == 404
    assert faultstring(response).endswith("could not be found.")


def test_list_filters_and_pagination(baremetal) -> None:
    client = baremetal.client()
    made = [create(client, name=f"n{i}", resource_class="rc" if i < 3 else "other") for i in range(5)]
    listed = client.get("/v1/nodes").json()
    assert [item["uuid"] for item in listed["nodes"]] == [node["uuid"] for node in made]
    assert set(listed["nodes"][0]) == {"uuid", "instance_uuid", "maintenance", "power_state", "provision_state",
                                       "name", "links"}
    assert "next" not in listed
    response = client.get("/v1/nodes?resource_class=rc&limit=2&fields=name")
    page = response.json()
    assert [item["name"] for item in page["nodes"]] == ["n0", "n1"]
    assert page["next"] == (
        f"{baremetal.url}/v1/nodes?sort_key=id&sort_dir=asc&fields=name&limit=2&marker={made[1]['uuid']}"
    )
    second = client.get(f"/v1/nodes?resource_class=rc&limit=2&fields=name&marker={made[1]['uuid']}").json()
    assert [item["name"] for item in second["nodes"]] == ["n2"]
    assert "next" not in second
    desc = client.get("/v1/nodes?sort_key=name&sort_dir=desc&limit=1").json()
    assert desc["nodes"][0]["name"] == "n4"
    detail = client.get("/v1/nodes/detail?limit=1").json()
    assert "driver_info" in detail["nodes"][0]
    assert detail["next"].startswith(f"{baremetal.url}/v1/nodes/detail?sort_key=id&sort_dir=asc&limit=1&marker=")
    assert len(client.get("/v1/nodes?detail=True").json()["nodes"]) == 5
    assert client.get("/v1/nodes?detail=True&fields=name").status_code == 400
    assert len(client.get("/v1/nodes?provision_state=enroll&driver=fake-hardware").json()["nodes"]) == 5
    assert client.get("/v1/nodes?provision_state=available").json()["nodes"] == []
    assert len(client.get("/v1/nodes?associated=false&maintenance=false").json()["nodes"]) == 5
    assert client.get("/v1/nodes?associated=true").json()["nodes"] == []
    for bad in ("limit=0", "limit=x", "sort_key=driver_info", "sort_dir=up", "maintenance=maybe",
                f"marker={uuid.uuid4()}"):
        response = client.get(f"/v1/nodes?{bad}")
        assert response.status_code in (400, 404), bad
        assert fault(response)["faultcode"] == "Client"


def test_patch(baremetal) -> None:
    client = baremetal.client()
    create(client, name="n1", extra={"k": "v"})
    response = client.patch("/v1/nodes/n1", json=[
        {"op": "replace", "path": "/extra/k", "value": "v2"},
        {"op": "add", "path": "/properties/memory_mb", "value": 1024},
        {"op": "add", "path": "/description", "value": "probe"},
        {"op": "replace", "path": "/instance_info", "value": {"image_source": "http://image"}},
    ])
    assert response.status_code == 200, response.text
    node = response.json()
    assert node["extra"] == {"k": "v2"}
    assert node["properties"] == {"memory_mb": 1024}
    assert node["description"] == "probe"
    assert node["instance_info"] == {"image_source": "http://image"}
    assert node["updated_at"] is not None
    response = client.patch("/v1/nodes/n1", json=[{"op": "remove", "path": "/extra/nokey"}])
    assert response.status_code == 400
    assert faultstring(response) == (
        "Couldn't apply patch '{'op': 'remove', 'path': '/extra/nokey'}'. "
        "Reason: can't remove a non-existent object 'nokey'"
    )
    response = client.patch("/v1/nodes/n1", json=[{"op": "replace", "path": "/provision_state", "value": "x"}])
    assert response.status_code == 400
    assert faultstring(response).startswith("Cannot patch /provision_state. Only the following can be updated: "
                                            "automated_clean, bios_interface")
    response = client.patch("/v1/nodes/n1", json={"extra": {}})
    assert response.status_code == 400
    assert faultstring(response) == "Schema error for patch: {'extra': {}} is not of type 'array'"
    response = client.patch("/v1/nodes/n1", json=[{"op": "replace", "path": "/maintenance", "value": "perhaps"}])
    assert response.status_code == 400
    assert faultstring(response).startswith("Invalid maintenance: Unrecognized value 'perhaps'")
    response = client.patch("/v1/nodes/n1", json=[{"op": "replace", "path": "/power_interface", "value": "x"}])
    assert response.status_code == 400
    assert client.get("/v1/nodes/n1").json()["extra"] == {"k": "v2"}
    create(client, name="n2")
    response = client.patch("/v1/nodes/n2", json=[{"op": "replace", "path": "/name", "value": "n1"}])
    assert response.status_code == 409
    response = client.patch("/v1/nodes/n1", json=[{"op": "remove", "path": "/description"}])
    assert response.json()["description"] is None


def test_instance_association_and_delete(baremetal) -> None:
    client = baremetal.client()
    node = create(client, name="n1")
    instance = str(uuid.uuid4())
    client.patch("/v1/nodes/n1", json=[{"op": "add", "path": "/instance_uuid", "value": instance}])
    assert len(client.get("/v1/nodes?associated=true").json()["nodes"]) == 1
    assert client.get(f"/v1/nodes?instance_uuid={instance}").json()["nodes"][0]["uuid"] == node["uuid"]
    response = client.delete("/v1/nodes/n1")
    assert response.status_code == 409
    assert faultstring(response) == f"Node {node['uuid']} is associated with instance {instance}."
    response = client.patch("/v1/nodes/n1", json=[{"op": "replace", "path": "/instance_uuid",
                                                   "value": str(uuid.uuid4())}])
    assert response.status_code == 409
    client.patch("/v1/nodes/n1", json=[{"op": "remove", "path": "/instance_uuid"}])
    response = client.delete("/v1/nodes/n1")
    assert response.status_code == 204
    assert response.content == b""
    assert client.get("/v1/nodes/n1").status_code == 404


def test_traits(baremetal) -> None:
    client = baremetal.client()
    create(client, name="n1")
    response = client.put("/v1/nodes/n1/traits", json={"traits": ["CUSTOM_GPU", "HW_CPU_X86_AVX2"]})
    assert response.status_code == 204
    response = client.put("/v1/nodes/n1/traits/CUSTOM_NVME")
    assert response.status_code == 204
    assert response.headers["Location"] == f"{baremetal.url}/v1/nodes/n1/traits/CUSTOM_NVME"
    assert client.get("/v1/nodes/n1/traits").json() == {"traits": ["CUSTOM_GPU", "CUSTOM_NVME", "HW_CPU_X86_AVX2"]}
    assert client.get("/v1/nodes/n1").json()["traits"] == ["CUSTOM_GPU", "CUSTOM_NVME", "HW_CPU_X86_AVX2"]
    response = client.put("/v1/nodes/n1/traits", json={"traits": ["lowercase_bad"]})
    assert response.status_code == 400
    assert "does not match '^CUSTOM_[A-Z0-9_]+$'" in faultstring(response)
    assert client.put("/v1/nodes/n1/traits/bad_trait").status_code == 400
    assert client.delete("/v1/nodes/n1/traits/CUSTOM_GPU").status_code == 204
    assert client.delete("/v1/nodes/n1/traits/CUSTOM_GPU").status_code == 404
    assert client.get("/v1/nodes/n1/traits").json()["traits"] == ["CUSTOM_NVME", "HW_CPU_X86_AVX2"]
    assert client.delete("/v1/nodes/n1/traits").status_code == 204
    assert client.get("/v1/nodes/n1/traits").json()["traits"] == []
    assert baremetal.client("1.36").get("/v1/nodes/n1/traits").status_code == 404


def test_maintenance(baremetal) -> None:
    client = baremetal.client()
    create(client, name="n1")
    response = client.put("/v1/nodes/n1/maintenance", json={"reason": "broken fan"})
    assert response.status_code == 202
    node = client.get("/v1/nodes/n1").json()
    assert (node["maintenance"], node["maintenance_reason"]) == (True, "broken fan")
    assert len(client.get("/v1/nodes?maintenance=true").json()["nodes"]) == 1
    assert client.delete("/v1/nodes/n1/maintenance").status_code == 202
    node = client.get("/v1/nodes/n1").json()
    assert (node["maintenance"], node["maintenance_reason"]) == (False, None)
    assert client.put("/v1/nodes/n1/maintenance", json={"reason": 5}).status_code == 400


def test_non_admin_sees_only_own_nodes(baremetal) -> None:
    client = baremetal.client()
    create(client, name="mine", owner="p1")
    create(client, name="other", owner="p2")
    member = baremetal.client(token="alice:p1")
    assert [node["name"] for node in member.get("/v1/nodes").json()["nodes"]] == ["mine"]
    assert member.get("/v1/nodes/mine").status_code == 200
    assert member.get("/v1/nodes/other").status_code == 404
    response = member.post("/v1/nodes", json={"driver": "fake-hardware"})
    assert response.status_code == 403
    assert fault(response)["faultcode"] == "Client"
