"""A conductor presumed dead that comes back writes nothing on the nodes it lost.

Conductor A takes a node's lock and starts work on it; it is cut off, the
others presume it dead, and conductor B takes the node over (the work fails
into its failure state, recorded in the node's history).  Then A comes back
and carries on where it was: every write it attempts (node row, BIOS
settings, firmware, inventory, history, allocation, traits) and every power
action is refused, and the tables are exactly as B left them.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa

from corral.baremetal.conductor import allocations as allocation_work
from corral.baremetal.conductor import cleaning, locks, power
from corral.baremetal.conductor.manager import Conductor
from corral.baremetal.conductor.task import Task
from corral.baremetal.db import allocations as allocation_db
from corral.baremetal.db import history
from corral.baremetal.db import nodes as node_db
from corral.baremetal.db.tables import (
    allocations,
    bios_settings,
    firmware_components,
    node_history,
    node_inventory,
    node_traits,
    nodes,
)
from corral.baremetal.domain import states
from corral.baremetal.drivers.fake import FakeBios
from tests.baremetal.conftest import BaremetalServer, make_test_conf

GROUP = "fenced"
SIDE_TABLES = (bios_settings, firmware_components, node_inventory, node_history, node_traits, allocations)


@pytest.fixture
def pair(baremetal: BaremetalServer, tmp_path: Any) -> Iterator[tuple[Conductor, Conductor]]:
    """Conductors A and B on the test server's database (not started: driven by hand).

    They serve a conductor group of their own, so that the test server's
    running conductor, whose periodic tasks would pick up a node resting in
    ``clean wait``, never owns the nodes these tests make.
    """
    made = []
    for host in ("cond-a", "cond-b"):
        conf = make_test_conf(str(tmp_path), baremetal.url_db, DEFAULT={"host": host},
                              conductor={"conductor_group": GROUP})
        conductor = Conductor(conf, db=baremetal.state.db)
        conductor.register()
        made.append(conductor)
    yield made[0], made[1]
    for conductor in made:
        conductor.pool.stop(wait=True)


def _node(baremetal: BaremetalServer, state: str, name: str = "fenced") -> int:
    return baremetal.state.db.write(lambda conn: node_db.insert(conn, {
        "uuid": str(uuid.uuid4()), "name": name, "driver": "fake-hardware", "provision_state": state,
        "target_provision_state": states.ACTIVE if state == states.DEPLOYING else states.AVAILABLE,
        "power_state": states.POWER_OFF, "resource_class": "rc", "maintenance": False, "console_enabled": False,
        "protected": False, "conductor_group": GROUP,
    }))


def _snapshot(baremetal: BaremetalServer, node_id: int) -> dict[str, Any]:
    """The node's row and every row of the side tables that refer to it."""
    with baremetal.state.db.read() as conn:
        node = conn.execute(sa.select(nodes).where(nodes.c.id == node_id)).one()
        found: dict[str, Any] = {"node": dict(node._mapping)}
        for table in SIDE_TABLES:
            rows = conn.execute(sa.select(table).where(table.c.node_id == node_id)).all()
            found[table.name] = sorted((dict(row._mapping) for row in rows), key=repr)
    return found


def _history(baremetal: BaremetalServer, node_id: int) -> list[dict[str, Any]]:
    with baremetal.state.db.read() as conn:
        return history.history_of(conn, node_id)


def _attempts(task: Task, allocation_id: int, allocation_uuid: str) -> dict[str, Any]:
    """Every kind of write a conductor makes on a node, as A would go on making them."""
    return {
        "node": lambda: task.update(provision_state=states.DEPLOYWAIT, last_error=None),
        "event": lambda: task.process_event("done"),
        "bios": lambda: task.bios_settings({"ProcTurboMode": "Disabled"}),
        "firmware": lambda: task.firmware_flashed("bios", "2.0.0"),
        "inventory": lambda: task.store_inventory({"cpu": {"count": 4}}, {}),
        "history": lambda: history.record(task, "stale", "deploying"),
        "traits": lambda: task.write(node_db.add_trait, task.node_id, "CUSTOM_STALE"),
        "allocation delete": lambda: allocation_work.release_on_tear_down(task),
        "allocation reserve": lambda: task.conductor.db.write(lambda conn: allocation_db.reserve_node(
            conn, allocation_id, allocation_uuid, task.node_id, {}, host=task.conductor.host,
            affinity=task.conductor.conductor_id, generation=task.generation)),
        "power": lambda: task.driver.power.set_power_state(task, states.POWER_ON),
    }


