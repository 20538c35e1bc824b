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
