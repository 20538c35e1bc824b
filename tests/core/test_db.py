"""Transactions, retries and error classification on every backend."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from sqlalchemy import exc

from corral.core.db import Database, closed_under_us, is_duplicate, is_retriable, normalize_url
from tests.support.databases import DatabaseFactory

metadata = sa.MetaData()
counters = sa.Table(
    "counters",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("name", sa.String(50), nullable=False, unique=True),
    sa.Column("value", sa.Integer, nullable=False),
)


@pytest.fixture
def database(database_factory: DatabaseFactory) -> Iterator[Database]:
    db = Database.from_url(database_factory.new_url("core"))
    metadata.create_all(db.engine)
    yield db
    db.dispose()


def _insert(conn: sa.Connection, name: str, value: int = 0) -> None:
    conn.execute(counters.insert().values(name=name, value=value))


def _value(db: Database, name: str) -> int:
    with db.read() as conn:
        return conn.execute(sa.select(counters.c.value).where(counters.c.name == name)).scalar_one()


def test_normalize_url_picks_the_shipped_drivers() -> None:
    assert normalize_url("postgresql://u@h/d") == "postgresql+psycopg://u@h/d"
    assert normalize_url("mysql://u@h/d") == "mysql+pymysql://u@h/d"
    assert normalize_url("sqlite:///x.db") == "sqlite:///x.db"


def test_write_commits_and_failure_rolls_back(database: Database) -> None:
    database.write(_insert, "a", 1)

    def fail_half_way(conn: sa.Connection) -> None:
        conn.execute(counters.update().where(counters.c.name == "a").values(value=99))
        raise ValueError("bad input")

    with pytest.raises(ValueError):
        database.write(fail_half_way)
    assert _value(database, "a") == 1


def test_duplicates_are_recognised(database: Database) -> None:
    database.write(_insert, "dup")
    with pytest.raises(exc.IntegrityError) as raised:
        database.write(_insert, "dup")
    assert is_duplicate(raised.value)
    assert not is_retriable(raised.value)


@pytest.mark.backends("postgresql", "mysql")
def test_a_deadlock_inside_a_savepoint_is_retried(database: Database) -> None:
    """MariaDB rolls the whole transaction back on a deadlock, savepoints included: the failed
    rollback to the savepoint ("SAVEPOINT ... does not exist") still means "run it again"."""
    database.write(_insert, "left", 0)
    database.write(_insert, "right", 0)
    both_locked = threading.Barrier(2, timeout=30)
    failures: list[BaseException] = []

    def bump(first: str, second: str) -> None:
        attempts = []

        def work(conn: sa.Connection) -> None:
            attempts.append(1)
            conn.execute(counters.update().where(counters.c.name == first).values(value=counters.c.value + 1))
            if len(attempts) == 1:
                both_locked.wait()
            with conn.begin_nested():
                conn.execute(counters.update().where(counters.c.name == second).values(value=counters.c.value + 1))

        try:
            database.write(work)
        except BaseException as error:  # noqa: BLE001 - reported below
            failures.append(error)

    workers = [threading.Thread(target=bump, args=pair) for pair in (("left", "right"), ("right", "left"))]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
    assert not failures, failures
    assert _value(database, "left") == 2 and _value(database, "right") == 2


def test_concurrent_read_modify_write_loses_no_update(database: Database) -> None:
    """Compare-and-set increments from many threads: every one lands."""
    database.write(_insert, "hits", 0)
    threads, increments = 8, 25

    def increment(conn: sa.Connection) -> bool:
        seen = conn.execute(sa.select(counters.c.value).where(counters.c.name == "hits")).scalar_one()
        result = conn.execute(
            counters.update().where(counters.c.name == "hits", counters.c.value == seen).values(value=seen + 1)
        )
        return result.rowcount == 1

    failures: list[BaseException] = []

    def worker() -> None:
        try:
            done = 0
            while done < increments:
                if database.write(increment):
                    done += 1
        except BaseException as error:  # noqa: BLE001 - reported below
            failures.append(error)

    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    assert failures == []
    assert _value(database, "hits") == threads * increments


def test_retriable_errors_are_retried(database: Database) -> None:
    database.write(_insert, "retry", 0)
    attempts = []

    def flaky(conn: sa.Connection) -> str:
        attempts.append(1)
        conn.execute(counters.update().where(counters.c.name == "retry").values(value=counters.c.value + 1))
        if len(attempts) < 3:
            raise exc.OperationalError("UPDATE", {}, Exception("database is locked"))
        return "done"

    assert database.write(flaky) == "done"
    assert len(attempts) == 3
    # the two failed attempts were rolled back
    assert _value(database, "retry") == 1


@pytest.mark.backends("postgresql", "mysql")
def test_a_pooled_connection_the_server_closed_is_replaced_before_use(backend: str, database: Database) -> None:
    with database.transaction() as conn:
        _insert(conn, "kept", 7)
    with database.read() as conn:
        session = conn.exec_driver_sql(
            "SELECT pg_backend_pid()" if backend == "postgresql" else "SELECT CONNECTION_ID()").scalar_one()
        pooled = conn.connection.dbapi_connection
    assert not closed_under_us(pooled)
    # The server ends the pooled connection (a restart, an idle timeout, an operator) while it is idle.
    admin = sa.create_engine(database.engine.url, poolclass=sa.pool.NullPool, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f"SELECT pg_terminate_backend({session})" if backend == "postgresql"
                             else f"KILL {session}")
    admin.dispose()
    deadline = time.monotonic() + 10
    while not closed_under_us(pooled):
        assert time.monotonic() < deadline, "the closed connection's socket never became readable"
        time.sleep(0.05)
    # Found closed at checkout: the read runs on a new connection instead of failing.
    assert _value(database, "kept") == 7
