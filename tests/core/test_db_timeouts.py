"""A database that cannot be reached or stops answering: bounded waits, 503s, a quick /healthcheck.

Stand-ins on 127.0.0.1 (tests/support/tcp.py): a listener that accepts
and never answers, and a proxy to the real server that can hang (bytes
stop flowing, connections stay open) and recover.  Waits are
asserted by getting an answer at all within three times what the
configuration allows, never by measuring them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import sqlalchemy as sa

from corral.core import config, health, migrations
from corral.core.db import Database, NetworkSettings, create_engine, engine_options
from corral.core.db_liveness import TICK
from corral.core.server import ThreadedServer
from corral.placement.api.app import build_state, make_app
from corral.placement.db.schema import TREE
from tests.support.databases import SERVER_URLS, DatabaseFactory
from tests.support.tcp import SilentListener, TcpProxy

CONNECT_TIMEOUT = 2  # libpq's smallest
LIVENESS_CHECK_AFTER = 1.0
HEALTH_TIMEOUT = 2.0
# The longest a request may wait on a database that stopped answering
# (see docs/operations.md, "Production"), three times over.
REQUEST_BOUND = 3 * (LIVENESS_CHECK_AFTER + TICK + CONNECT_TIMEOUT)
HEALTH_BOUND = 3 * HEALTH_TIMEOUT


class _Captured(Exception):
    pass


def _driver_arguments(url: str, **kwargs: Any) -> dict[str, Any]:
    """What the driver's connect() would be given, caught before any connection is tried."""
    engine = create_engine(url, **kwargs)
    seen: dict[str, Any] = {}

    def capture(*_cargs: Any, **cparams: Any) -> None:
        seen.update(cparams)
        raise _Captured

    engine.dialect.connect = capture  # type: ignore[method-assign] - this engine's own dialect
    with pytest.raises(_Captured):
        engine.connect()
    engine.dispose()
    return seen


def _pick(arguments: dict[str, Any], names: str) -> dict[str, Any]:
    return {name: arguments.get(name) for name in names.split()}


PG_NAMES = "connect_timeout keepalives keepalives_idle keepalives_interval keepalives_count tcp_user_timeout"
MYSQL_NAMES = "connect_timeout read_timeout write_timeout"


def test_every_wait_is_bounded_by_default_and_the_url_wins() -> None:
    pg = _driver_arguments("postgresql://u:p@127.0.0.1:1/d")
    assert _pick(pg, PG_NAMES) == {"connect_timeout": 5, "keepalives": 1, "keepalives_idle": 5,
                                   "keepalives_interval": 2, "keepalives_count": 3, "tcp_user_timeout": 10000}
    pg = _driver_arguments("postgresql://u:p@127.0.0.1:1/d?connect_timeout=9&keepalives_idle=60&tcp_user_timeout=0")
    assert _pick(pg, PG_NAMES) == {"connect_timeout": "9", "keepalives": 1, "keepalives_idle": "60",
                                   "keepalives_interval": 2, "keepalives_count": 3, "tcp_user_timeout": "0"}
    mysql = _driver_arguments("mysql://u:p@127.0.0.1:1/d")
    assert _pick(mysql, MYSQL_NAMES) == {"connect_timeout": 5, "read_timeout": 5, "write_timeout": 5}
    mysql = _driver_arguments("mysql://u:p@127.0.0.1:1/d?connect_timeout=9&read_timeout=600")
    assert _pick(mysql, MYSQL_NAMES) == {"connect_timeout": 9, "read_timeout": 600, "write_timeout": 5}
    # The configuration's values, where the URL says nothing.
    conf = config.make_conf(overrides={"corral_database": {"connect_timeout": 7, "keepalives_count": 9}},
                            services=["placement"])
    pg = _driver_arguments("postgresql://u:p@127.0.0.1:1/d?keepalives_count=4", network=NetworkSettings.from_conf(conf))
    assert (pg["connect_timeout"], pg["keepalives_count"]) == (7, "4")


def test_a_services_database_group_takes_oslo_db_pool_options() -> None:
    conf = config.make_conf(overrides={
        "placement_database": {"max_pool_size": 1, "max_overflow": 0, "pool_timeout": 3, "connection_recycle_time": 60},
        "corral_database": {"max_pool_size": 4},
    }, services=["placement", "baremetal"])
    own, shared = engine_options(conf, "placement_database"), engine_options(conf, "baremetal_database")
    assert _pick(own, "pool_size max_overflow pool_timeout recycle") == {
        "pool_size": 1, "max_overflow": 0, "pool_timeout": 3, "recycle": 60}
    assert _pick(shared, "pool_size max_overflow pool_timeout recycle") == {
        "pool_size": 4, "max_overflow": 20, "pool_timeout": 10, "recycle": 3600}


# ------------------------------------------------------------ over HTTP


