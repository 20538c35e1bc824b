"""What a MariaDB connection returned to the pool is left with: nothing open, for one round trip less.

The pool's reset (a ROLLBACK) is skipped after a commit or rollback
(corral.core.db._reset_unless_ended); whatever else was done on the
connection still gets it, so no lock or transaction outlives its user.
Round trips are counted on the wire (tests/support/tcp.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
import sqlalchemy as sa

from corral.core.db import Database, create_engine
from tests.support.databases import SERVER_URLS, DatabaseFactory
from tests.support.tcp import TcpProxy

pytestmark = pytest.mark.backends("mysql")


@dataclass
class Proxied:
    """The database through a counting proxy, and its URL without one."""

    db: Database
    proxy: TcpProxy
    direct_url: str


# A pool class of the caller's own, as the metrics' metered pool is.
@pytest.fixture(params=["default pool", "pool class given"])
def database(request: pytest.FixtureRequest, database_factory: DatabaseFactory) -> Iterator[Proxied]:
    url = database_factory.new_url("reset")
    pool = {"poolclass": sa.pool.QueuePool} if request.param == "pool class given" else {}
    target = sa.engine.make_url(SERVER_URLS["mysql"])
    proxy = TcpProxy(target.host or "127.0.0.1", target.port or 0)
    through = sa.engine.make_url(url).set(port=proxy.port).render_as_string(hide_password=False)
    # (No ping before a use after a pause: the counts are the statements'.)
    db = Database(create_engine(through, pool_size=1, max_overflow=0, ping_idle=False, **pool))
    db.write(lambda conn: conn.exec_driver_sql("CREATE TABLE t (a INT PRIMARY KEY)"))
    db.write(lambda conn: conn.exec_driver_sql("INSERT INTO t VALUES (1)"))
    yield Proxied(db, proxy, url)
    db.dispose()
    proxy.close()


def _round_trips(proxy: TcpProxy, work: Callable[[], None]) -> int:
    before = proxy.round_trips
    work()
    return proxy.round_trips - before


def _row_is_free(database: Proxied) -> bool:
    """Whether another connection can lock row 1 at once (not through the proxy: its counts are the test's)."""
    other = create_engine(database.direct_url, pool_size=1, max_overflow=0)
    try:
        with other.connect() as conn:
            try:
                conn.exec_driver_sql("SELECT a FROM t WHERE a = 1 FOR UPDATE NOWAIT").all()
            except sa.exc.OperationalError:
                return False
            conn.rollback()
            return True
    finally:
        other.dispose()


def test_a_write_costs_its_statements_and_its_commit(database: Proxied) -> None:
    db, proxy = database.db, database.proxy
    # UPDATE, COMMIT: no ROLLBACK as the connection goes back.
    assert _round_trips(proxy, lambda: db.write(
        lambda conn: conn.exec_driver_sql("UPDATE t SET a = 2 WHERE a = 1"))) == 2
    # A write that fails: INSERT, ROLLBACK.
    def duplicate() -> None:
        with pytest.raises(sa.exc.IntegrityError):
            db.write(lambda conn: conn.exec_driver_sql("INSERT INTO t VALUES (2)"))

    assert _round_trips(proxy, duplicate) == 2
    assert _row_is_free(database)
    # A read: SELECT, ROLLBACK.
    def read() -> None:
        with db.read() as conn:
            assert conn.exec_driver_sql("SELECT a FROM t").scalar() == 2

    assert _round_trips(proxy, read) == 2


def test_whatever_else_was_done_is_rolled_back(database: Proxied) -> None:
    db = database.db
    # A lock taken by the driver's own cursor after a commit.
    with db.engine.connect() as conn:
        conn.exec_driver_sql("UPDATE t SET a = 1 WHERE a = 1")
        conn.commit()
        cursor = conn.connection.driver_connection.cursor()
        cursor.execute("SELECT a FROM t WHERE a = 1 FOR UPDATE")
        cursor.close()
    assert _row_is_free(database)
    # A raw connection, used and returned.
    raw = db.engine.raw_connection()
    cursor = raw.cursor()
    cursor.execute("SELECT a FROM t WHERE a = 1 FOR UPDATE")
    cursor.close()
    raw.close()
    assert _row_is_free(database)
