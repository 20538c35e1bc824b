"""The node lock: exactly one of many concurrent takers wins."""

from __future__ import annotations

import threading

import pytest

from corral.baremetal.conductor import locks
from corral.baremetal.db import nodes as node_db
from corral.baremetal.domain import states


def _node(baremetal) -> int:
    return baremetal.state.db.write(
        lambda conn: node_db.insert(conn, {"uuid": "6d0e1a2b-0000-4000-8000-000000000001", "driver": "fake-hardware",
                                           "provision_state": states.ENROLL, "maintenance": False,
                                           "console_enabled": False, "protected": False})
    )


def test_one_of_many_concurrent_takers_wins(baremetal) -> None:
    node_id = _node(baremetal)
    db = baremetal.state.db
    winners, losers = [], []
    barrier = threading.Barrier(8)

    def take(host: str) -> None:
        barrier.wait()
        try:
            locks.reserve(db, node_id, "n", host, attempts=0)
            winners.append(host)
        except locks.NodeLocked as error:
            losers.append(str(error))

    threads = [threading.Thread(target=take, args=(f"host-{i}",)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(winners) == 1
    assert len(losers) == 7
    assert all(f"locked by host {winners[0]}" in message for message in losers)
    assert not locks.release(db, node_id, "someone-else")
    assert locks.release(db, node_id, winners[0])
    with locks.node_lock(db, node_id, "n", "again"):
        with pytest.raises(locks.NodeLocked):
            locks.reserve(db, node_id, "n", "other", attempts=1, interval=0.01)
    with db.read() as conn:
        assert node_db.get(conn, node_id=node_id)["reservation"] is None
