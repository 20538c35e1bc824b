"""A conductor the database sees but this API host cannot reach costs one connect timeout in all.

The conductor keeps heartbeating (a partial partition), so it stays among
the live conductors; the first call to it waits for the connect timeout,
after which calls pass it over (to the next conductor of the hash ring, or
a 503 when none is left) until a probe in the background reaches it again.
"""

from __future__ import annotations

import socket
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from corral.baremetal.conductor import jsonrpc
from corral.baremetal.conductor.breaker import CircuitBreaker, tcp_probe
from corral.baremetal.conductor.jsonrpc import ConductorUnreachable
from corral.baremetal.conductor.manager import owner_of
from corral.baremetal.db import conductors as conductor_db
from corral.baremetal.db import nodes as node_db
from corral.baremetal.db.tables import conductors
from tests.baremetal.conftest import BaremetalServer
from tests.baremetal.support import faultstring

# ---------------------------------------------------------------- breaker


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _breaker(probe: Callable[[str], bool], clock: Clock, probes: list[Callable[[], None]]) -> CircuitBreaker:
    return CircuitBreaker(probe, clock=clock, start=probes.append, retry_after=10, retry_after_max=40)


def test_an_open_breaker_is_probed_in_the_background_with_backoff() -> None:
    clock, started = Clock(), []
    reachable = {"now": False}
    probed: list[str] = []

    def probe(address: str) -> bool:
        probed.append(address)
        return reachable["now"]

    breaker = _breaker(probe, clock, started)
    far = "http://198.18.0.9:8089"
    assert breaker.usable(far)
    breaker.failed(far)
    breaker.failed(far)  # a second failing call changes nothing
    assert breaker.unreachable() == [far]
    for elapsed in (0, 5, 9.9):
        clock.now = 1000 + elapsed
        assert not breaker.usable(far)
    assert started == []  # no probe before the interval is over
    clock.now = 1010
    assert not breaker.usable(far)  # the probe starts; the call still goes elsewhere
    assert not breaker.usable(far)  # and only one probe at a time
    assert len(started) == 1
    started.pop()()
    assert probed == [far]
    # Failed: the next probe comes twice as late, then four times, never more than the maximum.
    for wait in (20, 40, 40):
        clock.now += wait - 0.1
        assert not breaker.usable(far) and started == []
        clock.now += 0.1
        assert not breaker.usable(far)
        started.pop()()
    assert len(probed) == 4
    reachable["now"] = True
    clock.now += 40
    assert not breaker.usable(far)
    started.pop()()
    assert breaker.usable(far)
    assert breaker.unreachable() == []


def test_the_tcp_probe_tells_a_listening_port_from_a_closed_one() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)
        port = listener.getsockname()[1]
        assert tcp_probe(f"http://127.0.0.1:{port}", 1.0)
    assert not tcp_probe(f"http://127.0.0.1:{port}", 1.0)


# ----------------------------------------------------- routing, counted


class CountingClient:
    """Stands in for the JSON-RPC client: a far conductor never connects, every attempt counted."""

    def __init__(self, far: str, real: jsonrpc.Client) -> None:
        self.far = far
        self.real = real
        self.attempts: dict[str, int] = {}

    def call(self, address: str, method: str, **params: Any) -> Any:
        self.attempts[address] = self.attempts.get(address, 0) + 1
        if address == self.far:
            raise ConductorUnreachable(f"The conductor at {address} could not be reached: timed out")
        return self.real.call(address, method, **params)

    def close(self) -> None:
        self.real.close()


def _far_conductor(baremetal: BaremetalServer, host: str, address: str, group: str = "") -> None:
    baremetal.state.db.write(lambda conn: conductor_db.register(
        conn, host, drivers=["fake-hardware"], group=group, rpc_address=address, interfaces=[]))


def _heartbeat(baremetal: BaremetalServer, host: str) -> None:
    baremetal.state.db.write(lambda conn: conductor_db.heartbeat(conn, host))


def _nodes_of(baremetal: BaremetalServer, host: str, count: int, group: str = "") -> list[dict[str, Any]]:
    """Nodes that the hash ring gives to ``host``."""
    db = baremetal.state.db
    with db.read() as conn:
        live = conductor_db.alive(conn, baremetal.conf.conductor.heartbeat_timeout)
    found: list[dict[str, Any]] = []
    while len(found) < count:
        node = {"uuid": str(uuid.uuid4()), "driver": "fake-hardware", "conductor_group": group}
        if owner_of(node, live) == host:
            db.write(lambda conn, node=node: node_db.insert(conn, {
                **node, "name": f"far-{len(found)}", "provision_state": "manageable", "power_state": "power off",
                "maintenance": False, "console_enabled": False, "protected": False}))
            found.append(node)
    return found


