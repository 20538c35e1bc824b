"""Database engines and transactions (SQLAlchemy 2 Core).

One :class:`Database` wraps one engine.  Writes go through
:meth:`Database.write`, which runs a function inside one transaction and
retries it, in this one place, when the database reports a deadlock, a
serialization failure or (SQLite) a busy lock.  Reads use
:meth:`Database.read`.

SQLite is configured for concurrent use: WAL journal, a busy timeout, and
``BEGIN IMMEDIATE`` for write transactions so that two writers queue on the
write lock instead of failing half-way with "database is locked".

PostgreSQL and MariaDB engines bound every wait on a database that
stopped answering (:class:`NetworkSettings`: connect timeout, TCP
keepalives, and :mod:`corral.core.db_liveness` for a database that
accepts connections but never answers); :func:`is_connection_error` tells
those failures apart, and the API answers them 503.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import random
import select
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy import event, exc
from sqlalchemy.dialects import mysql
from sqlalchemy.engine import Connection, Engine

from corral.core import metrics
from corral.core.db_liveness import Liveness, unreachable_log

LOG = logging.getLogger(__name__)

T = TypeVar("T")

# PostgreSQL SQLSTATEs and MySQL error numbers that mean "run it again".
_PG_RETRY_STATES = {"40001", "40P01", "55P03"}
_MYSQL_RETRY_ERRNOS = {1205, 1213, 1412}  # lock wait timeout, deadlock, table def changed
_PG_UNIQUE_STATE = "23505"
_MYSQL_DUPLICATE_ERRNO = 1062


# Constraint and index names every service's tables use, so that migrations
# and tables agree on them on every backend.
NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


# Microsecond timestamps on every backend (MySQL's DATETIME drops them
# otherwise), for tables whose rows are ordered by creation time.
Timestamp = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")


def timestamp_columns() -> list[sa.Column]:
    """``created_at`` and ``updated_at``, as every table carries them."""
    return [sa.Column("created_at", Timestamp, nullable=True), sa.Column("updated_at", Timestamp, nullable=True)]


def normalize_url(url: str) -> str:
    """Pick the drivers Corral ships with when a URL names none."""
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    if url.startswith("mysql://") or url.startswith("mariadb://"):
        return "mysql+pymysql://" + url.split("://", 1)[1]
    return url


@dataclass(frozen=True)
class NetworkSettings:
    """How long to wait on a database host that stopped answering.

    The defaults are ``[corral_database]``'s (see docs/operations.md, "Production");
    a value in a database URL's query string wins over them.
    """

    connect_timeout: int = 5
    keepalives_idle: int = 5
    keepalives_interval: int = 2
    keepalives_count: int = 3
    tcp_user_timeout: int = 10000  # milliseconds, as libpq counts it
    liveness_check_after: float = 3.0

    @classmethod
    def from_conf(cls, conf: Any) -> NetworkSettings:
        tuning = conf.corral_database
        return cls(**{name: getattr(tuning, name) for name in cls.__dataclass_fields__})


def connect_args(url: sa.URL, settings: NetworkSettings) -> dict[str, Any]:
    """The driver arguments that bound waits on the database, less those the URL sets itself."""
    backend = url.get_backend_name()
    if backend == "postgresql":
        # libpq's own names: a URL may carry any of them, as with oslo.db.
        defaults: dict[str, Any] = {
            "connect_timeout": settings.connect_timeout,
            "keepalives": 1,
            "keepalives_idle": settings.keepalives_idle,
            "keepalives_interval": settings.keepalives_interval,
            "keepalives_count": settings.keepalives_count,
            "tcp_user_timeout": settings.tcp_user_timeout,
        }
    elif backend == "mysql":
        # PyMySQL reads the server's greeting with read_timeout: without
        # one, a server that accepts connections and says nothing holds
        # the connect for ever.  See _mysql_after_handshake.
        bound = settings.connect_timeout
        defaults = {"connect_timeout": bound, "read_timeout": bound, "write_timeout": bound}
    else:
        return {}
    return {name: value for name, value in defaults.items() if name not in url.query}


def create_engine(
    url: str,
    *,
    pool_size: int = 10,
    max_overflow: int = 20,
    pool_timeout: float = 10,
    recycle: int = 3600,
    sqlite_busy_timeout: int = 30,
    network: NetworkSettings | None = None,
    connect_timeout: float | None = None,
    isolation_level: str = "READ COMMITTED",
    ping_idle: bool = True,
    name: str | None = None,
    **kwargs: Any,
) -> Engine:
    """An engine whose waits on an unreachable database are bounded (see :class:`NetworkSettings`).

    ``connect_timeout`` overrides ``network``'s; ``ping_idle=False`` skips
    the check of connections idle for a while (for callers whose first
    statement is itself that check).  ``name`` is the database's label in
    the metrics (:mod:`corral.core.metrics`): its pool is watched when this
    process exports metrics.
    """
    url = normalize_url(url)
    parsed = sa.engine.make_url(url)
    backend = parsed.get_backend_name()
    metered = name is not None and metrics.enabled()
    if backend == "sqlite":
        return _create_sqlite_engine(parsed, sqlite_busy_timeout, name=name if metered else None, **kwargs)
    if metered and "poolclass" not in kwargs:
        kwargs["poolclass"] = metrics.metered_pool_class(sa.pool.QueuePool, name)  # type: ignore[arg-type]
    network = network or NetworkSettings()
    if connect_timeout is not None:
        network = replace(network, connect_timeout=max(1, math.ceil(connect_timeout)))
    args = {**connect_args(parsed, network), **kwargs.pop("connect_args", {})}
    if backend == "mysql" and parsed.query.get("charset") is None:
        parsed = parsed.update_query_dict({"charset": "utf8mb4"})
    # See _reset_unless_ended (a caller's own pool_reset_on_return wins).
    reset_unless_ended = backend == "mysql" and kwargs.setdefault("pool_reset_on_return", None) is None
    engine = sa.create_engine(
        parsed,
        pool_size=pool_size,
        max_overflow=max_overflow,
        pool_timeout=pool_timeout,
        pool_recycle=recycle,
        # The connection returned last is handed out first: after a burst
        # opened several, a steady trickle of requests keeps reusing one
        # (handed out in turn, each would sit idle long enough to need a
        # ping first: a round trip, see IDLE_BEFORE_PING).
        pool_use_lifo=True,
        isolation_level=isolation_level,
        connect_args=args,
        **kwargs,
    )
    liveness = None
    if network.liveness_check_after > 0:
        liveness = Liveness(engine, _prober(engine, args), network.liveness_check_after, name=name)
    if backend == "mysql":
        _mysql_after_handshake(engine, parsed, network)
    if reset_unless_ended:
        _reset_unless_ended(engine)
    _watch_checkouts(engine, liveness, ping_idle)
    if metered:
        assert name is not None
        metrics.watch_engine(engine, name, pool_size + max_overflow)
    return engine


def _prober(engine: Engine, args: dict[str, Any]) -> Callable[[], None]:
    """Open and close one connection, outside the pool, as the engine would open it."""

    def probe() -> None:
        cargs, cparams = engine.dialect.create_connect_args(engine.url)
        cparams.update(args)
        if engine.dialect.name == "mysql":
            # The handshake only: the probe runs no statement.
            bound = int(cparams.get("connect_timeout") or NetworkSettings.connect_timeout)
            cparams.update(read_timeout=bound, write_timeout=bound)
        engine.dialect.connect(*cargs, **cparams).close()

    return probe


def _mysql_after_handshake(engine: Engine, url: sa.URL, network: NetworkSettings) -> None:
    # PyMySQL applies read_timeout and write_timeout to every later read
    # and write, so a long statement would fail as a dead server does.
    # Unless the URL asks for them, they bound the handshake only; a
    # connection that dies later is noticed by TCP keepalives (tuned here
    # as libpq tunes PostgreSQL's) and by Liveness.
    keep_read, keep_write = "read_timeout" in url.query, "write_timeout" in url.query

    # First among the connect listeners: the dialect's own (its first-use
    # queries, the session's isolation level) run statements too, and a
    # busy server must not fail them as if it were dead.
    @event.listens_for(engine, "connect", insert=True)
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        if not keep_read:
            dbapi_connection._read_timeout = None
        if not keep_write:
            dbapi_connection._write_timeout = None
        _tune_keepalive(getattr(dbapi_connection, "_sock", None), network)


# PyMySQL's status flag for "a transaction is open", as of the server's last OK.
_MYSQL_IN_TRANSACTION = 1


def _reset_unless_ended(engine: Engine) -> None:
    """A connection returned to the pool just after its COMMIT or ROLLBACK is not rolled back again.

    The pool ends whatever a returned connection left open with a
    ROLLBACK.  SQLAlchemy skips it when the connection's transaction was
    rolled back as the connection closed, not after a commit or an
    earlier rollback; psycopg answers such a rollback itself when
    nothing is open, PyMySQL sends it: a round trip on every write.  So
    on MariaDB and MySQL the reset is this: the ROLLBACK is sent unless
    the last thing done on the connection since it was handed out was a
    commit or rollback that succeeded.  An error, or a statement run
    outside a transaction of the Connection's (the driver's own cursor
    after a commit, say), makes it sent.
    """

    def mark(conn: Connection, ended: bool) -> None:
        # (Asking an invalidated Connection for its connection would reconnect.)
        if not (conn.invalidated or conn.closed):
            conn.connection.info["ended"] = ended

    @event.listens_for(engine, "checkout")
    def _on_checkout(_dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        record.info["ended"] = False

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        mark(conn, False)

    # Both run before the statement is sent: one that fails goes through handle_error.
    @event.listens_for(engine, "commit")
    def _on_commit(conn: Connection) -> None:
        mark(conn, True)

    @event.listens_for(engine, "rollback")
    def _on_rollback(conn: Connection) -> None:
        mark(conn, True)

    @event.listens_for(engine, "handle_error")
    def _on_error(context: Any) -> None:
        if context.connection is not None:
            mark(context.connection, False)

    @event.listens_for(engine, "reset")
    def _on_reset(dbapi_connection: Any, record: Any, state: Any) -> None:
        if state.transaction_was_reset:
            return
        ended = record is not None and record.info.get("ended")
        # And the driver agrees: no statement ran since (PyMySQL keeps the
        # last statement's result, not a COMMIT's), none left a transaction open.
        quiet = getattr(dbapi_connection, "_result", "unknown") is None
        open_after = getattr(dbapi_connection, "server_status", None)
        if ended and quiet and open_after is not None and not open_after & _MYSQL_IN_TRANSACTION:
            return
        dbapi_connection.rollback()


def _tune_keepalive(sock: socket.socket | None, network: NetworkSettings) -> None:
    if sock is None or sock.family not in (socket.AF_INET, socket.AF_INET6):
        return
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for name, value in (
        ("TCP_KEEPIDLE", network.keepalives_idle),
        ("TCP_KEEPINTVL", network.keepalives_interval),
        ("TCP_KEEPCNT", network.keepalives_count),
        ("TCP_USER_TIMEOUT", network.tcp_user_timeout),
    ):
        option = getattr(socket, name, None)
        if option is not None and value:
            sock.setsockopt(socket.IPPROTO_TCP, option, value)


# A pooled connection unused for longer than this is tested before it is
# handed out.  Pinging every checkout (SQLAlchemy's pool_pre_ping) costs one
# round trip per transaction; a connection that was used a moment ago is
# almost certainly still open, and if the server did drop it the statement
# fails, SQLAlchemy invalidates the pool and the next checkout reconnects.
IDLE_BEFORE_PING = 5.0


def _watch_checkouts(engine: Engine, liveness: Liveness | None, ping_idle: bool) -> None:
    @event.listens_for(engine, "checkin")
    def _on_checkin(_dbapi_connection: Any, record: Any) -> None:
        record.info["checked_in_at"] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _on_checkout(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        if liveness is not None:
            # First, so that a ping stuck on a dead database is seen too.
            liveness.on_checkout(dbapi_connection, record)
        returned = record.info.get("checked_in_at")
        if returned is not None and closed_under_us(dbapi_connection):
            # The pool discards it and checks out another, instead of the request failing on it.
            raise exc.DisconnectionError("pooled connection closed by the server or the network")
        if not ping_idle or returned is None or time.monotonic() - returned < IDLE_BEFORE_PING:
            return
        try:
            engine.dialect.do_ping(dbapi_connection)
        except Exception as error:  # noqa: BLE001 - any failure means "reconnect"
            # The pool discards this connection and checks out another.
            raise exc.DisconnectionError(f"stale pooled connection: {error}") from error


def closed_under_us(dbapi_connection: Any) -> bool:
    """Whether an idle pooled connection was closed, found without a round trip.

    A connection between two statements has nothing to read: if its
    socket is readable, the server closed it (restart, idle timeout,
    ``pg_terminate_backend``, whose notice is all that is left to read),
    the network reset it, or this host closed it (a link or an address
    that went away).  Polling the socket costs no round trip, where a
    ping costs one; a connection closed without a word (a host gone) is
    only found by using it (see :mod:`corral.core.db_liveness`).
    """
    try:
        sock = getattr(dbapi_connection, "_sock", None)  # PyMySQL
        if sock is not None:
            fd = sock.fileno()
        else:
            pgconn = getattr(dbapi_connection, "pgconn", None)  # psycopg 3
            if pgconn is None:
                return False
            fd = pgconn.socket
    except Exception:  # noqa: BLE001 - the driver already knows the connection is gone
        return True
    if fd < 0:
        return True
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLPRI)
    return bool(poller.poll(0))


# An embedded SQLite file's pool (connections are cheap; writers queue on a lock).
SQLITE_POOL_SIZE, SQLITE_MAX_OVERFLOW = 8, 32


def _create_sqlite_engine(parsed: sa.URL, busy_timeout: int, name: str | None = None, **kwargs: Any) -> Engine:
    database = parsed.database or ""
    in_memory = database in ("", ":memory:")
    if not in_memory:
        os.makedirs(os.path.dirname(os.path.abspath(database)) or ".", exist_ok=True)
    poolclass: Any = sa.pool.StaticPool if in_memory else sa.pool.QueuePool
    if name is not None and not in_memory:
        poolclass = metrics.metered_pool_class(poolclass, name)
    engine = sa.create_engine(
        parsed,
        connect_args={"timeout": busy_timeout, "check_same_thread": False},
        poolclass=poolclass,
        **({} if in_memory else {"pool_size": SQLITE_POOL_SIZE, "max_overflow": SQLITE_MAX_OVERFLOW}),
        **kwargs,
    )
    if name is not None and not in_memory:
        metrics.watch_engine(engine, name, SQLITE_POOL_SIZE + SQLITE_MAX_OVERFLOW)

    @event.listens_for(engine, "connect", insert=True)
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Let SQLAlchemy (below) decide when transactions begin instead of
        # the sqlite3 module's implicit, deferred BEGIN.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {busy_timeout * 1000}")
        if not in_memory:
            cursor.execute("PRAGMA journal_mode = WAL")
            cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        mode = conn.get_execution_options().get("sqlite_begin", "DEFERRED")
        conn.exec_driver_sql(f"BEGIN {mode}")

    return engine


def is_retriable(error: BaseException) -> bool:
    """Deadlock, serialization failure or a lock that timed out, or an error raised while
    handling one.

    MariaDB and MySQL roll the whole transaction back on a deadlock (and
    Galera reports a write set that failed certification as one), which
    also drops its savepoints: when the deadlock happens inside
    ``conn.begin_nested()``, rolling back to the savepoint then fails with
    "SAVEPOINT ... does not exist", and that is the error raised, with the
    deadlock as its context.  The transaction is to be run again all the same.
    """
    seen: set[int] = set()
    cause: BaseException | None = error
    while cause is not None and id(cause) not in seen:
        if _is_retriable_here(cause):
            return True
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return False


def _is_retriable_here(error: BaseException) -> bool:
    if not isinstance(error, exc.DBAPIError):
        return False
    orig = error.orig
    sqlstate = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    if sqlstate in _PG_RETRY_STATES:
        return True
    args = getattr(orig, "args", ())
    if args and isinstance(args[0], int) and args[0] in _MYSQL_RETRY_ERRNOS:
        return True
    message = str(orig).lower()
    return "database is locked" in message or "database table is locked" in message


def is_duplicate(error: BaseException) -> bool:
    """A unique-constraint violation."""
    if not isinstance(error, exc.IntegrityError):
        return False
    orig = error.orig
    if (getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)) == _PG_UNIQUE_STATE:
        return True
    args = getattr(orig, "args", ())
    if args and args[0] == _MYSQL_DUPLICATE_ERRNO:
        return True
    return "unique constraint failed" in str(orig).lower()


# Failures to reach a database or to get its answer in time, as opposed to
# errors caused by the values of one request (a NUL character, a number out
# of range), which say nothing about the database's health.
# PostgreSQL SQLSTATE classes: connection exception, insufficient
# resources, operator intervention (shutdown, statement timeout), system
# error, invalid authorization; plus "database does not exist".
_PG_UNREACHABLE_CLASSES = {"08", "53", "57", "58", "28"}
_PG_UNREACHABLE_STATES = {"3D000"}
# MySQL/MariaDB server errors of the same kinds (every client-side error,
# 2000 and above, is one too): too many connections, access denied,
# unknown database, shutdown in progress, host blocked or not allowed,
# network read/write errors, lock wait timeout, connection killed,
# statement time limits, idle disconnection.
_MYSQL_UNREACHABLE_ERRNOS = {
    1040, 1044, 1045, 1049, 1053, 1077, 1129, 1130, 1152, 1153, 1154, 1155, 1156, 1157, 1158, 1159,
    1160, 1161, 1205, 1927, 1969, 3024, 4031,
}
# MySQL/MariaDB errors about a value, reported as OperationalError by
# PyMySQL: out of range, truncated, invalid string or date, too long.
_MYSQL_DATA_ERRNOS = {1264, 1265, 1292, 1366, 1367, 1406, 1411, 1690}
# SQLite primary result codes: busy, locked, I/O error, cannot open.
_SQLITE_UNREACHABLE_CODES = {5, 6, 10, 14}


def is_connection_error(error: BaseException) -> bool:
    """The database could not be reached or did not answer in time.

    Connections refused, reset or timed out, a server shutting down or
    refusing more connections, statement and lock timeouts.  Errors caused
    by a request's values (:func:`is_data_error`), by constraints or by the
    SQL are not.
    """
    if isinstance(error, (ConnectionError, TimeoutError, exc.DisconnectionError, exc.TimeoutError)):
        return True
    if not isinstance(error, exc.DBAPIError):
        return False
    if error.connection_invalidated or isinstance(error, exc.InterfaceError):
        return True
    if not isinstance(error, exc.OperationalError):
        return False
    orig = error.orig
    if type(orig).__module__ == "sqlite3":
        code = getattr(orig, "sqlite_errorcode", None)
        return code is not None and code & 0xFF in _SQLITE_UNREACHABLE_CODES
    errno = _mysql_errno(orig)
    if errno is not None:
        return errno >= 2000 or errno in _MYSQL_UNREACHABLE_ERRNOS
    sqlstate = getattr(orig, "sqlstate", None)
    return sqlstate is None or sqlstate[:2] in _PG_UNREACHABLE_CLASSES or sqlstate in _PG_UNREACHABLE_STATES


def is_database_unavailable(error: BaseException) -> bool:
    """A database failed to answer (:func:`is_connection_error`), as SQLAlchemy reports it.

    Other code's connection errors and timeouts (a BMC, another service)
    say nothing about a database.
    """
    return isinstance(error, exc.SQLAlchemyError) and is_connection_error(error)


def is_data_error(error: BaseException) -> bool:
    """The database refused a value one request supplied (the client's fault)."""
    if isinstance(error, exc.DataError):
        return True
    return isinstance(error, exc.OperationalError) and _mysql_errno(error.orig) in _MYSQL_DATA_ERRNOS


def _mysql_errno(orig: BaseException | None) -> int | None:
    if orig is None or not type(orig).__module__.startswith("pymysql"):
        return None
    args = getattr(orig, "args", ())
    return args[0] if args and isinstance(args[0], int) else None


# How long a writer waits behind the other writers of its process on SQLite.
SQLITE_LOCAL_QUEUE_TIMEOUT = 30.0


# Backends whose reads run in autocommit: psycopg sends BEGIN as a round
# trip of its own before a transaction's first statement, and COMMIT as
# another after its last.  At READ COMMITTED (every engine's level) a
# statement sees the data committed when it started, in a transaction or
# not, so a read's statements see what they would see in one; what a
# transaction would add, row locks and writes undone together, reads do
# not use.  Switching a psycopg connection to autocommit and back costs
# nothing on the wire; PyMySQL's costs a SET each way, more than the
# ROLLBACK that ends its read transactions.
READS_IN_AUTOCOMMIT = frozenset({"postgresql"})


class Database:
    """One database: an engine, a read path and a retried write path."""

    def __init__(self, engine: Engine, *, max_retries: int = 20, name: str | None = None) -> None:
        self.engine = engine
        self.backend = engine.dialect.name
        self.max_retries = max_retries
        # Its label in the metrics; failures to reach it are counted there.
        self._unavailable = metrics.DB_UNAVAILABLE.labels(name) if name else None
        self._writer = engine.execution_options(sqlite_begin="IMMEDIATE")
        self._reader = (engine.execution_options(isolation_level="AUTOCOMMIT")
                        if self.backend in READS_IN_AUTOCOMMIT else engine)
        # SQLite lets one writer in at a time and makes the others wait in
        # its busy handler, which sleeps for up to 100 ms between tries.
        # Writers of one process queue on this lock instead, and are woken
        # the moment the one before them commits.
        self._local_writers = threading.RLock() if self.backend == "sqlite" else None

    @contextlib.contextmanager
    def _queue_for_writing(self) -> Iterator[None]:
        lock = self._local_writers
        if lock is None:
            yield
            return
        # Past SQLite's own busy timeout, go on and let SQLite decide.
        acquired = lock.acquire(timeout=SQLITE_LOCAL_QUEUE_TIMEOUT)
        try:
            yield
        finally:
            if acquired:
                lock.release()

    @classmethod
    def from_url(cls, url: str, *, max_retries: int = 20, name: str | None = None, **engine_kwargs: Any) -> Database:
        return cls(create_engine(url, name=name, **engine_kwargs), max_retries=max_retries, name=name)

    @contextlib.contextmanager
    def _reporting(self) -> Iterator[None]:
        # The request is answered 503 (corral.core.http.to_api_error); the
        # operator learns which database, once every few seconds.
        try:
            yield
        except Exception as error:
            if is_database_unavailable(error):
                unreachable_log(self.engine).warning(error)
                if self._unavailable is not None:
                    self._unavailable.inc()
            raise

    @contextlib.contextmanager
    def read(self) -> Iterator[Connection]:
        """A connection for reading: statements that change nothing (see :data:`READS_IN_AUTOCOMMIT`).

        On PostgreSQL each statement runs on its own, in autocommit; on
        MariaDB and MySQL they run in one transaction that is rolled back
        at the end; on SQLite in one deferred transaction (one snapshot,
        no write lock).
        """
        with self._reporting(), self._reader.connect() as conn:
            if self.backend in READS_IN_AUTOCOMMIT:
                yield conn
                return
            # Closed while open, the transaction is rolled back: one round trip
            # (COMMIT would be one, and the pool's reset on return another).
            conn.begin()
            yield conn

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Connection]:
        """One write transaction, without retries (see :meth:`write`)."""
        with self._reporting(), self._queue_for_writing(), self._writer.begin() as conn:
            yield conn

    def write(self, work: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run ``work(conn, *args, **kwargs)`` in one write transaction.

        The whole transaction is retried on deadlocks, serialization
        failures and busy locks, so ``work`` must not have side effects
        outside the database.
        """
        with self._reporting():
            return self._write(work, *args, **kwargs)

    def _write(self, work: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        attempt = 0
        while True:
            try:
                with self._queue_for_writing(), self._writer.begin() as conn:
                    return work(conn, *args, **kwargs)
            except exc.DBAPIError as error:
                # A database that cannot be reached is not retried here:
                # the caller answers at once rather than wait again.
                if not is_retriable(error) or attempt >= self.max_retries:
                    raise
                attempt += 1
                delay = min(0.5, 0.005 * (2 ** min(attempt, 7))) * random.uniform(0.5, 1.5)
                LOG.debug("retrying transaction after %s (attempt %d)", error.orig, attempt)
                time.sleep(delay)

    def dispose(self) -> None:
        self.engine.dispose()


def engine_options(conf: Any, group: str | None = None) -> dict[str, Any]:
    """:func:`create_engine`'s arguments from ``[corral_database]`` and a service's own group.

    The service's ``[..._database]`` group (``group``) may set oslo.db's
    pool options for its database alone; unset, they are ``[corral_database]``'s.
    """
    tuning = conf.corral_database
    own = conf[group] if group else None

    def pick(name: str) -> Any:
        value = getattr(own, name) if own is not None else None
        return getattr(tuning, name) if value is None else value

    return {
        "pool_size": pick("max_pool_size"),
        "max_overflow": pick("max_overflow"),
        "pool_timeout": pick("pool_timeout"),
        "recycle": pick("connection_recycle_time"),
        "sqlite_busy_timeout": tuning.sqlite_busy_timeout,
        "network": NetworkSettings.from_conf(conf),
    }


def database_from_conf(conf: Any, url: str, group: str | None = None, *, name: str | None = None,
                       **engine_kwargs: Any) -> Database:
    """The database at ``url``, tuned by ``[corral_database]`` and ``[<group>]``.

    ``name`` labels it in the metrics (by default, after ``group``: see
    :func:`corral.core.metrics.database_name`).
    """
    options = {**engine_options(conf, group), **engine_kwargs}
    return Database.from_url(url, max_retries=conf.corral_database.db_max_retries,
                             name=name or metrics.database_name(group), **options)


def truncate_all(database: Database, metadata: sa.MetaData) -> None:
    """Empty every table of ``metadata`` (used by tests between cases)."""

    def _truncate(conn: Connection) -> None:
        # MySQL checks self-referencing foreign keys row by row, so a table
        # of trees cannot be emptied in one statement with checks on.
        if conn.dialect.name == "mysql":
            conn.exec_driver_sql("SET FOREIGN_KEY_CHECKS = 0")
        for table in reversed(metadata.sorted_tables):
            conn.execute(table.delete())
        if conn.dialect.name == "mysql":
            conn.exec_driver_sql("SET FOREIGN_KEY_CHECKS = 1")

    database.write(_truncate)
