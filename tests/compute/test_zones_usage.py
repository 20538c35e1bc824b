"""/os-availability-zone and /os-simple-tenant-usage over HTTP, on every backend."""

from __future__ import annotations

import datetime
from typing import Any

from tests.compute.conftest import ComputeServer

USER_A = "user-a:project-a"
SINCE = "2000-01-01T00:00:00"
SERVER_USAGE = {"hours", "flavor", "instance_id", "name", "tenant_id", "memory_mb", "local_gb", "vcpus",
                "started_at", "ended_at", "state", "uptime"}
SUMMARY = {"tenant_id", "total_local_gb_usage", "total_vcpus_usage", "total_memory_mb_usage", "total_hours",
           "start", "stop"}


def _service(cloud: ComputeServer, host: str) -> dict[str, Any]:
    services = cloud.client("2.53").get("/v2.1/os-services").json()["services"]
    return next(s for s in services if s["host"] == host)


def test_zones_from_services_and_aggregates(cloud: ComputeServer) -> None:
    user = cloud.client("2.73", token=USER_A)
    assert user.get("/v2.1/os-availability-zone").json() == {"availabilityZoneInfo": [
        {"zoneName": "nova", "zoneState": {"available": True}, "hosts": None}]}
    admin = cloud.client("2.73")
    aggregate = admin.post("/v2.1/os-aggregates", json={"aggregate": {"name": "a", "availability_zone": "az1"}})
    aggregate_id = aggregate.json()["aggregate"]["id"]
    assert admin.post(f"/v2.1/os-aggregates/{aggregate_id}/action",
                      json={"add_host": {"host": "host-cell2"}}).status_code == 200
    zones = user.get("/v2.1/os-availability-zone").json()["availabilityZoneInfo"]
    assert [(z["zoneName"], z["zoneState"]["available"]) for z in zones] == [("az1", True), ("nova", True)]
    detail = admin.get("/v2.1/os-availability-zone/detail").json()["availabilityZoneInfo"]
    assert [z["zoneName"] for z in detail] == ["az1", "nova"]
    host = detail[0]["hosts"]["host-cell2"]["nova-compute"]
    assert host["available"] is True and host["active"] is True
    assert datetime.datetime.strptime(host["updated_at"], "%Y-%m-%dT%H:%M:%S.%f")
    assert list(detail[1]["hosts"]) == ["host-cell1"]
    # A zone whose services are all disabled is not available.
    assert admin.put(f"/v2.1/os-services/{_service(cloud, 'host-cell2')['id']}",
                     json={"status": "disabled"}).status_code == 200
    zones = user.get("/v2.1/os-availability-zone").json()["availabilityZoneInfo"]
    assert zones == [{"zoneName": "nova", "zoneState": {"available": True}, "hosts": None},
                     {"zoneName": "az1", "zoneState": {"available": False}, "hosts": None}]
    detail = admin.get("/v2.1/os-availability-zone/detail").json()["availabilityZoneInfo"]
    assert detail[1] == {"zoneName": "az1", "zoneState": {"available": False}, "hosts": None}
    refused = user.get("/v2.1/os-availability-zone/detail")
    assert refused.json() == {"forbidden": {"code": 403, "message":
        "Policy doesn't allow os_compute_api:os-availability-zone:detail to be performed."}}


def test_no_compute_service_no_zone(compute: ComputeServer) -> None:
    assert compute.client("2.1").get("/v2.1/os-availability-zone").json() == {"availabilityZoneInfo": []}


def _usages(cloud: ComputeServer, path: str, version: str = "2.73", token: str = "admin") -> Any:
    resp = cloud.client(version, token=token).get(path)
    assert resp.status_code == 200, resp.text
    return resp.json()