@pytest.fixture
def counted(baremetal: BaremetalServer) -> Iterator[CountingClient]:
    rpc = baremetal.state.rpc
    real_client, real_breaker = rpc.client, rpc.breaker
    fake = CountingClient("http://198.18.0.9:8089", real_client)
    rpc.client = fake
    rpc.breaker = CircuitBreaker(lambda address: False, start=lambda work: None)
    yield fake
    rpc.client, rpc.breaker = real_client, real_breaker


def test_a_partitioned_conductor_is_tried_once_however_often_it_heartbeats(
        baremetal: BaremetalServer, counted: CountingClient) -> None:
    _far_conductor(baremetal, "cond-far", counted.far)
    far_nodes = _nodes_of(baremetal, "cond-far", 3)
    client = baremetal.client()
    for round_number in range(4):
        _heartbeat(baremetal, "cond-far")  # the database still sees it, each heartbeat
        for node in far_nodes:
            answer = client.patch(f"/v1/nodes/{node['uuid']}",
                                  json=[{"op": "add", "path": "/extra/round", "value": round_number}])
            assert answer.status_code == 200, answer.text
            assert answer.json()["extra"] == {"round": round_number}
    assert counted.attempts.get(counted.far) == 1


def test_a_group_whose_only_conductor_is_unreachable_answers_503_at_once(
        baremetal: BaremetalServer, counted: CountingClient) -> None:
    _far_conductor(baremetal, "cond-far", counted.far, group="far")
    (node,) = _nodes_of(baremetal, "cond-far", 1, group="far")
    client = baremetal.client()
    for _ in range(3):
        _heartbeat(baremetal, "cond-far")
        answer = client.put(f"/v1/nodes/{node['uuid']}/states/power", json={"target": "power on"})
        assert answer.status_code == 503
        message = faultstring(answer)
        assert "cond-far" in message and "cannot be reached" in message
    created = client.post("/v1/nodes", json={"driver": "fake-hardware", "conductor_group": "far"})
    assert created.status_code == 503
    assert "cond-far supporting driver fake-hardware cannot be reached" in faultstring(created)
    assert counted.attempts == {counted.far: 1}


# ----------------------------------------------------- over the network


@pytest.fixture
def blackhole() -> Iterator[str]:
    """A loopback address whose connections are never accepted: its listen queue is kept full."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    address = listener.getsockname()
    fillers = []
    for _ in range(3):
        filler = socket.socket()
        filler.setblocking(False)
        filler.connect_ex(address)
        fillers.append(filler)
    time.sleep(0.1)
    with pytest.raises(TimeoutError):
        socket.create_connection(address, timeout=0.2).close()
    yield f"http://{address[0]}:{address[1]}/"
    for filler in fillers:
        filler.close()
    listener.close()


def test_a_blackholed_conductor_costs_one_connect_timeout_in_all(
        baremetal: BaremetalServer, blackhole: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jsonrpc, "CONNECT_TIMEOUT", 1.0)
    rpc_client = baremetal.state.rpc.client
    real_call, tried = rpc_client.call, []

    def call(address: str, method: str, **params: Any) -> Any:
        tried.append(address)
        return real_call(address, method, **params)

    monkeypatch.setattr(rpc_client, "call", call)
    _far_conductor(baremetal, "cond-dark", blackhole)
    dark_nodes = _nodes_of(baremetal, "cond-dark", 3)
    client = baremetal.client()
    took = []
    for round_number in range(3):
        _heartbeat(baremetal, "cond-dark")
        for node in dark_nodes:
            started = time.monotonic()
            answer = client.patch(f"/v1/nodes/{node['uuid']}",
                                  json=[{"op": "add", "path": "/extra/round", "value": round_number}])
            took.append(time.monotonic() - started)
            assert answer.status_code == 200, answer.text
    assert took[0] >= 1.0  # the one call that met the timeout
    assert tried.count(blackhole) == 1, took  # none of the others tried it
    assert blackhole in baremetal.state.rpc.breaker.unreachable()
    baremetal.state.db.write(lambda conn: conn.execute(conductors.delete().where(conductors.c.hostname == "cond-dark")))