class _Placement:
    """Placement and its /healthcheck served in-process on ``url``."""

    def __init__(self, url: str, tmp_path: Path, *, load_names: bool = True, group: dict[str, Any] | None = None,
                 **tuning: Any) -> None:
        self.conf = config.make_conf(state_path=str(tmp_path), services=["placement"], overrides={
            "placement_database": {"connection": url, **(group or {})},
            "corral_database": {"connect_timeout": CONNECT_TIMEOUT, **tuning},
            "corral_server": {"healthcheck_timeout": HEALTH_TIMEOUT},
            "api": {"auth_strategy": "noauth2"},
        })
        self.state = build_state(self.conf, load_names=load_names)
        self.health = health.Health(health.checks_for(self.conf, ["placement"]), HEALTH_TIMEOUT)
        self.server = ThreadedServer(health.WithHealth(make_app(self.conf, self.state), self.health)).start()

    def get(self, path: str, timeout: float = REQUEST_BOUND) -> requests.Response:
        # No answer within ``timeout`` fails the test (requests.Timeout).
        return requests.get(self.server.url + path, headers={"X-Auth-Token": "admin"}, timeout=timeout)

    def stop(self) -> None:
        self.server.stop()
        self.state.db.dispose()
        self.health.close()


def _assert_database_unavailable(response: requests.Response) -> None:
    assert response.status_code == 503
    assert response.headers["Retry-After"] == "5"
    (error,) = response.json()["errors"]  # Placement's own error body
    assert error["status"] == 503 and "database" in error["detail"]


def _migrated(database_factory: DatabaseFactory) -> str:
    url = database_factory.new_url("timeouts")
    engine = create_engine(url)
    migrations.upgrade(engine, TREE)
    engine.dispose()
    return url


def _through(url: str, proxy: TcpProxy) -> str:
    return sa.engine.make_url(url).set(port=proxy.port).render_as_string(hide_password=False)


