"""/os-hypervisors over HTTP at each microversion that changes it, on every backend."""

from __future__ import annotations

import json
from typing import Any

from corral.compute.db import api_queries as q
from tests.compute.conftest import ComputeServer
from tests.compute.test_down_cells import UNREACHABLE

SUMMARY = {"id", "hypervisor_hostname", "state", "status"}
DETAIL = SUMMARY | {
    "hypervisor_type", "hypervisor_version", "host_ip", "service", "vcpus", "memory_mb", "local_gb", "vcpus_used",
    "memory_mb_used", "local_gb_used", "free_ram_mb", "free_disk_gb", "current_workload", "running_vms",
    "disk_available_least", "cpu_info"}
CPU_INFO = {"arch": "x86_64", "model": "Nehalem", "vendor": "Intel", "features": ["pge", "clflush"],
            "topology": {"cores": 1, "threads": 1, "sockets": 4}}


def _hypervisors(cloud: ComputeServer, version: str, path: str = "/v2.1/os-hypervisors") -> Any:
    resp = cloud.client(version).get(path)
    assert resp.status_code == 200, resp.text
    return resp.json()


def _by_name(listing: dict[str, Any]) -> dict[str, Any]:
    return {h["hypervisor_hostname"]: h for h in listing["hypervisors"]}


def test_list_and_detail_by_version(cloud: ComputeServer) -> None:
    old = _hypervisors(cloud, "2.1")["hypervisors"]
    assert [h["hypervisor_hostname"] for h in old] == ["host-cell1", "host-cell2"]
    assert all(set(h) == SUMMARY and isinstance(h["id"], int) for h in old)
    assert old[0]["state"] == "up" and old[0]["status"] == "enabled"
    detail = _by_name(_hypervisors(cloud, "2.1", "/v2.1/os-hypervisors/detail"))["host-cell1"]
    assert set(detail) == DETAIL
    assert json.loads(detail["cpu_info"]) == CPU_INFO
    assert detail["hypervisor_type"] == "fake" and detail["hypervisor_version"] == 1000
    assert detail["service"] == {"id": detail["service"]["id"], "host": "host-cell1", "disabled_reason": None}
    assert isinstance(detail["service"]["id"], int) and isinstance(detail["host_ip"], str)
    assert (detail["vcpus"], detail["memory_mb"], detail["local_gb"]) == (64, 131072, 2048)
    newer = _by_name(_hypervisors(cloud, "2.28", "/v2.1/os-hypervisors/detail"))["host-cell1"]
    assert newer["cpu_info"] == CPU_INFO
    uuids = _hypervisors(cloud, "2.53", "/v2.1/os-hypervisors/detail")["hypervisors"]
    assert all(len(h["id"]) == 36 and len(h["service"]["id"]) == 36 for h in uuids)
    refused = cloud.client("2.53", token="user-a:project-a").get("/v2.1/os-hypervisors")
    assert refused.json() == {"forbidden": {"code": 403, "message":
                                            "Policy doesn't allow os_compute_api:os-hypervisors:list to be performed."}}


def test_usage_follows_the_servers(cloud: ComputeServer) -> None:
    server = cloud.boot(token="admin:project-a", availability_zone="nova:host-cell1")
    building = _by_name(_hypervisors(cloud, "2.28", "/v2.1/os-hypervisors/detail"))["host-cell1"]
    assert building["current_workload"] == 1
    cloud.run_computes()
    detail = _by_name(_hypervisors(cloud, "2.28", "/v2.1/os-hypervisors/detail"))
    used = detail["host-cell1"]
    assert (used["vcpus_used"], used["memory_mb_used"], used["local_gb_used"], used["running_vms"]) == (1, 512, 1, 1)
    assert (used["free_ram_mb"], used["free_disk_gb"], used["current_workload"]) == (131072 - 512, 2047, 0)
    assert detail["host-cell2"]["running_vms"] == 0
    stats = _hypervisors(cloud, "2.1", "/v2.1/os-hypervisors/statistics")["hypervisor_statistics"]
    assert stats == {"count": 2, "current_workload": 0, "disk_available_least": 0, "free_disk_gb": 4095,
                     "free_ram_mb": 2 * 131072 - 512, "local_gb": 4096, "local_gb_used": 1, "memory_mb": 262144,
                     "memory_mb_used": 512, "running_vms": 1, "vcpus": 128, "vcpus_used": 1}
    with_servers = _hypervisors(cloud, "2.53", "/v2.1/os-hypervisors?with_servers=true")["hypervisors"]
    assert with_servers[0]["servers"] == [{"name": "vm", "uuid": server}]
    assert "servers" not in with_servers[1]
    old_servers = _hypervisors(cloud, "2.1", "/v2.1/os-hypervisors/cell1/servers")["hypervisors"]
    assert old_servers == [{**with_servers[0], "id": old_servers[0]["id"]}]
    # A deleted server no longer counts.
    assert cloud.client("2.73").delete(f"/v2.1/servers/{server}").status_code == 204
    assert _by_name(_hypervisors(cloud, "2.28", "/v2.1/os-hypervisors/detail"))["host-cell1"]["running_vms"] == 0


