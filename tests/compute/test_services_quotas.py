"""/os-services, host status, /limits and /os-quota-sets over HTTP."""

from __future__ import annotations

import datetime

from corral.compute.db import cell_queries as cq
from corral.compute.domain.scheduling import COMPUTE_BINARY
from tests.compute.conftest import IMAGE, ComputeServer

USER_A = "user-a:project-a"


def test_services_list_versions(cloud: ComputeServer) -> None:
    old = cloud.client().get("/v2.1/os-services").json()["services"]
    assert [(s["host"], s["binary"]) for s in old] == [("host-cell1", "nova-compute"), ("host-cell2", "nova-compute")]
    assert isinstance(old[0]["id"], int) and "forced_down" not in old[0]
    assert old[0]["zone"] == "nova" and old[0]["state"] == "up" and old[0]["status"] == "enabled"
    new = cloud.client("2.69").get("/v2.1/os-services").json()["services"]
    assert len(new[0]["id"]) == 36 and new[0]["forced_down"] is False
    assert set(new[0]) == {"id", "binary", "host", "zone", "status", "state", "updated_at", "disabled_reason",
                           "forced_down"}
    only = cloud.client("2.69").get("/v2.1/os-services?host=host-cell2").json()["services"]
    assert [s["host"] for s in only] == ["host-cell2"]
    assert cloud.client("2.69").get("/v2.1/os-services?binary=nova-conductor").json()["services"] == []


def test_services_policy(cloud: ComputeServer) -> None:
    resp = cloud.client("2.69", token=USER_A).get("/v2.1/os-services")
    assert resp.status_code == 403
    assert resp.json() == {"forbidden": {"code": 403, "message":
                           "Policy doesn't allow os_compute_api:os-services:list to be performed."}}


def test_disable_service_keeps_servers_off_it(cloud: ComputeServer) -> None:
    admin = cloud.client("2.69")
    service = next(s for s in admin.get("/v2.1/os-services").json()["services"] if s["host"] == "host-cell1")
    resp = admin.put(f"/v2.1/os-services/{service['id']}", json={"status": "disabled", "disabled_reason": "maint"})
    assert resp.status_code == 200
    assert resp.json()["service"]["status"] == "disabled"
    assert resp.json()["service"]["disabled_reason"] == "maint"
    servers = [cloud.boot(name=f"s{i}") for i in range(3)]
    hosts = {admin.get(f"/v2.1/servers/{s}").json()["server"]["OS-EXT-SRV-ATTR:host"] for s in servers}
    assert hosts == {"host-cell2"}
    legacy = cloud.client("2.52").put("/v2.1/os-services/enable", json={"host": "host-cell1", "binary": "nova-compute"})
    assert legacy.json() == {"service": {"host": "host-cell1", "binary": "nova-compute", "status": "enabled"}}
    assert admin.put("/v2.1/os-services/00000000-0000-0000-0000-00000000000f",
                     json={"status": "enabled"}).status_code == 404


def test_forced_down_service_reports_down(cloud: ComputeServer) -> None:
    admin = cloud.client("2.69")
    service = next(s for s in admin.get("/v2.1/os-services").json()["services"] if s["host"] == "host-cell2")
    resp = admin.put(f"/v2.1/os-services/{service['id']}", json={"forced_down": True})
    assert resp.json()["service"]["state"] == "down"
    assert resp.json()["service"]["forced_down"] is True


def test_limits_count_usage_across_cells(cloud: ComputeServer) -> None:
    for index in range(3):
        cloud.boot(name=f"s{index}")
    absolute = cloud.client("2.69", token=USER_A).get("/v2.1/limits").json()["limits"]["absolute"]
    assert absolute["totalInstancesUsed"] == 3
    assert absolute["totalCoresUsed"] == 3
    assert absolute["totalRAMUsed"] == 1536
    assert absolute["maxTotalInstances"] == 10
    assert set(absolute) == {
        "maxServerGroupMembers", "maxServerGroups", "maxServerMeta", "maxTotalCores", "maxTotalInstances",
        "maxTotalKeypairs", "maxTotalRAMSize", "totalCoresUsed", "totalInstancesUsed", "totalRAMUsed",
        "totalServerGroupsUsed",
    }
    old = cloud.client("2.1", token=USER_A).get("/v2.1/limits").json()["limits"]["absolute"]
    assert "maxTotalFloatingIps" in old and "maxPersonality" in old