def _eventually(condition: Callable[[], bool], timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return False


@pytest.fixture
def proxy(backend: str) -> Iterator[TcpProxy]:
    """A proxy to the backend's server (one of PostgreSQL, MariaDB)."""
    target = sa.engine.make_url(SERVER_URLS[backend])
    running = TcpProxy(target.host or "127.0.0.1", target.port or 0)
    yield running
    running.close()


@pytest.mark.parametrize("scheme", ["postgresql", "mysql"])
def test_a_database_that_accepts_and_never_answers_is_answered_503(scheme: str, tmp_path: Path,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    with SilentListener() as silent:
        placement = _Placement(f"{scheme}://corral:hunter2@127.0.0.1:{silent.port}/placement", tmp_path,
                               load_names=False)
        try:
            # Each waits out the connect timeout at most (one at a time: others fail at once).
            for _ in range(2):
                _assert_database_unavailable(placement.get("/resource_providers"))
            answer = placement.get("/healthcheck", timeout=HEALTH_BOUND)
        finally:
            placement.stop()
    assert answer.status_code == 503
    (part,) = answer.json()["parts"]
    assert part["name"] == "placement.database" and part["status"] == "down"
    warnings = [record.getMessage() for record in caplog.records if record.levelno == logging.WARNING]
    assert any(f"127.0.0.1:{silent.port}/placement is not available" in line for line in warnings)
    assert not any("hunter2" in line for line in warnings)
    assert not [record for record in caplog.records if record.levelno >= logging.ERROR]


@pytest.mark.backends("postgresql", "mysql")
def test_a_database_that_stops_answering_is_answered_503_then_used_again(
        database_factory: DatabaseFactory, proxy: TcpProxy, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    placement = _Placement(_through(_migrated(database_factory), proxy), tmp_path,
                           liveness_check_after=LIVENESS_CHECK_AFTER)
    try:
        assert placement.get("/resource_providers").status_code == 200
        assert placement.get("/healthcheck").status_code == 200
        proxy.hang()
        # The first request's statement goes out on the pooled connection
        # and gets no answer; the next one's new connection gets none either.
        for _ in range(2):
            _assert_database_unavailable(placement.get("/resource_providers"))
        answer = placement.get("/healthcheck", timeout=HEALTH_BOUND)
        assert answer.status_code == 503
        assert answer.json()["parts"][0]["status"] == "down"
        proxy.restore()
        # No restart: new connections once the database answers a probe again.
        assert _eventually(lambda: placement.get("/resource_providers").status_code == 200)
        assert _eventually(lambda: placement.get("/healthcheck").status_code == 200)
    finally:
        placement.stop()
    assert any("is not available" in record.getMessage() for record in caplog.records)
    assert not [record for record in caplog.records if record.levelno >= logging.ERROR]


@pytest.mark.backends("postgresql", "mysql")
def test_no_free_pooled_connection_is_answered_503(database_factory: DatabaseFactory, tmp_path: Path) -> None:
    placement = _Placement(_migrated(database_factory), tmp_path,
                           group={"max_pool_size": 1, "max_overflow": 0, "pool_timeout": 1})
    try:
        with placement.state.db.engine.connect():  # the pool's only connection
            _assert_database_unavailable(placement.get("/resource_providers", timeout=3 * 1))
        assert placement.get("/resource_providers").status_code == 200
    finally:
        placement.stop()


@pytest.mark.backends("postgresql", "mysql")
def test_a_long_statement_on_a_database_that_answers_is_left_alone(backend: str,
                                                                   database_factory: DatabaseFactory) -> None:
    url = database_factory.new_url("long")
    sleep = "SELECT pg_sleep(3)" if backend == "postgresql" else "SELECT SLEEP(3)"
    # Longer than the connect timeout (and, on MariaDB, than the
    # handshake's read timeout), through several liveness checks.
    database = Database(create_engine(url, network=NetworkSettings(connect_timeout=1, liveness_check_after=0.5)))
    try:
        with database.read() as conn:
            conn.exec_driver_sql(sleep)
    finally:
        database.dispose()
    if backend == "mysql":
        # An operator who wants a statement limit on MariaDB names it in the URL.
        with_limit = sa.engine.make_url(url).update_query_dict({"read_timeout": "1"})
        limited = Database(create_engine(with_limit.render_as_string(hide_password=False)))
        try:
            with pytest.raises(sa.exc.OperationalError), limited.read() as conn:
                conn.exec_driver_sql(sleep)
        finally:
            limited.dispose()


@pytest.mark.backends("mysql")
def test_statements_on_a_new_mariadb_connection_are_not_bound_by_the_handshake_timeout(
        database_factory: DatabaseFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    # The dialect's first-use queries and the session's isolation level run
    # as each connection opens: a busy server answering them slowly is no dead server.
    engine = create_engine(database_factory.new_url("handshake"), network=NetworkSettings(connect_timeout=1))
    seen: list[tuple[str, object]] = []
    initialize, set_isolation = engine.dialect.initialize, engine.dialect.set_isolation_level

    def watched_initialize(connection: Any) -> None:
        seen.append(("initialize", connection.connection.dbapi_connection._read_timeout))
        initialize(connection)

    def watched_isolation(dbapi_connection: Any, level: Any) -> None:
        seen.append(("isolation", dbapi_connection._read_timeout))
        set_isolation(dbapi_connection, level)

    monkeypatch.setattr(engine.dialect, "initialize", watched_initialize)
    monkeypatch.setattr(engine.dialect, "set_isolation_level", watched_isolation)
    try:
        with engine.connect() as conn:
            assert conn.exec_driver_sql("SELECT 1").scalar() == 1
    finally:
        engine.dispose()
    assert ("initialize", None) in seen and ("isolation", None) in seen
    assert all(timeout is None for _, timeout in seen)


@pytest.mark.backends("postgresql", "mysql")
def test_a_healthy_healthcheck_costs_one_round_trip_per_database(
        database_factory: DatabaseFactory, proxy: TcpProxy, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from corral.baremetal.db.schema import TREE as BAREMETAL_TREE

    baremetal = database_factory.new_url("baremetal")
    engine = create_engine(baremetal)
    migrations.upgrade(engine, BAREMETAL_TREE)
    engine.dispose()
    conf = config.make_conf(state_path=str(tmp_path), services=["placement", "baremetal"], overrides={
        "placement_database": {"connection": _through(_migrated(database_factory), proxy)},
        "baremetal_database": {"connection": _through(baremetal, proxy)}})
    monkeypatch.setattr(health, "CACHE_SECONDS", 0.0)
    checker = health.Health(health.checks_for(conf, ["placement", "baremetal"]))
    try:
        first = checker.report()  # connects, and reads each schema's version once
        before = proxy.client_sends
        for _ in range(3):
            assert checker.report() == first
        # Placement's check, and Bare Metal's (its database and conductors in one statement).
        assert proxy.client_sends - before == 3 * 2
    finally:
        checker.close()
    assert [(part["name"], part["status"]) for part in first["parts"]] == [
        ("placement.database", "ok"), ("baremetal.database", "ok"), ("baremetal.conductors", "degraded")]


def test_the_healthcheck_reads_the_schema_version_until_it_is_the_latest(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'placement.sqlite'}"
    conf = config.make_conf(state_path=str(tmp_path), services=["placement"],
                            overrides={"placement_database": {"connection": url}})
    monkeypatch.setattr(health, "CACHE_SECONDS", 0.0)
    checker = health.Health(health.checks_for(conf, ["placement"]))
    try:
        assert checker.report()["parts"] == [{"name": "placement.database", "status": "down",
                                              "detail": "not at the latest schema: run 'corral db upgrade'"}]
        engine = create_engine(url)
        migrations.upgrade(engine, TREE)
        engine.dispose()
        assert checker.report()["status"] == "ok"
    finally:
        checker.close()


class _Flaky(health.Check):
    """Down on its first run, then up; counts its runs."""

    names = ("flaky.database",)

    def __init__(self) -> None:
        self.runs = 0

    def run(self) -> list[health.Part]:
        self.runs += 1
        return self.down("unreachable") if self.runs == 1 else [health.Part(self.names[0], health.OK)]


def test_a_report_with_a_part_down_is_not_reused() -> None:
    # HAProxy takes a host out after two failed checks in a row: one failed run must not answer both.
    check = _Flaky()
    checker = health.Health([check])
    assert checker.report()["status"] == "down"
    assert checker.report()["status"] == "ok"
    assert checker.report()["status"] == "ok"
    assert check.runs == 2  # a report that is up is reused for a while