def test_statistics_leave_out_disabled_services(cloud: ComputeServer) -> None:
    admin = cloud.client("2.53")
    service = next(s for s in admin.get("/v2.1/os-services").json()["services"] if s["host"] == "host-cell2")
    assert admin.put(f"/v2.1/os-services/{service['id']}", json={"status": "disabled", "disabled_reason": "x"}
                     ).status_code == 200
    assert _hypervisors(cloud, "2.1", "/v2.1/os-hypervisors/statistics")["hypervisor_statistics"]["count"] == 1
    listed = _by_name(_hypervisors(cloud, "2.53", "/v2.1/os-hypervisors/detail"))["host-cell2"]
    assert listed["status"] == "disabled" and listed["service"]["disabled_reason"] == "x"


def test_paging(cloud: ComputeServer) -> None:
    for version in ("2.33", "2.53"):
        first = _hypervisors(cloud, version, "/v2.1/os-hypervisors?limit=1")
        marker = first["hypervisors"][0]["id"]
        assert first["hypervisors_links"] == [
            {"rel": "next", "href": f"{cloud.url}/v2.1/os-hypervisors?limit=1&marker={marker}"}]
        second = _hypervisors(cloud, version, f"/v2.1/os-hypervisors/detail?limit=1&marker={marker}")
        assert second["hypervisors"][0]["hypervisor_hostname"] == "host-cell2"
        assert second["hypervisors_links"][0]["href"].startswith(f"{cloud.url}/v2.1/os-hypervisors/detail?")
    # Before 2.53 ids are per cell, so both nodes are 1 and that marker means the first cell's; uuids end it.
    uuid_marker = _hypervisors(cloud, "2.53")["hypervisors"][1]["id"]
    assert _hypervisors(cloud, "2.53", f"/v2.1/os-hypervisors?limit=1&marker={uuid_marker}") == {"hypervisors": []}
    unknown = cloud.client("2.53").get("/v2.1/os-hypervisors?marker=nope")
    assert unknown.json() == {"badRequest": {"code": 400, "message": "marker [nope] not found"}}
    assert "hypervisors_links" not in _hypervisors(cloud, "2.32", "/v2.1/os-hypervisors?limit=1")
    assert len(_hypervisors(cloud, "2.32", "/v2.1/os-hypervisors?limit=1")["hypervisors"]) == 2
    twice = cloud.client("2.53").get("/v2.1/os-hypervisors?limit=1&limit=2")
    assert twice.status_code == 400


