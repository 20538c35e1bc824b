"""/os-aggregates over HTTP, host membership mirrored to the scheduler's providers."""

from __future__ import annotations

from tests.compute.conftest import ComputeServer


def _provider_aggregates(cloud: ComputeServer, host: str) -> set[str]:
    node = cloud.managers[host].node
    assert node is not None
    return cloud.scheduler._providers[node["uuid"]].aggregates


def test_aggregate_lifecycle(cloud: ComputeServer) -> None:
    admin = cloud.client("2.69")
    created = admin.post("/v2.1/os-aggregates", json={"aggregate": {"name": "agg1", "availability_zone": "az1"}})
    assert created.status_code == 200
    aggregate = created.json()["aggregate"]
    assert aggregate["name"] == "agg1" and aggregate["availability_zone"] == "az1"
    assert aggregate["metadata"] == {"availability_zone": "az1"} and aggregate["hosts"] == []
    assert len(aggregate["uuid"]) == 36
    assert "uuid" not in cloud.client("2.40").get(f"/v2.1/os-aggregates/{aggregate['id']}").json()["aggregate"]
    path = f"/v2.1/os-aggregates/{aggregate['id']}"
    duplicate = admin.post("/v2.1/os-aggregates", json={"aggregate": {"name": "agg1"}})
    assert duplicate.status_code == 409

    added = admin.post(f"{path}/action", json={"add_host": {"host": "host-cell1"}})
    assert added.json()["aggregate"]["hosts"] == ["host-cell1"]
    assert _provider_aggregates(cloud, "host-cell1") == {aggregate["uuid"]}
    assert admin.post(f"{path}/action", json={"add_host": {"host": "host-cell1"}}).status_code == 409
    assert admin.post(f"{path}/action", json={"add_host": {"host": "nowhere"}}).status_code == 404

    meta = admin.post(f"{path}/action", json={"set_metadata": {"metadata": {"k": "v", "availability_zone": None}}})
    assert meta.json()["aggregate"]["metadata"] == {"k": "v"}
    assert meta.json()["aggregate"]["availability_zone"] is None

    renamed = admin.put(path, json={"aggregate": {"name": "agg-renamed"}})
    assert renamed.json()["aggregate"]["name"] == "agg-renamed"
    assert [a["name"] for a in admin.get("/v2.1/os-aggregates").json()["aggregates"]] == ["agg-renamed"]

    assert admin.delete(path).status_code == 400  # not empty
    removed = admin.post(f"{path}/action", json={"remove_host": {"host": "host-cell1"}})
    assert removed.json()["aggregate"]["hosts"] == []
    assert _provider_aggregates(cloud, "host-cell1") == set()
    assert admin.delete(path).status_code == 200
    assert admin.get(path).status_code == 404


def test_host_in_one_zone_only(cloud: ComputeServer) -> None:
    admin = cloud.client("2.69")
    first = admin.post("/v2.1/os-aggregates", json={"aggregate": {"name": "a", "availability_zone": "z1"}}).json()
    second = admin.post("/v2.1/os-aggregates", json={"aggregate": {"name": "b", "availability_zone": "z2"}}).json()
    admin.post(f"/v2.1/os-aggregates/{first['aggregate']['id']}/action", json={"add_host": {"host": "host-cell2"}})
    clash = admin.post(f"/v2.1/os-aggregates/{second['aggregate']['id']}/action",
                       json={"add_host": {"host": "host-cell2"}})
    assert clash.status_code == 400
    server = cloud.boot(availability_zone="z1")
    assert admin.get(f"/v2.1/servers/{server}").json()["server"]["OS-EXT-SRV-ATTR:host"] == "host-cell2"


def test_aggregates_are_admin_only(cloud: ComputeServer) -> None:
    user = cloud.client("2.69", token="user-a:project-a")
    assert user.get("/v2.1/os-aggregates").status_code == 403
    assert user.post("/v2.1/os-aggregates", json={"aggregate": {"name": "x"}}).status_code == 403


def test_delete_service(cloud: ComputeServer) -> None:
    admin = cloud.client("2.69")
    service = next(s for s in admin.get("/v2.1/os-services").json()["services"] if s["host"] == "host-cell2")
    assert admin.delete(f"/v2.1/os-services/{service['id']}").status_code == 204
    assert [s["host"] for s in admin.get("/v2.1/os-services").json()["services"]] == ["host-cell1"]
    assert admin.delete(f"/v2.1/os-services/{service['id']}").status_code == 404
