"""``GET /healthcheck``: the state of every part the APIs depend on.

Each service contributes checks: by default one per database it owns
(reachable, and at the latest schema); a service module may instead define
``health_checks(conf)`` returning its own list of :class:`Check` s (see
:func:`checks_for`).  A check reports one or more :class:`Part` s::

    {"status": "ok" | "degraded" | "down",
     "parts": [{"name": "placement.database", "status": "ok", "detail": ""},
               {"name": "baremetal.conductors", "status": "down",
                "detail": "no conductor has sent a heartbeat recently"}]}

The answer is 200 unless a part is down (503), so a load balancer can use
it as is.  It needs no authentication, like upstream's healthcheck
middleware, and so says nothing a stranger should not learn: details are
Corral's own short phrases, never error messages, host names or URLs.

It answers within ``[corral_server] healthcheck_timeout`` (2 s) whatever
the databases do: the checks run side by side, and a part whose check has
not answered by then is reported down (its connections are cut so that
its thread comes back).  Healthy, a check costs one round trip to its
database (one statement on a kept connection, in autocommit: no BEGIN,
no ROLLBACK); the schema version is read again only once a minute after
it was found current.  Results are reused for :data:`CACHE_SECONDS`, and
one report runs at a time, so polling it cannot load the databases.  A
report with a part down is not reused: the next request runs the checks
again, so that a load balancer's consecutive failed checks (HAProxy's
``fall 2``) are separate findings, not one passing blip seen twice.
"""

from __future__ import annotations

import logging
import math
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, replace
from typing import Any

import orjson
import sqlalchemy as sa
from oslo_config import cfg
from sqlalchemy import event
from sqlalchemy.engine import Connection

from corral.core import metrics

LOG = logging.getLogger(__name__)

PATH = "/healthcheck"
OK, DEGRADED, DOWN = "ok", "degraded", "down"
_RANK = {OK: 0, DEGRADED: 1, DOWN: 2}
CACHE_SECONDS = 2.0
DEFAULT_TIMEOUT = 2.0
# Once a database was found at the latest schema, how long that is believed.
SCHEMA_RECHECK_SECONDS = 60.0


@dataclass(frozen=True)
class Part:
    name: str
    status: str
    detail: str = ""


class Check:
    """One or more parts of the answer.  :meth:`run` may block; :meth:`interrupt` unblocks it."""

    names: tuple[str, ...] = ()

    def run(self) -> list[Part]:
        raise NotImplementedError

    def interrupt(self) -> None:
        """Called from another thread when :meth:`run` is past its deadline."""

    def down(self, detail: str) -> list[Part]:
        return [Part(name, DOWN, detail) for name in self.names]

    def close(self) -> None:
        """Let go of connections (tests; a server keeps its checks for life)."""


# Given a connection to the check's database, more parts (one statement,
# whose success also shows the database answers).
Query = Callable[[Connection], list[Part]]