def test_a_conductor_taken_over_writes_nothing_when_it_comes_back(baremetal: BaremetalServer,
                                                                   pair: tuple[Conductor, Conductor]) -> None:
    a, b = pair
    node_id = _node(baremetal, states.DEPLOYING)
    db = baremetal.state.db
    allocation_uuid = str(uuid.uuid4())
    allocation_id = db.write(lambda conn: allocation_db.insert(conn, {
        "uuid": allocation_uuid, "state": "allocating", "resource_class": "rc",
        "conductor_affinity": a.conductor_id}, []))
    stale = Task(a, node_id).acquire()
    stale.node["allocation_id"] = allocation_id  # so that A's tear-down path would delete it
    powered = []
    real = stale.driver.power._interface  # noqa: SLF001 - count what reaches the hardware
    real.set_power_state = lambda *args, **kwargs: powered.append(args)
    # A writes while it holds the lock: these go through.
    stale.bios_settings({"ProcTurboMode": "Enabled"})
    stale.update(driver_internal_info={"deploy_step_index": 0})

    # A is cut off; B finds its lock and takes the node over.
    assert b.recover_nodes_of(["cond-a"]) == 1
    after_takeover = _snapshot(baremetal, node_id)
    node = after_takeover["node"]
    assert node["provision_state"] == states.DEPLOYFAIL
    assert node["reservation"] is None
    assert node["lock_generation"] == stale.generation + 1
    assert "conductor cond-a stopped" in node["last_error"]
    (event,) = after_takeover["node_history"]
    assert event["conductor"] == "cond-b" and event["severity"] == "ERROR" and event["event_type"] == "deploying"
    assert "took over the node from conductor cond-a" in event["event"]
    assert "moved to deploy failed" in event["event"]

    # A comes back and, some time later, takes a new lock on the node itself
    # (the node is its own again by the hash ring): the old task still holds nothing.
    fresh = Task(a, node_id).acquire()
    assert fresh.generation == stale.generation + 2
    before = _snapshot(baremetal, node_id)
    for what, attempt in _attempts(stale, allocation_id, allocation_uuid).items():
        stale.lost = False  # let each write ask the database, as the first one after the cut does
        with pytest.raises((locks.LockLost, allocation_db.ReservationFailed)):
            attempt()
        assert _snapshot(baremetal, node_id) == before, what
    stale.release()
    assert powered == []
    now = _snapshot(baremetal, node_id)
    assert now == before
    assert now["node"]["reservation"] == "cond-a"  # the fresh lock, untouched by the stale release
    assert {key: value for key, value in now.items() if key != "node"} == {
        key: value for key, value in after_takeover.items() if key != "node"}
    with db.read() as conn:
        assert allocation_db.get(conn, allocation_id=allocation_id)["node_id"] is None

    # The fresh task holds the lock: its writes, power included, go through.
    fresh.bios_settings({"ProcTurboMode": "Disabled"})
    fresh.driver.power._interface.set_power_state = lambda *args, **kwargs: powered.append(args)  # noqa: SLF001
    fresh.driver.power.set_power_state(fresh, states.POWER_ON)
    assert len(powered) == 1
    fresh.release()
    with db.read() as conn:
        assert node_db.bios_of(conn, node_id)[0]["value"] == "Disabled"
        assert node_db.get(conn, node_id=node_id)["reservation"] is None


def test_background_work_that_lost_its_lock_stops_quietly(baremetal: BaremetalServer,
                                                          pair: tuple[Conductor, Conductor]) -> None:
    """A worker of A blocked during the cut resumes after B's takeover: no power action, nothing recorded."""
    a, b = pair
    node_id = _node(baremetal, states.DEPLOYING)
    task = Task(a, node_id).acquire()
    powered = []
    task.driver.power._interface.set_power_state = lambda *args, **kwargs: powered.append(args)  # noqa: SLF001
    resume, finished = threading.Event(), threading.Event()

    def work(task: Task) -> None:
        resume.wait(10)
        try:
            power.power_action(task, states.POWER_ON)
        finally:
            finished.set()

    a.spawn(task, work)
    assert b.recover_nodes_of(["cond-a"]) == 1
    before = _snapshot(baremetal, node_id)
    resume.set()
    assert finished.wait(10)
    a.pool.stop(wait=True)
    assert powered == []
    assert task.lost
    assert _snapshot(baremetal, node_id) == before
    assert [event["conductor"] for event in _history(baremetal, node_id)] == ["cond-b"]


