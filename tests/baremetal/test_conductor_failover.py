"""Calls for a killed conductor's nodes succeed at once, long before its heartbeat goes stale.

Two ``corral serve --role conductor`` processes at default heartbeat
settings share one database with an API served in this process.  After
one is killed (SIGKILL) it still counts as alive for a minute; every call
for its nodes, and every allocation, must nevertheless succeed right
away: a conductor that refuses the connection never saw the call, so the
API sends it to the conductor next in the hash ring.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from corral.baremetal.db import nodes as node_db
from tests.baremetal.cluster_support import ConductorCluster
from tests.baremetal.support import wait_for, wait_for_state
from tests.support.databases import DatabaseFactory

HOSTS = ("cond-left", "cond-right")


def _sections(url: str, host: str) -> dict[str, dict[str, Any]]:
    # Heartbeat settings are left at their defaults on purpose.
    return {
        "DEFAULT": {"host": host},
        "baremetal_database": {"connection": url},
        "corral_database": {"max_pool_size": 3, "max_overflow": 4},
        "api": {"auth_strategy": "noauth2"},
        "json_rpc": {"host_ip": "127.0.0.1", "port": 0},
        "conductor": {"automated_clean": False},
    }


class Pair(ConductorCluster):
    def __init__(self, url: str, tmp: Path) -> None:
        super().__init__(url, tmp, HOSTS, lambda host: _sections(url, host))

    def add_available_nodes(self, count: int) -> None:
        def insert(conn: Any) -> None:
            for index in range(count):
                node_db.insert(conn, {
                    "uuid": str(uuid.uuid4()), "name": f"free-{index}", "driver": "fake-hardware",
                    "provision_state": "available", "power_state": "power off", "resource_class": "rc",
                    "maintenance": False, "console_enabled": False, "protected": False,
                })

        self.state.db.write(insert)

    def kill(self, host: str) -> None:
        process = self.processes[host]
        process.kill()
        assert process.process is not None
        process.process.wait(timeout=30)


@pytest.fixture
def pair(backend: str, database_factory: DatabaseFactory, tmp_path: Path) -> Iterator[Pair]:
    running = Pair(database_factory.new_url("bmfail"), tmp_path)
    try:
        yield running
    finally:
        running.stop()


def test_calls_for_a_killed_conductors_nodes_go_to_the_survivor(pair: Pair) -> None:
    client = pair.client
    for index in range(10):
        assert client.post("/v1/nodes", json={"driver": "fake-hardware", "name": f"n{index}"}).status_code == 201
    pair.add_available_nodes(8)
    owners = {node["name"]: node["conductor"]
              for node in client.get("/v1/nodes?fields=name,conductor&limit=100").json()["nodes"]}
    orphans = [name for name, host in owners.items() if host == "cond-right" and name.startswith("n")]
    assert orphans and set(owners.values()) == set(HOSTS)

    pair.kill("cond-right")
    # Its heartbeat is still fresh: without rerouting, these calls would answer 503.
    assert pair.alive() == set(HOSTS)

    for name in orphans:
        patched = client.patch(f"/v1/nodes/{name}", json=[{"op": "add", "path": "/extra/moved", "value": True}])
        assert patched.status_code == 200, patched.text
        assert patched.json()["conductor"] == "cond-left"
        response = client.put(f"/v1/nodes/{name}/states/provision", json={"target": "manage"})
        assert response.status_code == 202, response.text
    for name in orphans:
        assert wait_for_state(client, name, "manageable", timeout=30)["extra"] == {"moved": True}

    created = [client.post("/v1/allocations", json={"resource_class": "rc", "name": f"alloc-{index}"})
               for index in range(8)]
    assert [response.status_code for response in created] == [201] * 8, [r.text for r in created]

    def settled() -> list[dict[str, Any]] | None:
        found = client.get("/v1/allocations").json()["allocations"]
        return found if all(item["state"] != "allocating" for item in found) else None

    allocations = wait_for(settled, timeout=30)
    assert {item["state"] for item in allocations} == {"active"}
    assert len({item["node_uuid"] for item in allocations}) == 8
