"""Compute served over real HTTP, with its API database and cells on real databases."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from oslo_config import cfg

from corral.core import config, migrations
from corral.core.db import create_engine, truncate_all
from corral.core.server import ThreadedServer
from corral.compute import conf as compute_conf
from corral.compute.api.app import build_state, make_app
from corral.compute.db import api_tables, cell_tables
from corral.compute.db.schema import API_TREE, CELL_TREE
from corral.compute.domain import cell_admin
from corral.compute.manager import FAKE_TRAITS, ComputeManager
from corral.compute.scheduler.fake import FakeScheduler
from tests.image.conftest import ImageServer, active
from tests.support.databases import DatabaseFactory
from tests.support.http import ApiClient


def make_compute_conf(state_path: str, overrides: dict[str, dict[str, object]]) -> cfg.ConfigOpts:
    conf = config.make_conf(state_path=state_path)
    if "api_database" not in conf:
        compute_conf.register_opts(conf)
    for group, values in overrides.items():
        for name, value in values.items():
            conf.set_override(name, value, group=None if group == "DEFAULT" else group)
    return conf


def migrate(url: str, tree: migrations.MigrationTree) -> None:
    engine = create_engine(url)
    try:
        migrations.upgrade(engine, tree)
    finally:
        engine.dispose()


# A public, active image every project may boot (4 KiB, no min_ram or min_disk).
IMAGE = "70a599e0-31e7-49b7-b260-868f441e862b"


class ComputeServer:
    def __init__(self, database_factory: DatabaseFactory, tmp_dir: str, cell_urls: dict[str, str] | None = None) -> None:
        # The Image service boots find their images in, on the same backend.
        image_dir = Path(tmp_dir) / "image-service"
        image_dir.mkdir(exist_ok=True)
        self.images = ImageServer(database_factory, image_dir)
        active(self.images.admin(), id=IMAGE, name="cirros", visibility="public")
        self.api_url = database_factory.new_url("compute_api")
        self.cell_urls = {name: database_factory.new_url(f"compute_{name}") for name in ("cell0", "cell1", "cell2")}
        self.cell_urls.update(cell_urls or {})
        migrate(self.api_url, API_TREE)
        for url in self.cell_urls.values():
            migrate(url, CELL_TREE)
        self.conf = make_compute_conf(
            tmp_dir,
            {
                "api_database": {"connection": self.api_url},
                "database": {"connection": self.cell_urls["cell1"]},
                "compute": {"cell0_connection": self.cell_urls["cell0"], "auto_map_cells": False},
                # The fake hypervisors these tests expect (the default is the ironic driver).
                "DEFAULT": {"compute_driver": "fake.FakeDriver"},
                "api": {"auth_strategy": "noauth2"},
                "glance": {"endpoint_override": self.images.url},
                # A healthy cell on a busy test machine answers well within 10 s; the
                # tests of down cells make theirs unreachable (refused at once) or
                # set a shorter timeout themselves.
                "cells": {"timeout": 10.0, "connect_timeout": 1.0, "down_cell_recheck_interval": 0.0},
                # Small pools: the database servers are shared with every other test.
                "corral_database": {"max_pool_size": 2, "max_overflow": 6},
            },
        )
        self.scheduler = FakeScheduler()
        self.state = build_state(self.conf, scheduler=self.scheduler)
        self.app = make_app(self.conf, self.state)
        self.server = ThreadedServer(self.app).start()
        self.url = self.server.url

    def client(self, version: str | None = None, token: str | None = "admin", legacy: bool = False) -> ApiClient:
        headers = {}
        if token is not None:
            headers["X-Auth-Token"] = token
        if version is not None:
            if legacy:
                headers["X-OpenStack-Nova-API-Version"] = version
            else:
                headers["OpenStack-API-Version"] = f"compute {version}"
        return ApiClient(self.url, headers)

    def reset(self) -> None:
        truncate_all(self.state.api_db, api_tables.metadata)
        for url in self.cell_urls.values():
            engine = create_engine(url)
            try:
                with engine.begin() as conn:
                    for table in reversed(cell_tables.metadata.sorted_tables):
                        conn.execute(table.delete())
            finally:
                engine.dispose()
        self.state.cells.refresh()
        self.state.cells.forget_failures()

    def setup_cloud(self, scheduler: Any = None, hosts: dict[str, tuple[str, frozenset[str]]] | None = None) -> None:
        """cell0, cell1 and cell2, compute hosts (default: one in each of cell1 and cell2), flavor m1.tiny.

        ``hosts`` maps host name to (cell name, extra traits).
        """
        self.scheduler = scheduler if scheduler is not None else FakeScheduler()
        self.state.scheduler = self.scheduler
        api_db = self.state.api_db
        cell_admin.map_cell0(api_db, self.cell_urls["cell0"], migrate=False)
        self.cells = {"cell0": self.state.cells.cell0()}
        for name in ("cell1", "cell2"):
            self.cells[name] = cell_admin.create_cell(
                api_db, name=name, database_connection=self.cell_urls[name], migrate=False
            )
        self.state.cells.refresh()
        self.managers = {}
        if hosts is None:
            hosts = {f"host-{name}": (name, frozenset()) for name in ("cell1", "cell2")}
        for host, (name, traits) in hosts.items():
            manager = ComputeManager(
                self.conf, host, self.state.cells.database(self.cells[name]), self.scheduler,
                api_db=api_db, cell=self.cells[name], traits=FAKE_TRAITS | traits,
            )
            manager.register()
            self.managers[host] = manager
        flavor = {"name": "m1.tiny", "ram": 512, "vcpus": 1, "disk": 1, "id": "1"}
        assert self.client("2.69").post("/v2.1/flavors", json={"flavor": flavor}).status_code == 200

    def run_computes(self) -> None:
        """One pass of every compute service (spawns what was scheduled)."""
        for manager in self.managers.values():
            manager.run_once()

    def boot(self, token: str = "user-a:project-a", name: str = "vm", version: str = "2.69",
             **server: object) -> str:
        body = {"name": name, "flavorRef": "1", "imageRef": IMAGE, "networks": "none", **server}
        resp = self.client(version, token=token).post("/v2.1/servers", json={"server": body})
        assert resp.status_code == 202, resp.text
        return str(resp.json()["server"]["id"])

    def stop(self) -> None:
        self.server.stop()
        self.state.cells.close()
        self.state.api_db.dispose()
        self.images.stop()


@pytest.fixture(scope="session")
def compute_server(database_factory: DatabaseFactory, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ComputeServer]:
    server = ComputeServer(database_factory, str(tmp_path_factory.mktemp("compute")))
    yield server
    server.stop()


@pytest.fixture
def compute(compute_server: ComputeServer) -> ComputeServer:
    """The session's server with every table of every database emptied."""
    compute_server.reset()
    return compute_server


@pytest.fixture
def cloud(compute: ComputeServer) -> ComputeServer:
    """Three cells, a compute host in cell1 and in cell2, and flavor m1.tiny."""
    compute.setup_cloud()
    return compute
