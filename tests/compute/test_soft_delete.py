"""Soft delete, restore and force delete, and queued_for_delete on the mapping."""

from __future__ import annotations

import datetime
from collections.abc import Iterator

import pytest

from corral.compute.db import api_queries as q
from corral.compute.db import cell_tables
from tests.compute.conftest import ComputeServer

USER_A = "user-a:project-a"


def qfd(cloud: ComputeServer, server: str) -> bool | None:
    with cloud.state.api_db.read() as conn:
        return q.instance_mapping(conn, server).queued_for_delete


@pytest.fixture
def deferred(cloud: ComputeServer) -> Iterator[ComputeServer]:
    cloud.conf.set_override("reclaim_instance_interval", 3600, group="compute")
    yield cloud
    cloud.conf.clear_override("reclaim_instance_interval", group="compute")


def test_new_mapping_is_not_queued(cloud: ComputeServer) -> None:
    assert qfd(cloud, cloud.boot()) is False


def test_hard_delete_queues(cloud: ComputeServer) -> None:
    server = cloud.boot()
    cloud.run_computes()
    cloud.client("2.69", token=USER_A).delete(f"/v2.1/servers/{server}")
    assert qfd(cloud, server) is True


def test_soft_delete_restore_force_delete(deferred: ComputeServer) -> None:
    cloud = deferred
    server = cloud.boot()
    cloud.run_computes()
    client = cloud.client("2.69", token=USER_A)
    assert client.delete(f"/v2.1/servers/{server}").status_code == 204
    shown = client.get(f"/v2.1/servers/{server}").json()["server"]
    assert shown["status"] == "SOFT_DELETED"
    assert qfd(cloud, server) is True
    assert cloud.scheduler.allocations_of(server)  # still claimed while restorable
    assert client.post(f"/v2.1/servers/{server}/action", json={"restore": None}).status_code == 202
    assert client.get(f"/v2.1/servers/{server}").json()["server"]["status"] == "ACTIVE"
    assert qfd(cloud, server) is False
    assert client.delete(f"/v2.1/servers/{server}").status_code == 204
    assert client.post(f"/v2.1/servers/{server}/action", json={"forceDelete": None}).status_code == 202
    assert client.get(f"/v2.1/servers/{server}").status_code == 404
    assert qfd(cloud, server) is True
    assert cloud.scheduler.allocations_of(server) == {}


def test_reclaim_after_interval(deferred: ComputeServer) -> None:
    cloud = deferred
    server = cloud.boot()
    cloud.run_computes()
    client = cloud.client("2.69", token=USER_A)
    client.delete(f"/v2.1/servers/{server}")
    cloud.run_computes()
    assert client.get(f"/v2.1/servers/{server}").json()["server"]["status"] == "SOFT_DELETED"
    # Age the soft delete past the interval.
    for cell in ("cell1", "cell2"):
        database = cloud.state.cells.database(cloud.cells[cell])
        database.write(lambda conn: conn.execute(
            cell_tables.instances.update().where(cell_tables.instances.c.uuid == server)
            .values(updated_at=datetime.datetime(2000, 1, 1))
        ))
    cloud.run_computes()
    assert client.get(f"/v2.1/servers/{server}").status_code == 404
    assert cloud.scheduler.allocations_of(server) == {}


def _listed(client, path: str) -> list[str]:
    answer = client.get(path)
    assert answer.status_code == 200, answer.text
    return [server["id"] for server in answer.json()["servers"]]


def test_soft_deleted_servers_are_left_out_of_lists(deferred: ComputeServer) -> None:
    cloud = deferred
    kept = cloud.boot(name="kept-vm")
    gone = cloud.boot(name="gone-vm")
    cloud.run_computes()
    user = cloud.client("2.69", token=USER_A)
    assert user.delete(f"/v2.1/servers/{gone}").status_code == 204
    assert user.get(f"/v2.1/servers/{gone}").json()["server"]["status"] == "SOFT_DELETED"
    admin = cloud.client("2.69")
    for client, base in ((user, "/v2.1/servers"), (admin, "/v2.1/servers?all_tenants=1")):
        joiner = "&" if "?" in base else "?"
        for path in (base, base.replace("/servers", "/servers/detail")):
            for query in ("", "limit=1", "limit=5", "sort_key=display_name&sort_dir=asc", "name=vm",
                          "name=gone", "sort_key=created_at&limit=1&name=vm"):
                listed = _listed(client, f"{path}{joiner}{query}" if query else path)
                assert gone not in listed, (path, query)
                if "gone" not in query:
                    assert listed == [kept], (path, query)
    # Asking for deleted servers (admins only) shows it, as does asking for recent changes.
    assert gone in _listed(admin, "/v2.1/servers?all_tenants=1&deleted=true")
    assert kept not in _listed(admin, "/v2.1/servers?all_tenants=1&deleted=true")
    assert set(_listed(user, "/v2.1/servers?changes-since=2000-01-01T00:00:00Z")) == {kept, gone}
    # An unrecognised value of deleted means false, as upstream's bool_from_string.
    assert _listed(admin, "/v2.1/servers?all_tenants=1&deleted=maybe") == [kept]
    # Restored, it is listed again.
    assert user.post(f"/v2.1/servers/{gone}/action", json={"restore": None}).status_code == 202
    assert set(_listed(user, "/v2.1/servers")) == {kept, gone}


def test_soft_deleted_servers_use_no_quota(deferred: ComputeServer) -> None:
    cloud = deferred
    kept = cloud.boot(name="kept-vm")
    gone = cloud.boot(name="gone-vm")
    cloud.run_computes()
    user = cloud.client("2.69", token=USER_A)
    assert user.delete(f"/v2.1/servers/{gone}").status_code == 204
    absolute = user.get("/v2.1/limits").json()["limits"]["absolute"]
    assert (absolute["totalInstancesUsed"], absolute["totalCoresUsed"], absolute["totalRAMUsed"]) == (1, 1, 512)
    detail = user.get("/v2.1/os-quota-sets/project-a/detail").json()["quota_set"]
    assert (detail["instances"]["in_use"], detail["cores"]["in_use"], detail["ram"]["in_use"]) == (1, 1, 512)
    assert kept in _listed(user, "/v2.1/servers")


def test_listing_deleted_servers_by_status_is_for_admins(deferred: ComputeServer) -> None:
    cloud = deferred
    server = cloud.boot()
    cloud.run_computes()
    user = cloud.client("2.69", token=USER_A)
    assert user.delete(f"/v2.1/servers/{server}").status_code == 204
    assert user.post(f"/v2.1/servers/{server}/action", json={"forceDelete": None}).status_code == 202
    refused = user.get("/v2.1/servers?status=DELETED")
    assert refused.status_code == 403
    assert refused.json()["forbidden"]["message"] == "Only administrators may list deleted instances"
    assert _listed(cloud.client("2.69"), "/v2.1/servers?all_tenants=1&status=DELETED") == [server]
