"""Allocations with several conductor processes on PostgreSQL and MariaDB.

Three ``corral serve --role conductor`` processes share one database; an
API served in the test process reaches them over JSON-RPC, choosing one at
random per allocation.  Checked: many concurrent allocations against fewer
nodes never reserve a node twice, and allocations left in progress by a
killed conductor are taken over and finished by the others.
"""

from __future__ import annotations

import concurrent.futures
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from corral.baremetal.conductor.jsonrpc import Client
from corral.baremetal.db import allocations as allocation_db
from corral.baremetal.db import conductors as conductor_db
from corral.baremetal.db import nodes as node_db
from corral.baremetal.db.tables import allocations, nodes
from corral.core.db import Database
from tests.baremetal.cluster_support import ConductorCluster
from tests.baremetal.support import wait_for

HEARTBEAT_TIMEOUT = 3


def _sections(url: str, host: str) -> dict[str, dict[str, Any]]:
    return {
        "DEFAULT": {"host": host},
        "baremetal_database": {"connection": url},
        # Small pools: three processes plus the test share the server's connections.
        "corral_database": {"max_pool_size": 3, "max_overflow": 4},
        "api": {"auth_strategy": "noauth2"},
        "json_rpc": {"host_ip": "127.0.0.1", "port": 0},
        "conductor": {
            "heartbeat_interval": 0.5,
            "heartbeat_timeout": HEARTBEAT_TIMEOUT,
            "check_allocations_interval": 0.5,
            "check_provision_state_interval": 1,
            "sync_power_state_interval": 0,
            "clean_step_poll_interval": 0,
            "workers_pool_size": 8,
            "workers_backlog": 1000,
        },
    }


class Cluster(ConductorCluster):
    """Three conductor processes, an API in this process, and direct access to the database."""

    def __init__(self, url: str, tmp: Path) -> None:
        api_sections = _sections(url, "api-host")
        api_sections["corral_database"] = {"max_pool_size": 4, "max_overflow": 4}
        super().__init__(url, tmp, [f"cond-{index}" for index in range(3)], lambda host: _sections(url, host),
                         api_sections=api_sections, api_version="1.52")
        self.db = Database.from_url(url, pool_size=2, max_overflow=2)

    def live(self) -> list[dict[str, Any]]:
        with self.db.read() as conn:
            return conductor_db.alive(conn, HEARTBEAT_TIMEOUT)

    def add_nodes(self, count: int, resource_class: str = "rc") -> list[int]:
        def insert(conn: Any) -> list[int]:
            return [
                node_db.insert(conn, {
                    "uuid": str(uuid.uuid4()), "name": f"{resource_class}-{index}", "driver": "fake-hardware",
                    "provision_state": "available", "power_state": "power off", "resource_class": resource_class,
                    "maintenance": False, "console_enabled": False, "protected": False,
                })
                for index in range(count)
            ]

        return self.db.write(insert)

    def allocations(self) -> list[dict[str, Any]]:
        with self.db.read() as conn:
            return allocation_db.list_allocations(conn, {})

    def wait_settled(self, timeout: float = 40) -> list[dict[str, Any]]:
        def check() -> list[dict[str, Any]] | None:
            found = self.allocations()
            return found if all(item["state"] != "allocating" for item in found) else None

        return wait_for(check, timeout=timeout, interval=0.2)

    def stop(self) -> None:
        super().stop()
        self.db.dispose()


@pytest.fixture
def cluster(backend: str, database_factory, tmp_path: Path) -> Iterator[Cluster]:
    running = Cluster(database_factory.new_url("bm-ha"), tmp_path)
    try:
        yield running
    finally:
        running.stop()


def _check_consistent(cluster: Cluster, found: list[dict[str, Any]], servable: int) -> None:
    """Every allocation ended; no node is held twice; as many active as nodes could serve."""
    assert {item["state"] for item in found} <= {"active", "error"}
    active = [item for item in found if item["state"] == "active"]
    assert len(active) == servable
    assert len({item["node_id"] for item in active}) == len(active)
    with cluster.db.read() as conn:
        rows = conn.execute(sa.select(nodes.c.id, nodes.c.instance_uuid, nodes.c.allocation_id,
                                      nodes.c.reservation)).all()
    held = {row.id: row for row in rows if row.allocation_id is not None}
    assert len(held) == servable
    for item in active:
        node = held[item["node_id"]]
        assert node.allocation_id == item["id"]
        assert node.instance_uuid == item["uuid"]
    assert all(row.reservation is None for row in rows)
    for item in found:
        if item["state"] == "error":
            assert item["node_id"] is None
            assert item["last_error"].startswith(f"Failed to process allocation {item['uuid']}: ")


@pytest.mark.backends("postgresql", "mysql")
def test_many_concurrent_allocations_never_share_a_node(cluster: Cluster) -> None:
    cluster.add_nodes(24)
    cluster.add_nodes(6, resource_class="small")
    requests_ = [{"resource_class": "rc"} for _ in range(200)] + [{"resource_class": "small"} for _ in range(40)]

    def create(body: dict[str, Any]) -> int:
        return cluster.client.post("/v1/allocations", json=body).status_code

    with concurrent.futures.ThreadPoolExecutor(max_workers=16) as pool:
        statuses = list(pool.map(create, requests_))
    assert statuses == [201] * len(requests_)
    found = cluster.wait_settled()
    assert len(found) == 240
    _check_consistent(cluster, found, servable=30)
    # Every conductor took part.
    assert len({item["conductor_affinity"] for item in found}) == 3
    by_class = {rc: sum(1 for item in found if item["state"] == "active" and item["resource_class"] == rc)
                for rc in ("rc", "small")}
    assert by_class == {"rc": 24, "small": 6}


@pytest.mark.backends("postgresql", "mysql")
def test_allocations_of_a_killed_conductor_are_taken_over(cluster: Cluster) -> None:
    cluster.add_nodes(3)
    live = {conductor["hostname"]: conductor for conductor in cluster.live()}
    victim = live["cond-0"]
    client = Client(10)
    blocker = cluster.db.engine.connect()
    transaction = blocker.begin()
    try:
        # Hold every node row: the victim's workers block on their first node lock
        # (each holding a database connection: fewer allocations than its pool has).
        blocker.execute(sa.select(nodes.c.id).with_for_update()).all()
        created = [
            client.call(victim["rpc_address"], "create_allocation",
                        values={"uuid": str(uuid.uuid4()), "name": f"a{index}", "resource_class": "rc",
                                "candidate_nodes": [], "extra": {}, "owner": None},
                        traits=[])["id"]
            for index in range(5)
        ]
        cluster.processes["cond-0"].kill()
        pending = cluster.allocations()
        assert [item["state"] for item in pending] == ["allocating"] * 5
        assert {item["conductor_affinity"] for item in pending} == {victim["id"]}
    finally:
        transaction.rollback()
        blocker.close()
        client.close()
    found = cluster.wait_settled(timeout=HEARTBEAT_TIMEOUT + 30)
    assert sorted(item["id"] for item in found) == sorted(created)
    survivors = {live["cond-1"]["id"], live["cond-2"]["id"]}
    assert {item["conductor_affinity"] for item in found} <= survivors
    _check_consistent(cluster, found, servable=3)
    with cluster.db.read() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(allocations)).scalar() == 5
