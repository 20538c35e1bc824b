"""Two conductor processes on PostgreSQL: nodes spread by the hash ring, takeover after a crash.

Two ``corral serve --role conductor`` processes share one PostgreSQL
database; an API served in this process reaches them over JSON-RPC.
Killing one conductor (SIGKILL) moves its nodes to the other once its
heartbeat is stale, and a node it left in a transient state (cleaning,
lock held) is recovered: lock released, node in ``clean failed`` with a
clear ``last_error``, then manageable again through the survivor.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.baremetal.cluster_support import ConductorCluster
from tests.baremetal.support import split_uuids, wait_for, wait_for_state
from tests.support.databases import DatabaseFactory

HEARTBEAT_TIMEOUT = 3


def _sections(url: str, host: str, **fake: Any) -> dict[str, dict[str, Any]]:
    return {
        "DEFAULT": {"host": host},
        "baremetal_database": {"connection": url},
        "corral_database": {"max_pool_size": 3, "max_overflow": 4},
        "api": {"auth_strategy": "noauth2"},
        "json_rpc": {"host_ip": "127.0.0.1", "port": 0},
        "fake": fake,
        "conductor": {
            "heartbeat_interval": 0.5,
            "heartbeat_timeout": HEARTBEAT_TIMEOUT,
            "check_provision_state_interval": 0.5,
            "sync_power_state_interval": 0,
            "clean_step_poll_interval": 0.5,
        },
    }


def _cluster(url: str, tmp: Path) -> ConductorCluster:
    # cond-slow takes 60 s per BIOS step: its cleaning is still running when it is killed.
    fakes = {"cond-fast": {}, "cond-slow": {"bios_delay": 60}}
    return ConductorCluster(url, tmp, list(fakes), lambda host: _sections(url, host, **fakes.get(host, {})))


@pytest.fixture
def cluster(backend: str, database_factory: DatabaseFactory, tmp_path: Path) -> Iterator[ConductorCluster]:
    running = _cluster(database_factory.new_url("bmha"), tmp_path)
    try:
        yield running
    finally:
        running.stop()


@pytest.mark.backends("postgresql")
def test_nodes_spread_and_move_when_a_conductor_dies(cluster: ConductorCluster) -> None:
    client = cluster.client
    uuids = []
    for index, node_uuid in enumerate(split_uuids(("cond-fast", "cond-slow"), 12)):
        response = client.post("/v1/nodes", json={"driver": "fake-hardware", "name": f"n{index}", "uuid": node_uuid})
        assert response.status_code == 201, response.text
        uuids.append(response.json()["uuid"])
    owners = {node["name"]: node["conductor"] for node in client.get("/v1/nodes?fields=name,conductor").json()["nodes"]}
    assert set(owners.values()) == {"cond-fast", "cond-slow"}
    assert client.get("/v1/nodes?conductor=cond-slow&fields=name").json()["nodes"] == [
        {"name": name, "links": node_links}
        for name, node_links in (
            (item["name"], item["links"])
            for item in client.get("/v1/nodes?fields=name").json()["nodes"]
            if owners[item["name"]] == "cond-slow"
        )
    ]
    # Work on every node goes over JSON-RPC to its own conductor.
    for name in owners:
        assert client.put(f"/v1/nodes/{name}/states/provision", json={"target": "manage"}).status_code == 202
    for name in owners:
        wait_for_state(client, name, "manageable", timeout=60)

    slow_node = next(name for name, host in owners.items() if host == "cond-slow")
    response = client.put(f"/v1/nodes/{slow_node}/states/provision",
                          json={"target": "clean", "clean_steps": [{"interface": "bios", "step": "factory_reset"}]})
    assert response.status_code == 202
    busy = wait_for(lambda: (n := client.get(f"/v1/nodes/{slow_node}").json())["clean_step"] and n)
    assert (busy["provision_state"], busy["reservation"]) == ("cleaning", "cond-slow")

    cluster.processes["cond-slow"].kill()
    wait_for(lambda: cluster.alive() == {"cond-fast"}, timeout=HEARTBEAT_TIMEOUT * 10)
    moved = client.get("/v1/nodes?fields=name,conductor").json()["nodes"]
    assert {node["conductor"] for node in moved} == {"cond-fast"}

    recovered = wait_for_state(client, slow_node, "clean failed", timeout=30)
    assert recovered["reservation"] is None
    assert recovered["last_error"] == (
        f"The cleaning operation on node {busy['uuid']} was interrupted because conductor cond-slow stopped "
        "while working on it."
    )
    assert recovered["clean_step"] == {}
    assert client.put(f"/v1/nodes/{slow_node}/states/provision", json={"target": "manage"}).status_code == 202
    wait_for_state(client, slow_node, "manageable", timeout=30)
    # The survivor now does the work of the dead conductor's nodes.
    for name, host in owners.items():
        if host == "cond-slow" and name != slow_node:
            client.put(f"/v1/nodes/{name}/states/provision", json={"target": "provide"})
            assert wait_for_state(client, name, "available", timeout=30)["conductor"] == "cond-fast"
