"""Noticing that a database stopped answering, and not waiting on it.

TCP alone cannot tell a database that is slow from one that is gone: a
statement waiting for its answer sends nothing, and a host that vanished
(packets dropped) or a server that froze behind a proxy that still
acknowledges leaves the waiting thread blocked.  A statement timeout
would cut legitimate long statements too.  Instead, :class:`Liveness`
watches each engine's connections: once one has been in use for
``after`` seconds, a *probe* opens a brand new connection to the same
database (bounded by the connect timeout).  If the database answers it,
however slowly the other statements run, nothing happens.  If it does
not, every connection of the engine is cut (its socket shut down, so the
threads blocked on it fail at once with a disconnection error, which the
API answers 503).  The engine then counts the database as down, as it
does after a connection attempt that got no answer (timed out, refused):
while it is down, one connection attempt at a time is let through and the
others fail at once, so that requests are answered 503 at once instead of
each waiting out a connect timeout (and queueing for threads), and the
first attempt that succeeds brings the database back.

One thread per process (:class:`_Watchdog`) looks at every engine twice a
second; probes run in threads of their own so that one dead database does
not delay the others.  :class:`UnreachableLog` keeps the warnings about
one database to one line every few seconds.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event, exc
from sqlalchemy.engine import Engine

LOG = logging.getLogger(__name__)

TICK = 0.5
WARN_EVERY = 5.0


def shutdown_socket(dbapi_connection: Any) -> None:
    """Unblock a thread stuck reading from a database that stopped answering."""
    sock = getattr(dbapi_connection, "_sock", None)  # PyMySQL
    try:
        if sock is not None:
            sock.shutdown(socket.SHUT_RDWR)
            return
        pgconn = getattr(dbapi_connection, "pgconn", None)  # psycopg 3
        if pgconn is not None:
            fd = pgconn.socket
            with socket.socket(fileno=fd) as raw:
                try:
                    raw.shutdown(socket.SHUT_RDWR)
                finally:
                    # The file descriptor stays owned by libpq.
                    raw.detach()
    except Exception:  # noqa: BLE001 - best effort
        # Already closed or lost (psycopg then raises for its socket): no
        # thread is blocked on it.
        pass


def describe(url: sa.URL) -> str:
    """The database's URL as a log may show it: no password, no query string."""
    bare = url.difference_update_query(list(url.query))
    return bare.render_as_string(hide_password=True)


class UnreachableLog:
    """One WARNING line per database every :data:`WARN_EVERY` seconds, however many requests fail."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._lock = threading.Lock()
        self._last = float("-inf")
        self._quiet = 0

    def warning(self, error: BaseException) -> None:
        now = time.monotonic()
        with self._lock:
            if now - self._last < WARN_EVERY:
                self._quiet += 1
                return
            quiet, self._quiet, self._last = self._quiet, 0, now
        more = f" ({quiet} more since the last report)" if quiet else ""
        LOG.warning("database %s is not available: %s%s", self.name, first_line(error), more)


def first_line(error: BaseException) -> str:
    # The driver's own message: SQLAlchemy's would add the statement and
    # its parameters, which a log has no use for.
    orig = getattr(error, "orig", None) or error
    text = str(orig).strip().splitlines()
    return text[0] if text else type(orig).__name__


_LOGS: weakref.WeakKeyDictionary[Engine, UnreachableLog] = weakref.WeakKeyDictionary()
_LOGS_LOCK = threading.Lock()


def unreachable_log(engine: Engine) -> UnreachableLog:
    """The engine's log of failures (one per engine, shared by its users)."""
    with _LOGS_LOCK:
        log = _LOGS.get(engine)
        if log is None:
            log = _LOGS[engine] = UnreachableLog(describe(engine.url))
        return log


def server_answered(error: BaseException) -> bool:
    """Whether a failed connection attempt still got an answer from the server.

    A refusal by the server (wrong password, too many connections) proves
    it alive; a timeout, a refused or reset TCP connection does not.
    """
    if isinstance(error, OSError):
        return False
    if getattr(error, "sqlstate", None):  # psycopg: an error the server sent
        return True
    args = getattr(error, "args", ())
    if args and isinstance(args[0], int):  # PyMySQL: 2000 and above are the client's own
        return args[0] < 2000
    return not type(error).__module__.startswith(("psycopg", "pymysql"))