class DatabaseCheck(Check):
    """The database answers and (given its migration tree) is at the latest schema."""

    def __init__(self, name: str, url: str, tree: Any = None, *, timeout: float = DEFAULT_TIMEOUT,
                 network: Any = None, query: Query | None = None, query_names: tuple[str, ...] = ()) -> None:
        self.names = (name, *query_names)
        self._url = url
        self._tree = tree
        self._timeout = timeout
        self._network = network
        self._query = query
        self._engine: sa.engine.Engine | None = None
        # Connections to cut when a run is late; added to from the run's thread.
        self._opened: weakref.WeakSet[Any] = weakref.WeakSet()
        self._opened_lock = threading.Lock()
        self._head: str | None = None
        self._schema_ok_until = float("-inf")

    def run(self) -> list[Part]:
        from corral.core.db_liveness import unreachable_log

        engine = self._engine or self._create_engine()
        try:
            with engine.connect() as conn:
                current = self._schema_current(conn)
                if current is False:
                    return [Part(self.names[0], DOWN, "not at the latest schema: run 'corral db upgrade'"),
                            *self._unread()]
                if self._query is not None:
                    extra = self._query(conn)
                else:
                    extra = self._ping(conn) if current is None else []
        except Exception as error:  # noqa: BLE001 - whatever failed, the answer is "down"
            unreachable_log(engine).warning(error)
            return [Part(self.names[0], DOWN, "unreachable"), *self._unread()]
        return [Part(self.names[0], OK), *extra]

    def interrupt(self) -> None:
        from corral.core.db_liveness import shutdown_socket

        with self._opened_lock:
            opened = list(self._opened)
        for dbapi_connection in opened:
            shutdown_socket(dbapi_connection)

    def close(self) -> None:
        if self._engine is not None:
            self._engine.dispose()

    def _unread(self) -> list[Part]:
        return [Part(name, DOWN, "cannot be read from the database") for name in self.names[1:]]

    @staticmethod
    def _ping(conn: Connection) -> list[Part]:
        conn.exec_driver_sql("SELECT 1")
        return []

    def _schema_current(self, conn: Connection) -> bool | None:
        """Whether the schema is the latest; None when it was a short while ago (nothing read then).

        The version table is read with one plain statement, which also
        shows that the database answers.
        """
        from corral.core import migrations
        from corral.core.db import is_connection_error

        if self._tree is None or time.monotonic() < self._schema_ok_until:
            return None
        if self._head is None:
            self._head = migrations.head_revision(self._tree)
        try:
            versions = conn.exec_driver_sql(f"SELECT version_num FROM {self._tree.version_table}").scalars().all()
        except sa.exc.SQLAlchemyError as error:
            if is_connection_error(error):
                raise
            return False  # no version table: never migrated
        if versions != [self._head]:
            return False
        self._schema_ok_until = time.monotonic() + SCHEMA_RECHECK_SECONDS
        return True

    def _create_engine(self) -> sa.engine.Engine:
        from corral.core.db import NetworkSettings, create_engine

        network = replace(self._network or NetworkSettings(), liveness_check_after=0,
                          connect_timeout=max(1, math.ceil(self._timeout)))
        options: dict[str, Any] = {}
        if not self._url.startswith("sqlite"):
            # One statement per check and nothing around it; the check
            # itself tells a dead connection (no ping on checkout).
            options = {"isolation_level": "AUTOCOMMIT", "pool_reset_on_return": None, "ping_idle": False}
        engine = create_engine(self._url, pool_size=1, max_overflow=0, pool_timeout=self._timeout,
                               network=network, **options)
        if options:
            # In autocommit there is no transaction to end, but PyMySQL
            # would still send ROLLBACK when SQLAlchemy closes one: a second
            # round trip per check.
            engine.dialect.do_rollback = engine.dialect.do_commit = _nothing  # type: ignore[method-assign]
        event.listen(engine, "connect", self._remember)
        self._engine = engine
        return engine

    def _remember(self, dbapi_connection: Any, _record: Any) -> None:
        try:
            with self._opened_lock:
                self._opened.add(dbapi_connection)
        except TypeError:  # sqlite3's connections: nothing to cut anyway
            pass


def _nothing(_dbapi_connection: Any) -> None:
    pass


def database_check(name: str, url: str, tree: Any = None, conf: cfg.ConfigOpts | None = None,
                   **kwargs: Any) -> DatabaseCheck:
    """A :class:`DatabaseCheck` with ``conf``'s timeout and network settings."""
    if conf is not None:
        from corral.core.db import NetworkSettings

        kwargs.setdefault("timeout", conf.corral_server.healthcheck_timeout)
        kwargs.setdefault("network", NetworkSettings.from_conf(conf))
    return DatabaseCheck(name, url, tree, **kwargs)


def checks_for(conf: cfg.ConfigOpts, names: Iterable[str] | None = None) -> list[Check]:
    """Every selected service's checks: its ``health_checks(conf)``, or its databases."""
    from corral.core import services

    checks: list[Check] = []
    for module in services.load(names):
        own = getattr(module, "health_checks", None)
        if own is not None:
            checks.extend(own(conf))
            continue
        targets = module.migration_targets(conf)
        for index, (tree, url) in enumerate(targets):
            suffix = "" if len(targets) == 1 else f".{index}"
            checks.append(database_check(f"{module.NAME}.database{suffix}", url, tree, conf))
    return checks


