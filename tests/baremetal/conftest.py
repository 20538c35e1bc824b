"""Bare Metal served over real HTTP on a real database, once per backend."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from oslo_config import cfg

from corral.baremetal.api.app import build_state, make_app
from corral.baremetal.conductor.local import LOCAL
from corral.baremetal.conductor.service import ConductorService
from corral.baremetal.db.schema import TREE
from corral.baremetal.db.tables import metadata
from corral.core import config, migrations
from corral.core.db import create_engine, is_duplicate, truncate_all
from corral.core.server import ThreadedServer
from tests.support.databases import DatabaseFactory
from tests.support.http import ApiClient


def make_test_conf(tmp_dir: str, url_db: str, **overrides: dict[str, object]) -> cfg.ConfigOpts:
    values: dict[str, dict[str, object]] = {
        "baremetal_database": {"connection": url_db},
        "api": {"auth_strategy": "noauth2"},
        "DEFAULT": {"host": "test-conductor"},
        "conductor": {
            "heartbeat_interval": 1,
            "clean_step_poll_interval": 0.2,
            "sync_power_state_interval": 0,
            "check_provision_state_interval": 0,
            "node_locked_retry_attempts": 0,
        },
    }
    for group, options in overrides.items():
        values.setdefault(group, {}).update(options)
    return config.make_conf(state_path=tmp_dir, overrides=values)


class BaremetalServer:
    def __init__(self, database_factory: DatabaseFactory, tmp_dir: str) -> None:
        self.url_db = database_factory.new_url("baremetal")
        self.conf = make_test_conf(tmp_dir, self.url_db)
        engine = create_engine(self.url_db)
        migrations.upgrade(engine, TREE)
        engine.dispose()
        self.state = build_state(self.conf)
        self.conductor_service = ConductorService(self.conf, rpc_server=False, db=self.state.db).start()
        self.conductor = self.conductor_service.conductor
        self.app = make_app(self.conf, self.state)
        self.server = ThreadedServer(self.app).start()
        self.url = self.server.url

    def reset(self) -> None:
        """Empty every table and register the conductor again."""
        truncate_all(self.state.db, metadata)
        # Another test's server whose conductor has the same host name took this one's place among the
        # conductors of this process, and left none when it stopped: the API would answer 503.
        LOCAL.add(self.conductor)
        try:
            self.conductor.register()
        except Exception as error:
            # The conductor's heartbeat may have registered it again first.
            if not is_duplicate(error):
                raise
            self.conductor.register()

    def client(self, version: str | None = "latest", token: str | None = "admin") -> ApiClient:
        headers = {}
        if token is not None:
            headers["X-Auth-Token"] = token
        if version is not None:
            headers["X-OpenStack-Ironic-API-Version"] = version
        return ApiClient(self.url, headers)

    def stop(self) -> None:
        self.server.stop()
        self.conductor_service.stop()
        self.state.db.dispose()


@pytest.fixture(scope="session")
def baremetal_server(
    database_factory: DatabaseFactory, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BaremetalServer]:
    server = BaremetalServer(database_factory, str(tmp_path_factory.mktemp("baremetal")))
    yield server
    server.stop()


@pytest.fixture
def baremetal(baremetal_server: BaremetalServer) -> BaremetalServer:
    """The session's server with every table emptied before the test."""
    baremetal_server.reset()
    return baremetal_server
