"""Placement served over real HTTP on a real database, once per backend."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from corral.core import config, migrations
from corral.core.db import truncate_all
from corral.core.server import ThreadedServer
from corral.placement.api.app import build_state, load_standard_names, make_app
from corral.placement.db.schema import TREE
from corral.placement.db.tables import metadata
from tests.support.databases import DatabaseFactory
from tests.support.http import ApiClient


class PlacementServer:
    def __init__(self, database_factory: DatabaseFactory, tmp_dir: str) -> None:
        self.url_db = database_factory.new_url("placement")
        self.conf = config.make_conf(
            state_path=tmp_dir,
            overrides={"placement_database": {"connection": self.url_db}, "api": {"auth_strategy": "noauth2"}},
        )
        from corral.core.db import create_engine

        engine = create_engine(self.url_db)
        migrations.upgrade(engine, TREE)
        engine.dispose()
        self.state = build_state(self.conf)
        self.app = make_app(self.conf, self.state)
        self.server = ThreadedServer(self.app).start()
        self.url = self.server.url

    def client(self, version: str | None = None, token: str | None = "admin") -> ApiClient:
        headers = {}
        if token is not None:
            headers["X-Auth-Token"] = token
        if version is not None:
            headers["OpenStack-API-Version"] = f"placement {version}"
        return ApiClient(self.url, headers)

    def stop(self) -> None:
        self.server.stop()
        self.state.db.dispose()


@pytest.fixture(scope="session")
def placement_server(database_factory: DatabaseFactory, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PlacementServer]:
    server = PlacementServer(database_factory, str(tmp_path_factory.mktemp("placement")))
    yield server
    server.stop()


@pytest.fixture
def placement(placement_server: PlacementServer) -> PlacementServer:
    """The session's server with every table emptied before the test."""
    truncate_all(placement_server.state.db, metadata)
    # Ids remembered for rows that were just deleted (only tests delete them).
    placement_server.state.cache.pop("consumer_ids", None)
    load_standard_names(placement_server.state)
    return placement_server