def test_a_takeover_shows_in_the_node_history(baremetal: BaremetalServer, pair: tuple[Conductor, Conductor]) -> None:
    a, b = pair
    node_id = _node(baremetal, states.CLEANING, name="waiting")
    resting = _node(baremetal, states.CLEANWAIT, name="resting")
    Task(a, node_id).acquire()  # and A is never heard of again
    Task(a, resting).acquire()
    assert b.recover_nodes_of(["cond-a"]) == 2
    (calm,) = baremetal.client().get("/v1/nodes/resting/history").json()["history"]
    assert calm["severity"] == "INFO" and "the node stays in clean wait" in calm["event"]
    client = baremetal.client()
    node = client.get("/v1/nodes/waiting").json()
    assert node["provision_state"] == states.CLEANFAIL
    answer = client.get("/v1/nodes/waiting/history")
    assert answer.status_code == 200
    (event,) = answer.json()["history"]
    assert event["severity"] == "ERROR"
    assert event["event"].startswith("Conductor cond-b took over the node from conductor cond-a")
    detail = client.get(f"/v1/nodes/waiting/history/{event['uuid']}").json()
    assert detail["conductor"] == "cond-b" and detail["event_type"] == "cleaning"
    assert detail["state"] == states.CLEANFAIL


def test_a_takeover_and_a_fresh_lock_each_move_the_generation(baremetal: BaremetalServer) -> None:
    db = baremetal.state.db
    node_id = _node(baremetal, states.AVAILABLE)
    first = locks.reserve(db, node_id, "n", "cond-a", attempts=0)
    assert locks.take_over(db, node_id, "cond-x", "cond-b") is None  # not the holder: nothing moves
    taken = locks.take_over(db, node_id, "cond-a", "cond-b")
    assert taken == first + 1
    assert not locks.release(db, node_id, "cond-a", first)
    assert not locks.still_held(db, node_id, "cond-b", first)
    assert locks.still_held(db, node_id, "cond-b", taken)
    assert locks.release(db, node_id, "cond-b", taken)
    again = locks.reserve(db, node_id, "n", "cond-a", attempts=0)
    assert again == taken + 1
    assert not db.write(lambda conn: locks.check(conn, node_id, "cond-a", first))
    assert db.write(lambda conn: locks.check(conn, node_id, "cond-a", again))
    assert locks.clear_reservations(db, ["cond-a"]) == 1
    assert not locks.still_held(db, node_id, "cond-a", again)


def test_a_clean_step_that_ends_after_the_takeover_writes_no_bios_settings(
        baremetal: BaremetalServer, pair: tuple[Conductor, Conductor], monkeypatch: pytest.MonkeyPatch) -> None:
    """As in the field: A runs a BIOS step, is cut off, B fails the node; A's step then ends."""
    a, b = pair
    node_id = _node(baremetal, states.MANAGEABLE, name="bios")
    in_step, resume = threading.Event(), threading.Event()

    def slow_step(self: Any) -> None:
        in_step.set()
        resume.wait(10)

    monkeypatch.setattr(FakeBios, "_delay", slow_step)
    torn_down = []
    monkeypatch.setattr(cleaning, "_tear_down_ramdisk", lambda task: torn_down.append(task))
    step = {"interface": "bios", "step": "apply_configuration",
            "args": {"settings": [{"name": "ProcTurboMode", "value": "Disabled"}]}}
    a.do_provisioning_action(node_id, "clean", clean_steps=[step])
    assert in_step.wait(10)
    assert b.recover_nodes_of(["cond-a"]) == 1
    before = _snapshot(baremetal, node_id)
    assert before["node"]["provision_state"] == states.CLEANFAIL
    resume.set()
    a.pool.stop(wait=True)
    assert _snapshot(baremetal, node_id) == before
    assert before["bios_settings"] == []
    assert torn_down == []
