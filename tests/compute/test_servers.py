"""/servers over HTTP: boot, list, detail, show, delete, soft delete, restore, force delete."""

from __future__ import annotations

from tests.compute.conftest import IMAGE, ComputeServer

USER_A = "user-a:project-a"
USER_B = "user-b:project-b"


def test_boot_goes_build_then_active(cloud: ComputeServer) -> None:
    client = cloud.client("2.69", token=USER_A)
    resp = client.post("/v2.1/servers", json={"server": {
        "name": "web", "flavorRef": "1", "imageRef": IMAGE, "networks": "none", "metadata": {"k": "v"},
    }})
    assert resp.status_code == 202, resp.text
    body = resp.json()["server"]
    assert set(body) == {"id", "links", "OS-DCF:diskConfig", "security_groups", "adminPass"}
    assert resp.headers["Location"] == f"{cloud.url}/v2.1/servers/{body['id']}"
    server = client.get(f"/v2.1/servers/{body['id']}").json()["server"]
    assert server["status"] == "BUILD"
    assert server["metadata"] == {"k": "v"}
    cloud.run_computes()
    server = client.get(f"/v2.1/servers/{body['id']}").json()["server"]
    assert server["status"] == "ACTIVE"
    assert server["OS-EXT-STS:power_state"] == 1
    assert server["flavor"] == {
        "vcpus": 1, "ram": 512, "disk": 1, "ephemeral": 0, "swap": 0, "original_name": "m1.tiny", "extra_specs": {},
    }
    assert server["image"] == {"id": IMAGE, "links": [{"rel": "bookmark", "href": f"{cloud.url}/images/{IMAGE}"}]}
    assert server["tenant_id"] == "project-a" and server["user_id"] == "user-a"
    assert "OS-EXT-SRV-ATTR:host" not in server
    admin_view = cloud.client("2.69").get(f"/v2.1/servers/{body['id']}").json()["server"]
    assert admin_view["OS-EXT-SRV-ATTR:host"] in ("host-cell1", "host-cell2")
    assert admin_view["host_status"] == "UP"


def test_networks_required_from_2_37(cloud: ComputeServer) -> None:
    resp = cloud.client("2.69", token=USER_A).post(
        "/v2.1/servers", json={"server": {"name": "x", "flavorRef": "1", "imageRef": IMAGE}}
    )
    assert resp.status_code == 400
    assert "'networks' is a required property" in resp.json()["badRequest"]["message"]
    old = cloud.client("2.36", token=USER_A).post(
        "/v2.1/servers", json={"server": {"name": "x", "flavorRef": "1", "imageRef": IMAGE}}
    )
    assert old.status_code == 202


def test_boot_validation(cloud: ComputeServer) -> None:
    client = cloud.client("2.69", token=USER_A)
    resp = client.post("/v2.1/servers", json={"server": {"name": "bad"}})
    assert resp.status_code == 400
    assert resp.json()["badRequest"]["message"] == (
        "Invalid input for field/attribute server. Value: {'name': 'bad'}. 'flavorRef' is a required property"
    )
    missing = client.post("/v2.1/servers", json={"server": {
        "name": "x", "flavorRef": "nope", "imageRef": IMAGE, "networks": "none"}})
    assert missing.status_code == 400
    assert missing.json()["badRequest"]["message"] == "Flavor nope could not be found."
    zone = client.post("/v2.1/servers", json={"server": {
        "name": "x", "flavorRef": "1", "imageRef": IMAGE, "networks": "none", "availability_zone": "nowhere"}})
    assert zone.status_code == 400


def test_list_and_detail_span_cells(cloud: ComputeServer) -> None:
    ids = [cloud.boot(name=f"vm{i}") for i in range(4)]
    cloud.run_computes()
    admin = cloud.client("2.69")
    hosts = {admin.get(f"/v2.1/servers/{i}").json()["server"]["OS-EXT-SRV-ATTR:host"] for i in ids}
    assert hosts == {"host-cell1", "host-cell2"}
    client = cloud.client("2.69", token=USER_A)
    listed = client.get("/v2.1/servers").json()["servers"]
    # Newest first.
    assert [s["id"] for s in listed] == list(reversed(ids))
    assert set(listed[0]) == {"id", "name", "links"}
    detail = client.get("/v2.1/servers/detail").json()["servers"]
    assert [s["id"] for s in detail] == list(reversed(ids))
    assert all(s["status"] == "ACTIVE" for s in detail)
    assert cloud.client("2.69", token=USER_B).get("/v2.1/servers").json()["servers"] == []


def test_paging_sorting_and_filters(cloud: ComputeServer) -> None:
    ids = [cloud.boot(name=name) for name in ("b", "a", "c")]
    client = cloud.client("2.69", token=USER_A)
    page = client.get("/v2.1/servers?limit=2").json()
    assert [s["id"] for s in page["servers"]] == [ids[2], ids[1]]
    assert "marker=" in page["servers_links"][0]["href"]
    rest = client.get(f"/v2.1/servers?limit=2&marker={ids[1]}").json()
    assert [s["id"] for s in rest["servers"]] == [ids[0]]
    by_name = client.get("/v2.1/servers?sort_key=display_name&sort_dir=asc").json()["servers"]
    assert [s["name"] for s in by_name] == ["a", "b", "c"]
    assert [s["name"] for s in client.get("/v2.1/servers?name=a").json()["servers"]] == ["a"]
    assert client.get("/v2.1/servers?status=ACTIVE").json()["servers"] == []
    cloud.run_computes()
    assert len(client.get("/v2.1/servers?status=ACTIVE").json()["servers"]) == 3
    assert client.get("/v2.1/servers?status=BOGUS").status_code == 400
    assert client.get("/v2.1/servers?marker=nope").status_code == 400
    assert client.get("/v2.1/servers?all_tenants=1").status_code == 403