class Liveness:
    """Watches one engine's connections; see the module's documentation."""

    def __init__(self, engine: Engine, probe: Callable[[], None], after: float, name: str | None = None) -> None:
        self._probe = probe
        # The database's label in the metrics (corral.core.metrics), if it has one.
        self._name = name
        self._after = after
        self._log = unreachable_log(engine)
        self._lock = threading.Lock()
        # Every DBAPI connection the engine opened -> whether it was cut.
        self._opened: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()
        # Connections in use: id(pool record) -> (DBAPI connection, since).
        self._busy: dict[int, tuple[Any, float]] = {}
        self._down = False
        self._trying = False
        self._probing = False
        self._last_probe = float("-inf")
        event.listen(engine, "connect", self._on_connect)
        event.listen(engine, "checkin", self._on_checkin)
        event.listen(engine, "do_connect", self._on_do_connect)
        event.listen(engine, "engine_disposed", self._on_disposed)
        _WATCHDOG.add(self)

    def _on_disposed(self, _engine: Engine) -> None:
        # Its connections are gone; a later use starts afresh.
        with self._lock:
            self._down = False
            self._opened.clear()

    def _on_connect(self, dbapi_connection: Any, _record: Any) -> None:
        with self._lock:
            self._opened[dbapi_connection] = False

    def on_checkout(self, dbapi_connection: Any, record: Any) -> None:
        """Called first on every checkout (the engine's own listener calls it)."""
        with self._lock:
            if self._opened.get(dbapi_connection):
                # The pool discards it and opens another (or fails at once while down).
                raise exc.DisconnectionError("connection cut after its database stopped answering")
            self._busy[id(record)] = (dbapi_connection, time.monotonic())

    def _on_checkin(self, _dbapi_connection: Any, record: Any) -> None:
        with self._lock:
            self._busy.pop(id(record), None)

    def _on_do_connect(self, dialect: Any, _record: Any, cargs: Any, cparams: Any) -> Any:
        with self._lock:
            if self._down and self._trying:
                raise refusal(dialect, f"{self._log.name} did not answer a moment ago")
            # While the database is down, one connection attempt at a time
            # goes through: the others fail at once, and the first that
            # succeeds brings the database back without delay.
            trial = self._trying = self._down
        try:
            connection = dialect.connect(*cargs, **cparams)
        except Exception as error:
            self._record(server_answered(error))
            raise
        finally:
            if trial:
                with self._lock:
                    self._trying = False
        self._record(True)
        return connection

    def _record(self, answered: bool) -> None:
        with self._lock:
            was_down, self._down = self._down, not answered
        if was_down and answered:
            LOG.info("database %s answers again", self._log.name)
        if was_down != (not answered) and self._name is not None:
            from corral.core import metrics

            metrics.DB_UP.labels(self._name).set(0 if was_down is False else 1)
            if was_down:
                metrics.DB_RECONNECTS.labels(self._name).inc()

    def tick(self, now: float) -> None:
        with self._lock:
            if self._probing or now - self._last_probe < self._after:
                return
            if not any(now - since >= self._after for _conn, since in self._busy.values()):
                return
            self._probing, self._last_probe = True, now
        threading.Thread(target=self._check, name="db-liveness-probe", daemon=True).start()

    def _check(self) -> None:
        try:
            self._probe()
            answered, failure = True, None
        except Exception as error:  # noqa: BLE001 - whatever it is, it decides "answered or not"
            answered, failure = server_answered(error), error
        with self._lock:
            self._probing = False
            victims = [] if answered else list(self._opened.keys())
            for conn in victims:
                self._opened[conn] = True
        for conn in victims:
            shutdown_socket(conn)
        if victims and self._name is not None:
            from corral.core import metrics

            metrics.DB_CONNECTIONS_CUT.labels(self._name).inc(len(victims))
        self._record(answered)
        if failure is not None and not answered:
            self._log.warning(failure)


def refusal(dialect: Any, message: str) -> BaseException:
    """The driver's own "cannot connect" error, so callers see what a failed connect raises."""
    dbapi = dialect.loaded_dbapi
    if dialect.name in ("mysql", "mariadb"):
        return dbapi.OperationalError(2003, message)
    return dbapi.OperationalError(message)


class _Watchdog:
    """One thread per process ticking every engine's :class:`Liveness`."""

    def __init__(self) -> None:
        self._members: weakref.WeakSet[Liveness] = weakref.WeakSet()
        self._lock = threading.Lock()
        self._pid: int | None = None

    def add(self, liveness: Liveness) -> None:
        with self._lock:
            self._members.add(liveness)
            # A forked child has the set but not the thread.
            if self._pid != os.getpid():
                self._pid = os.getpid()
                threading.Thread(target=self._run, name="db-liveness", daemon=True).start()

    def after_fork(self) -> None:
        # The lock may have been held by a thread the child does not have.
        self._lock = threading.Lock()

    def _run(self) -> None:
        while True:
            time.sleep(TICK)
            now = time.monotonic()
            with self._lock:
                members = list(self._members)
            for member in members:
                try:
                    member.tick(now)
                except Exception:  # noqa: BLE001 - the watchdog must outlive a bad tick
                    LOG.exception("database liveness check failed")


_WATCHDOG = _Watchdog()
os.register_at_fork(after_in_child=_WATCHDOG.after_fork)