def test_hostname_pattern_and_old_search(cloud: ComputeServer) -> None:
    found = _hypervisors(cloud, "2.53", "/v2.1/os-hypervisors?hypervisor_hostname_pattern=CELL2")["hypervisors"]
    assert [h["hypervisor_hostname"] for h in found] == ["host-cell2"]
    none = cloud.client("2.53").get("/v2.1/os-hypervisors?hypervisor_hostname_pattern=zzz")
    assert none.json() == {"itemNotFound": {"code": 404, "message": "No hypervisor matching 'zzz' could be found."}}
    paged = cloud.client("2.53").get("/v2.1/os-hypervisors/detail?hypervisor_hostname_pattern=host&limit=1")
    assert paged.json() == {"badRequest": {"code": 400, "message":
        "Paging over hypervisors with the hypervisor_hostname_pattern query parameter is not supported."}}
    bad = cloud.client("2.53").get("/v2.1/os-hypervisors?with_servers=maybe")
    assert bad.status_code == 400
    # Before 2.53 both parameters are ignored.
    ignored = _hypervisors(cloud, "2.52", "/v2.1/os-hypervisors?hypervisor_hostname_pattern=zzz&with_servers=maybe")
    assert len(ignored["hypervisors"]) == 2
    old = _hypervisors(cloud, "2.52", "/v2.1/os-hypervisors/host/search")["hypervisors"]
    assert [h["hypervisor_hostname"] for h in old] == ["host-cell1", "host-cell2"]
    assert cloud.client("2.1").get("/v2.1/os-hypervisors/zzz/search").status_code == 404
    assert cloud.client("2.53").get("/v2.1/os-hypervisors/host/search").status_code == 404


def test_show_and_uptime(cloud: ComputeServer) -> None:
    old = _hypervisors(cloud, "2.1")["hypervisors"][0]
    shown = cloud.client("2.1").get(f"/v2.1/os-hypervisors/{old['id']}").json()["hypervisor"]
    assert set(shown) == DETAIL and shown["hypervisor_hostname"] == "host-cell1"
    assert cloud.client("2.1").get("/v2.1/os-hypervisors/abc").json() == {
        "itemNotFound": {"code": 404, "message": "Hypervisor with ID 'abc' could not be found."}}
    new = _hypervisors(cloud, "2.53")["hypervisors"][1]
    shown = cloud.client("2.53").get(f"/v2.1/os-hypervisors/{new['id']}?with_servers=1").json()["hypervisor"]
    assert shown["hypervisor_hostname"] == "host-cell2" and "servers" not in shown
    assert cloud.client("2.53").get("/v2.1/os-hypervisors/abc").json() == {
        "badRequest": {"code": 400, "message": "Invalid uuid abc"}}
    missing = "3f0c7b0e-0000-4000-8000-000000000000"
    assert cloud.client("2.53").get(f"/v2.1/os-hypervisors/{missing}").json() == {
        "itemNotFound": {"code": 404, "message": f"Hypervisor with ID '{missing}' could not be found."}}
    uptime = cloud.client("2.53").get(f"/v2.1/os-hypervisors/{new['id']}/uptime")
    assert uptime.status_code == 501
    assert uptime.json() == {"notImplemented": {"code": 501, "message":
                                                "The requested functionality is not supported."}}
    admin = cloud.client("2.53")
    service = next(s for s in admin.get("/v2.1/os-services").json()["services"] if s["host"] == "host-cell2")
    assert admin.put(f"/v2.1/os-services/{service['id']}", json={"forced_down": True}).status_code == 200
    down = admin.get(f"/v2.1/os-hypervisors/{new['id']}/uptime")
    assert down.json() == {"badRequest": {"code": 400, "message":
                                          "Compute service of host-cell2 is unavailable at this time."}}
    assert _by_name(_hypervisors(cloud, "2.53"))["host-cell2"]["state"] == "down"


def test_nodes_without_a_service_or_cell_are_left_out(cloud: ComputeServer) -> None:
    admin = cloud.client("2.53")
    service = next(s for s in admin.get("/v2.1/os-services").json()["services"] if s["host"] == "host-cell1")
    assert admin.delete(f"/v2.1/os-services/{service['id']}").status_code == 204
    assert list(_by_name(_hypervisors(cloud, "2.53"))) == ["host-cell2"]
    cloud.state.api_db.write(lambda conn: q.update_cell_mapping(
        conn, cloud.cells["cell2"].uuid, database_connection=UNREACHABLE))
    cloud.state.cells.refresh()
    assert _hypervisors(cloud, "2.53") == {"hypervisors": []}
    assert _hypervisors(cloud, "2.1", "/v2.1/os-hypervisors/statistics")["hypervisor_statistics"]["count"] == 0
