"""Conductors starting at the same moment with one host name: one row, no error."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from corral.baremetal.db import conductors as conductor_db
from corral.baremetal.db.schema import TREE
from corral.core import migrations
from corral.core.db import Database, create_engine
from tests.support.databases import DatabaseFactory

THREADS = 6
ROUNDS = 15


@pytest.fixture
def db(backend: str, database_factory: DatabaseFactory) -> Iterator[Database]:
    engine = create_engine(database_factory.new_url("bmreg"))
    migrations.upgrade(engine, TREE)
    database = Database(engine)
    yield database
    engine.dispose()


def _register(db: Database, hostname: str, address: str) -> int:
    interfaces = [("fake-hardware", "power", "fake", True), ("fake-hardware", "boot", "fake", True)]
    return db.write(lambda conn: conductor_db.register(
        conn, hostname, drivers=["fake-hardware"], group="", rpc_address=address, interfaces=interfaces))


def test_simultaneous_registrations_of_one_host_name(db: Database) -> None:
    failures: list[BaseException] = []
    for round_ in range(ROUNDS):
        hostname = f"twin-{round_}"
        barrier = threading.Barrier(THREADS)
        ids: list[int] = []

        def start(index: int, hostname: str = hostname, barrier: threading.Barrier = barrier,
                  ids: list[int] = ids) -> None:
            barrier.wait()
            try:
                ids.append(_register(db, hostname, f"http://127.0.0.1:{9000 + index}"))
            except BaseException as error:  # noqa: BLE001 - collected and reported below
                failures.append(error)

        threads = [threading.Thread(target=start, args=(index,)) for index in range(THREADS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert not failures, failures[0]
        assert len(ids) == THREADS and len(set(ids)) == 1, ids
    with db.read() as conn:
        rows = conductor_db.all_conductors(conn)
        interfaces = conductor_db.interfaces_of(conn, [row["id"] for row in rows])
    assert sorted(row["hostname"] for row in rows) == sorted(f"twin-{index}" for index in range(ROUNDS))
    # Each conductor's interfaces are recorded once, by whichever registration came last.
    assert len(interfaces) == 2 * ROUNDS


def test_registration_takes_over_the_row(db: Database) -> None:
    first = _register(db, "again", "http://127.0.0.1:1")
    db.write(lambda conn: conductor_db.unregister(conn, "again"))
    assert _register(db, "again", "http://127.0.0.1:2") == first
    with db.read() as conn:
        row = conductor_db.get(conn, "again")
    assert row is not None and row["online"] and row["rpc_address"] == "http://127.0.0.1:2"
