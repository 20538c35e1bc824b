"""Two conductor processes deploy with the real agent: four nodes at once, and a takeover.

Four nodes spread over two ``corral serve --role conductor`` processes
are deployed at the same time by four agent processes.  Then a conductor
is killed (SIGKILL) while its node waits for the agent: the hash ring
gives the node to the survivor, which answers the agent's lookup and
heartbeats and finishes the deployment.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.baremetal.agent_support import ImageServer, TestMachine, raw_image
from tests.baremetal.cluster_support import ConductorCluster
from tests.baremetal.support import split_uuids, wait_for, wait_for_state
from tests.baremetal.test_agent import PAYLOAD, enroll, set_image
from tests.support.databases import DatabaseFactory

pytestmark = pytest.mark.slow

HEARTBEAT_TIMEOUT = 3
HOSTS = ("cond-a", "cond-b")

AGENT_TIMEOUT = 150


def _sections(url: str, host: str) -> dict[str, dict[str, Any]]:
    return {
        "DEFAULT": {"host": host},
        "baremetal_database": {"connection": url},
        "corral_database": {"max_pool_size": 4, "max_overflow": 4},
        "api": {"auth_strategy": "noauth2", "ramdisk_heartbeat_timeout": 5},
        "json_rpc": {"host_ip": "127.0.0.1", "port": 0, "timeout": 20},
        "conductor": {
            "heartbeat_interval": 0.5,
            "heartbeat_timeout": HEARTBEAT_TIMEOUT,
            "check_provision_state_interval": 0.5,
            "check_deploy_timeouts_interval": 1,
            "deploy_callback_timeout": 120,
            "sync_power_state_interval": 0,
            "clean_step_poll_interval": 0.5,
            "node_locked_retry_attempts": 3,
        },
    }


@pytest.fixture
def cluster(backend: str, database_factory: DatabaseFactory, tmp_path: Path) -> Iterator[ConductorCluster]:
    url = database_factory.new_url("bmagent")
    running = ConductorCluster(url, tmp_path, HOSTS, lambda host: _sections(url, host))
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def images(tmp_path: Path) -> Iterator[ImageServer]:
    directory = tmp_path / "images"
    directory.mkdir()
    server = ImageServer(directory)
    yield server
    server.stop()


@pytest.fixture
def machines() -> Iterator[list[TestMachine]]:
    made: list[TestMachine] = []
    yield made
    for machine in made:
        machine.dispose()


def _settled(cluster: ConductorCluster, name: str, state: str, machine: TestMachine) -> dict[str, Any]:
    try:
        return wait_for_state(cluster.client, name, state, timeout=AGENT_TIMEOUT)
    except AssertionError as error:
        logs = "\n".join(process.log()[-3000:] for process in cluster.processes.values())
        raise AssertionError(f"{error}\nagent log:\n{machine.log()[-4000:]}\nconductors:\n{logs}") from None


@pytest.mark.backends("postgresql", "mysql")
def test_two_conductors_deploy_four_nodes_and_take_over_a_waiting_one(
        cluster: ConductorCluster, images: ImageServer, tmp_path: Path, machines: list[TestMachine]) -> None:
    client = cluster.client
    image = raw_image(PAYLOAD)
    url, sha256 = images.publish("ha.img", image)
    names = [f"ha{index}" for index in range(5)]
    by_name = {}
    for index, (name, node_uuid) in enumerate(zip(names, split_uuids(HOSTS, len(names)))):
        machine = TestMachine(tmp_path / "machines", name, f"52:54:00:00:02:{index:02x}")
        machines.append(machine)
        by_name[name] = machine
        enroll(client, name, machine.mac, uuid=node_uuid, automated_clean=False)
        client.put(f"/v1/nodes/{name}/states/provision", json={"target": "provide"})
        wait_for_state(client, name, "available", timeout=60)
        set_image(client, name, url, sha256)

    # Four deployments at once, over both conductors.
    four = names[:4]
    for name in four:
        assert client.put(f"/v1/nodes/{name}/states/provision", json={"target": "active"}).status_code == 202
    for name in four:
        wait_for(lambda name=name: client.get(f"/v1/nodes/{name}").json()["provision_state"] == "wait call-back",
                 timeout=60)
        by_name[name].power_on(cluster.url)
    deployed = [_settled(cluster, name, "active", by_name[name]) for name in four]
    assert {node["conductor"] for node in deployed} == set(HOSTS)
    for name, node in zip(four, deployed):
        assert node["last_error"] is None and node["power_state"] == "power on"
        assert by_name[name].disk_bytes()[:len(image)] == image

    # The fifth node's conductor dies while the node waits for its agent.
    last = names[4]
    owner = client.get(f"/v1/nodes/{last}").json()["conductor"]
    survivor = next(host for host in HOSTS if host != owner)
    client.put(f"/v1/nodes/{last}/states/provision", json={"target": "active"})
    waiting = wait_for(lambda: (n := client.get(f"/v1/nodes/{last}").json())["provision_state"] == "wait call-back"
                       and n["reservation"] is None and n, timeout=60)
    assert waiting["conductor"] == owner
    cluster.processes[owner].kill()
    by_name[last].power_on(cluster.url)
    wait_for(lambda: cluster.alive() == {survivor}, timeout=HEARTBEAT_TIMEOUT * 10)
    finished = _settled(cluster, last, "active", by_name[last])
    assert finished["conductor"] == survivor
    assert finished["last_error"] is None
    assert by_name[last].disk_bytes()[:len(image)] == image