def test_admin_all_tenants(cloud: ComputeServer) -> None:
    mine = cloud.boot(token=USER_A)
    theirs = cloud.boot(token=USER_B)
    admin = cloud.client("2.69")
    everyone = {s["id"] for s in admin.get("/v2.1/servers/detail?all_tenants=1").json()["servers"]}
    assert {mine, theirs} <= everyone
    only_b = admin.get("/v2.1/servers?all_tenants=1&project_id=project-b").json()["servers"]
    assert [s["id"] for s in only_b] == [theirs]
    assert admin.get("/v2.1/servers").json()["servers"] == []


def test_show_other_project_is_404(cloud: ComputeServer) -> None:
    server = cloud.boot(token=USER_A)
    resp = cloud.client("2.69", token=USER_B).get(f"/v2.1/servers/{server}")
    assert resp.status_code == 404
    assert resp.json() == {"itemNotFound": {"code": 404, "message": f"Instance {server} could not be found."}}
    assert cloud.client("2.69", token=USER_B).delete(f"/v2.1/servers/{server}").status_code == 404


def test_delete_frees_resources(cloud: ComputeServer) -> None:
    server = cloud.boot()
    cloud.run_computes()
    assert cloud.scheduler.allocations_of(server)
    client = cloud.client("2.69", token=USER_A)
    assert client.delete(f"/v2.1/servers/{server}").status_code == 204
    assert client.get(f"/v2.1/servers/{server}").status_code == 404
    assert cloud.scheduler.allocations_of(server) == {}
    assert client.get("/v2.1/servers").json()["servers"] == []
    deleted = cloud.client("2.69").get("/v2.1/servers/detail?all_tenants=1&deleted=true").json()["servers"]
    assert [(s["id"], s["status"]) for s in deleted] == [(server, "DELETED")]


def test_no_valid_host_lands_in_cell0(cloud: ComputeServer) -> None:
    admin = cloud.client("2.69")
    big = {"name": "huge", "ram": 512, "vcpus": 1, "disk": 1, "id": "huge"}
    assert admin.post("/v2.1/flavors", json={"flavor": big}).status_code == 200
    specs = {"extra_specs": {"trait:CUSTOM_NO_HOST_HAS_THIS": "required"}}
    assert admin.post("/v2.1/flavors/huge/os-extra_specs", json=specs).status_code == 200
    server = cloud.boot(flavorRef="huge")
    shown = cloud.client("2.69", token=USER_A).get(f"/v2.1/servers/{server}").json()["server"]
    assert shown["status"] == "ERROR"
    assert shown["fault"]["message"].startswith("No valid host was found.")


def test_actions_need_soft_deleted_state(cloud: ComputeServer) -> None:
    server = cloud.boot()
    cloud.run_computes()
    client = cloud.client("2.69", token=USER_A)
    resp = client.post(f"/v2.1/servers/{server}/action", json={"restore": None})
    assert resp.status_code == 409
    assert resp.json()["conflictingRequest"]["message"] == (
        f"Cannot 'restore' instance {server} while it is in vm_state active"
    )
    assert client.post(f"/v2.1/servers/{server}/action", json={"reboot": {}}).status_code == 400


def test_later_microversions_add_server_groups_and_locked_reason(cloud: ComputeServer) -> None:
    server = cloud.boot()
    client = cloud.client("2.73", token=USER_A)
    shown = client.get(f"/v2.1/servers/{server}").json()["server"]
    assert shown["server_groups"] == [] and shown["locked_reason"] is None
    (listed,) = client.get("/v2.1/servers/detail").json()["servers"]
    assert "server_groups" not in listed and listed["locked_reason"] is None
    assert [s["id"] for s in client.get("/v2.1/servers?locked=false").json()["servers"]] == [server]
    assert client.get("/v2.1/servers?locked=true").json()["servers"] == []
    older = cloud.client("2.70", token=USER_A).get(f"/v2.1/servers/{server}").json()["server"]
    assert "server_groups" not in older and "locked_reason" not in older


def test_bad_input_is_400_never_500(cloud: ComputeServer) -> None:
    client = cloud.client("2.69")
    server = {"name": "x", "flavorRef": "1", "imageRef": IMAGE, "networks": "none"}
    for body in ({"server": {**server, "min_count": "0"}}, {"server": {**server, "min_count": 3, "max_count": 2}},
                 {"server": {**server, "networks": "bogus"}}, {"server": []}, []):
        assert client.post("/v2.1/servers", json=body).status_code == 400, body
    for query in ("limit=abc", "limit=-1", "sort_key=bogus", "sort_dir=up", "changes-since=garbage",
                  "all_tenants=maybe", "power_state=x", "launch_index=x"):
        assert client.get(f"/v2.1/servers/detail?{query}").status_code == 400, query
    malformed = client.post("/v2.1/servers", data="not json", headers={"Content-Type": "application/json"})
    assert malformed.status_code == 400