def test_tenant_usage(cloud: ComputeServer) -> None:
    kept = cloud.boot(name="kept")
    gone = cloud.boot(name="gone")
    other = cloud.boot(token="user-b:project-b", name="other")
    cloud.run_computes()
    assert cloud.client("2.73", token=USER_A).delete(f"/v2.1/servers/{gone}").status_code == 204
    # Never launched: not counted.
    for host in ("host-cell1", "host-cell2"):
        assert cloud.client("2.53").put(f"/v2.1/os-services/{_service(cloud, host)['id']}",
                                        json={"status": "disabled"}).status_code == 200
    cloud.boot(name="failed")

    listing = _usages(cloud, f"/v2.1/os-simple-tenant-usage?start={SINCE}")["tenant_usages"]
    assert [u["tenant_id"] for u in listing] == ["project-a", "project-b"]
    assert all(set(u) == SUMMARY for u in listing)
    assert listing[0]["start"] == "2000-01-01T00:00:00.000000"
    assert listing[0]["total_hours"] > 0 and listing[0]["total_memory_mb_usage"] > 0
    detailed = _usages(cloud, f"/v2.1/os-simple-tenant-usage?start={SINCE}&detailed=1")["tenant_usages"]
    usages = {u["instance_id"]: u for u in detailed[0]["server_usages"]}
    assert set(usages) == {kept, gone}
    assert all(set(u) == SERVER_USAGE for u in usages.values())
    assert usages[kept]["state"] == "active" and usages[kept]["ended_at"] is None
    assert usages[gone]["state"] == "terminated" and usages[gone]["ended_at"] is not None
    assert (usages[kept]["flavor"], usages[kept]["memory_mb"], usages[kept]["local_gb"], usages[kept]["vcpus"]) == (
        "m1.tiny", 512, 1, 1)
    assert [u["instance_id"] for u in detailed[1]["server_usages"]] == [other]

    mine = _usages(cloud, f"/v2.1/os-simple-tenant-usage/project-a?start={SINCE}", token=USER_A)["tenant_usage"]
    assert set(mine) == SUMMARY | {"server_usages"} and len(mine["server_usages"]) == 2
    assert _usages(cloud, "/v2.1/os-simple-tenant-usage/nobody?start=2000-01-01T00:00:00.5") == {"tenant_usage": {}}
    for path in ("/v2.1/os-simple-tenant-usage", "/v2.1/os-simple-tenant-usage/project-b"):
        assert cloud.client("2.73", token=USER_A).get(path).status_code == 403
    # The period: before the servers launched, none of them counts.
    assert _usages(cloud, "/v2.1/os-simple-tenant-usage?start=2000-01-01T00:00:00&end=2000-01-02T00:00:00") == {
        "tenant_usages": []}


def test_tenant_usage_refusals(cloud: ComputeServer) -> None:
    client = cloud.client("2.73")
    bad = client.get("/v2.1/os-simple-tenant-usage?start=2020-13-01T00:00:00")
    assert bad.json() == {"badRequest": {"code": 400, "message":
                                         "Invalid datetime string: Datetime is in invalid format"}}
    backwards = client.get("/v2.1/os-simple-tenant-usage?start=2020-01-02T00:00:00&end=2020-01-01T00:00:00")
    assert backwards.json() == {"badRequest": {"code": 400, "message":
        "Invalid start time. The start time cannot occur after the end time."}}
    marker = client.get(f"/v2.1/os-simple-tenant-usage?start={SINCE}&marker=nope")
    assert marker.json() == {"badRequest": {"code": 400, "message": "Marker nope could not be found."}}
    limit = client.get("/v2.1/os-simple-tenant-usage?limit=x")
    assert limit.status_code == 400


def test_tenant_usage_paging_from_2_40(cloud: ComputeServer) -> None:
    booted = [cloud.boot(name=f"s{index}") for index in range(3)]
    cloud.run_computes()
    # Each cell's servers by uuid, cell after cell (upstream does not merge the cells).
    hosts = {s: cloud.client("2.73").get(f"/v2.1/servers/{s}").json()["server"]["OS-EXT-SRV-ATTR:host"]
             for s in booted}
    servers = sorted(booted, key=lambda s: (hosts[s], s))
    first = _usages(cloud, f"/v2.1/os-simple-tenant-usage?detailed=1&limit=2&start={SINCE}")
    assert [u["instance_id"] for u in first["tenant_usages"][0]["server_usages"]] == servers[:2]
    assert first["tenant_usages_links"] == [{"rel": "next", "href": (
        f"{cloud.url}/v2.1/os-simple-tenant-usage?detailed=1&limit=2&start=2000-01-01T00%3A00%3A00"
        f"&marker={servers[1]}")}]
    rest = _usages(cloud, f"/v2.1/os-simple-tenant-usage/project-a?limit=2&start={SINCE}&marker={servers[1]}")
    assert [u["instance_id"] for u in rest["tenant_usage"]["server_usages"]] == servers[2:]
    assert "tenant_usage_links" not in rest
    page = _usages(cloud, f"/v2.1/os-simple-tenant-usage/project-a?limit=1&start={SINCE}")
    assert page["tenant_usage_links"][0]["href"].startswith(f"{cloud.url}/v2.1/os-simple-tenant-usage/project-a?")
    old = _usages(cloud, f"/v2.1/os-simple-tenant-usage?detailed=1&limit=1&start={SINCE}", version="2.39")
    assert len(old["tenant_usages"][0]["server_usages"]) == 3 and "tenant_usages_links" not in old
