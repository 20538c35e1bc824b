"""/flavors and their extra specs over HTTP."""

from __future__ import annotations

from typing import Any

from tests.compute.conftest import ComputeServer


def make_flavor(compute: ComputeServer, **fields: Any) -> dict[str, Any]:
    body = {"name": "m1.tiny", "ram": 512, "vcpus": 1, "disk": 1, "id": "1"}
    body.update(fields)
    resp = compute.client("2.69").post("/v2.1/flavors", json={"flavor": body})
    assert resp.status_code == 200, resp.text
    return resp.json()["flavor"]


def test_create_show_list(compute: ComputeServer) -> None:
    flavor = make_flavor(compute)
    assert flavor == {
        "id": "1", "name": "m1.tiny", "ram": 512, "disk": 1, "swap": "", "vcpus": 1,
        "OS-FLV-EXT-DATA:ephemeral": 0, "OS-FLV-DISABLED:disabled": False,
        "os-flavor-access:is_public": True, "rxtx_factor": 1.0, "description": None, "extra_specs": {},
        "links": [
            {"rel": "self", "href": f"{compute.url}/v2.1/flavors/1"},
            {"rel": "bookmark", "href": f"{compute.url}/flavors/1"},
        ],
    }
    user = compute.client("2.69", token="user-a:project-a")
    listed = user.get("/v2.1/flavors").json()["flavors"]
    assert listed == [{"id": "1", "name": "m1.tiny", "description": None, "links": flavor["links"]}]
    assert user.get("/v2.1/flavors/detail").json()["flavors"] == [flavor]
    assert user.get("/v2.1/flavors/1").json()["flavor"] == flavor
    old = compute.client("2.1", token="user-a:project-a").get("/v2.1/flavors/1").json()["flavor"]
    assert "description" not in old and "extra_specs" not in old


def test_create_is_admin_only_and_validated(compute: ComputeServer) -> None:
    user = compute.client("2.69", token="user-a:project-a")
    resp = user.post("/v2.1/flavors", json={"flavor": {"name": "x", "ram": 1, "vcpus": 1, "disk": 0}})
    assert resp.status_code == 403
    assert resp.json()["forbidden"]["message"] == (
        "Policy doesn't allow os_compute_api:os-flavor-manage:create to be performed."
    )
    bad = compute.client("2.69").post("/v2.1/flavors", json={"flavor": {"name": "x", "vcpus": 1, "disk": 0}})
    assert bad.status_code == 400
    assert "'ram' is a required property" in bad.json()["badRequest"]["message"]
    make_flavor(compute)
    duplicate = compute.client("2.69").post(
        "/v2.1/flavors", json={"flavor": {"name": "m1.tiny", "ram": 1, "vcpus": 1, "disk": 0}}
    )
    assert duplicate.status_code == 409
    assert duplicate.json()["conflictingRequest"]["message"] == "Flavor with name m1.tiny already exists."


def test_paging_and_min_ram(compute: ComputeServer) -> None:
    for index in range(1, 5):
        make_flavor(compute, name=f"f{index}", id=str(index), ram=256 * index)
    admin = compute.client("2.69")
    page = admin.get("/v2.1/flavors?limit=2").json()
    assert [f["id"] for f in page["flavors"]] == ["1", "2"]
    assert "marker=2" in page["flavors_links"][0]["href"]
    rest = admin.get("/v2.1/flavors?limit=2&marker=2").json()
    assert [f["id"] for f in rest["flavors"]] == ["3", "4"]
    assert [f["id"] for f in admin.get("/v2.1/flavors?minRam=700").json()["flavors"]] == ["3", "4"]
    assert admin.get("/v2.1/flavors?marker=nope").status_code == 400


def test_delete(compute: ComputeServer) -> None:
    make_flavor(compute)
    admin = compute.client("2.69")
    assert admin.delete("/v2.1/flavors/1").status_code == 202
    missing = admin.get("/v2.1/flavors/1")
    assert missing.status_code == 404
    assert missing.json() == {"itemNotFound": {"code": 404, "message": "Flavor 1 could not be found."}}


def test_extra_specs(compute: ComputeServer) -> None:
    make_flavor(compute)
    admin = compute.client("2.69")
    resp = admin.post("/v2.1/flavors/1/os-extra_specs", json={"extra_specs": {"hw:cpu_policy": "shared", "a": 1}})
    assert resp.status_code == 200
    assert resp.json() == {"extra_specs": {"hw:cpu_policy": "shared", "a": "1"}}
    assert admin.get("/v2.1/flavors/1/os-extra_specs").json() == {"extra_specs": {"a": "1", "hw:cpu_policy": "shared"}}
    assert admin.put("/v2.1/flavors/1/os-extra_specs/a", json={"a": "2"}).json() == {"a": "2"}
    assert admin.put("/v2.1/flavors/1/os-extra_specs/a", json={"b": "2"}).status_code == 400
    assert admin.get("/v2.1/flavors/1/os-extra_specs/a").json() == {"a": "2"}
    assert admin.get("/v2.1/flavors/1").json()["flavor"]["extra_specs"] == {"a": "2", "hw:cpu_policy": "shared"}
    assert admin.delete("/v2.1/flavors/1/os-extra_specs/a").status_code == 202
    assert admin.get("/v2.1/flavors/1/os-extra_specs/a").status_code == 404
    user = compute.client("2.69", token="user-a:project-a")
    assert user.post("/v2.1/flavors/1/os-extra_specs", json={"extra_specs": {"x": "y"}}).status_code == 403


def test_description_update_needs_2_55(compute: ComputeServer) -> None:
    make_flavor(compute)
    assert compute.client("2.54").put("/v2.1/flavors/1", json={"flavor": {"description": "d"}}).status_code == 404
    resp = compute.client("2.55").put("/v2.1/flavors/1", json={"flavor": {"description": "d"}})
    assert resp.status_code == 200
    assert resp.json()["flavor"]["description"] == "d"


def test_project_segment_in_url(compute: ComputeServer) -> None:
    make_flavor(compute)
    resp = compute.client("2.69").get("/v2.1/admin/flavors/1")
    assert resp.status_code == 200
    assert resp.json()["flavor"]["links"][0]["href"] == f"{compute.url}/v2.1/admin/flavors/1"
    assert resp.json()["flavor"]["links"][1]["href"] == f"{compute.url}/admin/flavors/1"
