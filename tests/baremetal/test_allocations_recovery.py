"""A conductor resumes its own unfinished allocations and takes over those of dead conductors."""

from __future__ import annotations

import datetime
import uuid

from corral.baremetal.db import allocations as allocation_db
from corral.baremetal.db import conductors as conductor_db
from corral.baremetal.db.tables import conductors
from corral.core.workers import PoolFull
from tests.baremetal.support import faultstring, wait_for
from tests.baremetal.test_allocations_api import available_node


def _pending(baremetal, affinity: int, name: str) -> int:
    values = {"uuid": str(uuid.uuid4()), "name": name, "state": "allocating", "resource_class": "rc",
              "candidate_nodes": [], "extra": {}, "conductor_affinity": affinity}
    return baremetal.state.db.write(lambda conn: allocation_db.insert(conn, values, []))


def _get(baremetal, allocation_id: int) -> dict:
    with baremetal.state.db.read() as conn:
        found = allocation_db.get(conn, allocation_id=allocation_id)
    assert found is not None
    return found


def _dead_conductor(baremetal, host: str) -> int:
    def register(conn) -> int:
        conductor_id = conductor_db.register(conn, host, drivers=["fake-hardware"], group="", rpc_address=None,
                                             interfaces=[])
        stale = conductor_db.utcnow() - datetime.timedelta(hours=1)
        conn.execute(conductors.update().where(conductors.c.id == conductor_id).values(updated_at=stale))
        return conductor_id

    return baremetal.state.db.write(register)


def test_a_starting_conductor_resumes_its_own_allocations(baremetal) -> None:
    client = baremetal.client()
    node = available_node(baremetal, client, "n1")
    mine = _pending(baremetal, baremetal.conductor.conductor_id, "mine")
    dead = _dead_conductor(baremetal, "gone")
    theirs = _pending(baremetal, dead, "theirs")
    assert baremetal.conductor.resume_allocations() == 1
    done = wait_for(lambda: (found := _get(baremetal, mine))["state"] != "allocating" and found)
    assert done["state"] == "active"
    assert done["node_uuid"] == node["uuid"]
    # Another conductor's allocation is left alone by the resume.
    assert _get(baremetal, theirs)["state"] == "allocating"


def test_allocations_of_dead_conductors_are_taken_over_once(baremetal) -> None:
    client = baremetal.client()
    available_node(baremetal, client, "n1")
    dead = _dead_conductor(baremetal, "gone")
    orphans = [_pending(baremetal, dead, f"o{index}") for index in range(3)]
    assert baremetal.conductor.check_orphan_allocations() == 3
    assert baremetal.conductor.check_orphan_allocations() == 0  # already ours
    done = [wait_for(lambda a=a: (found := _get(baremetal, a))["state"] != "allocating" and found)
            for a in orphans]
    assert {item["conductor_affinity"] for item in done} == {baremetal.conductor.conductor_id}
    assert sorted(item["state"] for item in done) == ["active", "error", "error"]
    # An allocation of a live conductor is not touched.
    live_other = baremetal.state.db.write(lambda conn: conductor_db.register(
        conn, "alive", drivers=["fake-hardware"], group="", rpc_address=None, interfaces=[]))
    kept = _pending(baremetal, live_other, "kept")
    assert baremetal.conductor.check_orphan_allocations() == 0
    assert _get(baremetal, kept)["conductor_affinity"] == live_other


def test_a_conductor_that_lost_the_allocation_writes_nothing(baremetal) -> None:
    client = baremetal.client()
    available_node(baremetal, client, "n1")
    other = _dead_conductor(baremetal, "other")
    allocation_id = _pending(baremetal, other, "a1")
    # Processing by a conductor without the affinity changes nothing.
    from corral.baremetal.conductor.allocations import process_allocation

    process_allocation(baremetal.conductor, allocation_id)
    allocation = _get(baremetal, allocation_id)
    assert allocation["state"] == "allocating" and allocation["node_id"] is None
    assert client.get("/v1/nodes/n1").json()["instance_uuid"] is None


def test_no_free_worker_is_503_and_stores_nothing(baremetal, monkeypatch) -> None:
    client = baremetal.client()

    def full(*_args, **_kwargs):
        raise PoolFull("busy")

    monkeypatch.setattr(baremetal.conductor.pool, "submit", full)
    response = client.post("/v1/allocations", json={"resource_class": "rc", "name": "a1"})
    assert response.status_code == 503
    assert faultstring(response) == "Requested action cannot be performed due to lack of free conductor workers."
    monkeypatch.undo()
    assert client.get("/v1/allocations").json()["allocations"] == []
    assert client.post("/v1/allocations", json={"resource_class": "rc", "name": "a1"}).status_code == 201