def test_quota_sets_show_detail_update(cloud: ComputeServer) -> None:
    user = cloud.client("2.69", token=USER_A)
    shown = user.get("/v2.1/os-quota-sets/project-a").json()["quota_set"]
    assert shown == {"id": "project-a", "instances": 10, "cores": 20, "ram": 51200, "metadata_items": 128,
                     "key_pairs": 100, "server_groups": 10, "server_group_members": 10}
    assert user.get("/v2.1/os-quota-sets/project-b").status_code == 403
    cloud.boot()
    detail = user.get("/v2.1/os-quota-sets/project-a/detail").json()["quota_set"]
    assert detail["instances"] == {"in_use": 1, "limit": 10, "reserved": 0}
    admin = cloud.client("2.69")
    assert admin.put("/v2.1/os-quota-sets/project-a", json={"quota_set": {"instances": 0}}).status_code == 400
    resp = admin.put("/v2.1/os-quota-sets/project-a", json={"quota_set": {"instances": 1}})
    assert resp.status_code == 200
    assert resp.json()["quota_set"]["instances"] == 1 and "id" not in resp.json()["quota_set"]
    refused = user.post("/v2.1/servers", json={"server": {
        "name": "x", "flavorRef": "1", "imageRef": IMAGE, "networks": "none"}})
    assert refused.status_code == 403
    assert refused.json()["forbidden"]["message"].startswith("Quota exceeded for instances")
    assert admin.delete("/v2.1/os-quota-sets/project-a").status_code == 202
    assert user.get("/v2.1/os-quota-sets/project-a").json()["quota_set"]["instances"] == 10
    defaults = user.get("/v2.1/os-quota-sets/project-a/defaults").json()["quota_set"]
    assert defaults["cores"] == 20


def test_multiple_create_stops_at_quota(cloud: ComputeServer) -> None:
    admin = cloud.client("2.69")
    admin.put("/v2.1/os-quota-sets/project-a", json={"quota_set": {"instances": 3}})
    resp = cloud.client("2.69", token=USER_A).post("/v2.1/servers", json={"server": {
        "name": "many", "flavorRef": "1", "imageRef": IMAGE, "networks": "none", "min_count": 1, "max_count": 5,
        "return_reservation_id": True}})
    assert resp.status_code == 202
    reservation = resp.json()["reservation_id"]
    listed = cloud.client("2.69", token=USER_A).get("/v2.1/servers").json()["servers"]
    assert sorted(s["name"] for s in listed) == ["many-1", "many-2", "many-3"]
    assert reservation.startswith("r-")


def test_host_status_follows_the_compute_service_as_upstream(cloud: ComputeServer) -> None:
    """UP; MAINTENANCE when disabled; UNKNOWN once its heartbeat is too old (the servers may well
    run: nobody knows); DOWN only when forced down; admins only, from 2.16."""
    server_id = cloud.boot()
    cloud.run_computes()
    admin = cloud.client("2.69")
    host = admin.get(f"/v2.1/servers/{server_id}").json()["server"]["OS-EXT-SRV-ATTR:host"]
    cell = cloud.cells["cell1" if host == "host-cell1" else "cell2"]
    database = cloud.state.cells.database(cell)
    with database.read() as conn:
        service = cq.get_service(conn, host=host, binary=COMPUTE_BINARY)
    assert service is not None

    def host_status() -> tuple[str, str]:
        shown = admin.get(f"/v2.1/servers/{server_id}").json()["server"]
        listed = next(s for s in admin.get("/v2.1/servers/detail?all_tenants=1").json()["servers"] if s["id"] == server_id)
        assert shown["status"] == listed["status"] == "ACTIVE"
        return shown["host_status"], listed["host_status"]

    assert host_status() == ("UP", "UP")
    database.write(cq.update_service, service["id"], disabled=True)
    assert host_status() == ("MAINTENANCE", "MAINTENANCE")
    database.write(cq.update_service, service["id"], disabled=False,
                   last_seen_up=cq.utcnow() - datetime.timedelta(seconds=cloud.conf.compute.service_down_time + 5))
    assert host_status() == ("UNKNOWN", "UNKNOWN")
    down = {s["host"]: s["state"] for s in admin.get("/v2.1/os-services").json()["services"]}
    assert down[host] == "down"
    database.write(cq.update_service, service["id"], forced_down=True)
    assert host_status() == ("DOWN", "DOWN")
    assert "host_status" not in cloud.client("2.15").get(f"/v2.1/servers/{server_id}").json()["server"]
    assert "host_status" not in cloud.client("2.69", token=USER_A).get(f"/v2.1/servers/{server_id}").json()["server"]