class _Run:
    """One check running in a thread of its own (a daemon: a hung database never holds up exit)."""

    def __init__(self, check: Check) -> None:
        self.check = check
        self.finished = threading.Event()
        self.parts: list[Part] = []
        self.error: BaseException | None = None
        threading.Thread(target=self._run, name="healthcheck", daemon=True).start()

    def _run(self) -> None:
        try:
            self.parts = self.check.run()
        except Exception as error:  # noqa: BLE001 - reported as the check's failure
            self.error = error
        finally:
            self.finished.set()


class Health:
    """Runs the checks (side by side, one report at a time, reused briefly) and renders the answer."""

    def __init__(self, checks: list[Check], timeout: float = DEFAULT_TIMEOUT) -> None:
        self._checks = checks
        self._timeout = timeout
        self._lock = threading.Lock()
        self._last: tuple[float, dict[str, Any]] | None = None
        # A check still running from an earlier report is waited for, not started twice.
        self._runs: list[_Run | None] = [None] * len(checks)

    def report(self) -> dict[str, Any]:
        with self._lock:
            if self._last is not None and time.monotonic() - self._last[0] < CACHE_SECONDS:
                return self._last[1]
            parts = self._run_checks()
            worst = max((part.status for part in parts), key=_RANK.__getitem__, default=OK)
            report = {"status": worst, "parts": [asdict(part) for part in parts]}
            self._last = (time.monotonic(), report) if worst != DOWN else None
            return report

    def start(self) -> Health:
        """Run every check once now, in the background, answering nobody.

        A check's first run also connects (at a 200 ms round trip, about
        two seconds with the driver's first queries); a server starts them
        as it starts, so that its first reports cost what later ones do.
        """
        with self._lock:
            for index, check in enumerate(self._checks):
                if self._runs[index] is None:
                    self._runs[index] = _Run(check)
        return self

    def close(self) -> None:
        for check in self._checks:
            check.close()

    def _run_checks(self) -> list[Part]:
        deadline = time.monotonic() + self._timeout
        runs = []
        for index, check in enumerate(self._checks):
            run = self._runs[index]
            if run is None or run.finished.is_set():
                run = self._runs[index] = _Run(check)
            runs.append(run)
        for run in runs:
            run.finished.wait(max(0.0, deadline - time.monotonic()))
        return [part for run in runs for part in self._outcome(run)]

    def _outcome(self, run: _Run) -> list[Part]:
        if not run.finished.is_set():
            run.check.interrupt()
            return run.check.down(f"no answer within {self._timeout:g} s")
        if run.error is not None:
            LOG.error("health check %s failed", ", ".join(run.check.names), exc_info=run.error)
            return run.check.down("the check itself failed")
        return run.parts

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        if environ.get("REQUEST_METHOD") not in ("GET", "HEAD"):
            body = orjson.dumps({"message": "Only GET and HEAD are allowed here."})
            start_response("405 Method Not Allowed", [("Content-Type", "application/json"), ("Allow", "GET, HEAD"),
                                                      ("Content-Length", str(len(body)))])
            return [body]
        report = self.report()
        body = orjson.dumps(report)
        status = "503 Service Unavailable" if report["status"] == DOWN else "200 OK"
        start_response(status, [("Content-Type", "application/json"), ("Cache-Control", "no-store"),
                                ("Content-Length", str(len(body)))])
        return [] if environ["REQUEST_METHOD"] == "HEAD" else [body]


class WithHealth:
    """Answers :data:`PATH` with ``health``; everything else goes to ``app``."""

    def __init__(self, app: Callable[..., Any], health: Health) -> None:
        self._app = app
        self._health = health

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        if environ.get("PATH_INFO") == PATH:
            environ[metrics.ROUTE_KEY] = PATH
            return self._health(environ, start_response)
        return self._app(environ, start_response)
