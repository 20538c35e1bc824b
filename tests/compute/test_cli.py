"""corral compute cell_v2 ... and online-data-migrations, on real databases."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from corral.cli import main
from corral.compute.cells import CELL0_UUID
from corral.compute.db import api_queries as q
from corral.compute.db import cell_queries as cq
from corral.compute.db.schema import API_TREE
from corral.compute.domain import states
from corral.core.db import Database
from tests.compute.conftest import migrate
from tests.support.databases import DatabaseFactory
from tests.support.process import write_config

UNREACHABLE = "postgresql+psycopg://postgres@127.0.0.1:1/corral_cell_down"


class Cli:
    def __init__(self, database_factory: DatabaseFactory, tmp_path: Path) -> None:
        self.api_url = database_factory.new_url("api")
        self.cell0_url = database_factory.new_url("cell0")
        self.cell1_url = database_factory.new_url("cell1")
        self.cell2_url = database_factory.new_url("cell2")
        migrate(self.api_url, API_TREE)
        self.config = write_config(tmp_path / "corral.conf", {
            "api_database": {"connection": self.api_url},
            "database": {"connection": self.cell1_url},
            "compute": {"cell0_connection": self.cell0_url},
            "cells": {"timeout": 3, "connect_timeout": 1},
        })
        self.data_dir = tmp_path / "state"

    def run(self, *args: str) -> Result:
        return CliRunner().invoke(
            main, ["compute", *args, "--config-file", str(self.config), "--data-dir", str(self.data_dir)]
        )


@pytest.fixture
def cli(database_factory: DatabaseFactory, tmp_path: Path) -> Cli:
    return Cli(database_factory, tmp_path)


def test_cells_lifecycle(cli: Cli) -> None:
    setup = cli.run("cell_v2", "simple-cell-setup")
    assert setup.exit_code == 0, setup.output
    again = cli.run("cell_v2", "map-cell0")
    assert again.exit_code == 0 and "Cell0 is already setup" in again.output
    created = cli.run("cell_v2", "create-cell", "--name", "cell2", "--database_connection", cli.cell2_url)
    assert created.exit_code == 0, created.output
    cell2_uuid = created.output.strip()
    listed = cli.run("cell_v2", "list-cells")
    assert "cell0" in listed.output and "cell1" in listed.output and cell2_uuid in listed.output
    assert CELL0_UUID in listed.output
    duplicate = cli.run("cell_v2", "create-cell", "--name", "again", "--database_connection", cli.cell2_url)
    assert duplicate.exit_code == 2
    # A compute host appears in cell2's database and is discovered.
    cell_db = Database.from_url(cli.cell2_url)
    cell_db.write(cq.register_service, "host-x", "nova-compute", "compute")
    cell_db.dispose()
    discovered = cli.run("cell_v2", "discover-hosts", "--verbose")
    assert "Found 1 unmapped computes." in discovered.output
    assert "host-x" in cli.run("cell_v2", "list-hosts").output
    assert cli.run("cell_v2", "delete-cell", "--cell_uuid", cell2_uuid).exit_code == 2
    assert cli.run("cell_v2", "delete-cell", "--cell_uuid", cell2_uuid, "--force").exit_code == 0
    assert cli.run("cell_v2", "delete-cell", "--cell_uuid", cell2_uuid).exit_code == 1
    assert cell2_uuid not in cli.run("cell_v2", "list-cells").output


def _unmigrated_server(cli: Cli, cell_uuid: str, *, deleted: bool) -> str:
    import uuid

    api_db = Database.from_url(cli.api_url)
    cell_db = Database.from_url(cli.cell2_url)
    server = str(uuid.uuid4())
    with api_db.read() as conn:
        cell_id = q.get_cell_mapping(conn, cell_uuid).id
    api_db.write(lambda conn: q.create_instance_mapping(
        conn, instance_uuid=server, cell_id=cell_id, project_id="p", user_id="u", queued_for_delete=None))
    cell_db.write(cq.create_instance, {
        "uuid": server, "project_id": "p", "user_id": "u", "memory_mb": 1, "vcpus": 1, "root_gb": 1,
        "ephemeral_gb": 0, "flavor": {}, "flavorid": "1", "vm_state": states.DELETED if deleted else states.ACTIVE,
        "deleted": deleted,
    }, {})
    api_db.dispose()
    cell_db.dispose()
    return server


def _qfd(cli: Cli, server: str) -> bool | None:
    api_db = Database.from_url(cli.api_url)
    try:
        with api_db.read() as conn:
            return q.instance_mapping(conn, server).queued_for_delete
    finally:
        api_db.dispose()


def test_online_data_migrations_exit_codes(cli: Cli) -> None:
    assert cli.run("cell_v2", "simple-cell-setup").exit_code == 0
    cell2 = cli.run("cell_v2", "create-cell", "--name", "cell2", "--database_connection", cli.cell2_url)
    cell2_uuid = cell2.output.strip()
    gone = _unmigrated_server(cli, cell2_uuid, deleted=True)
    alive = _unmigrated_server(cli, cell2_uuid, deleted=False)
    assert cli.run("cell_v2", "update-cell", "--cell_uuid", cell2_uuid,
                   "--database_connection", UNREACHABLE).exit_code == 0
    failed = cli.run("online-data-migrations")
    assert failed.exit_code == 2, failed.output
    assert "Some migrations failed unexpectedly. Check log for details." in failed.output
    assert _qfd(cli, gone) is None
    assert cli.run("cell_v2", "update-cell", "--cell_uuid", cell2_uuid,
                   "--database_connection", cli.cell2_url).exit_code == 0
    batch = cli.run("online-data-migrations", "--max-count", "1")
    assert batch.exit_code == 1, batch.output
    done = cli.run("online-data-migrations")
    assert done.exit_code == 0, done.output
    assert "1 rows matched query populate_queued_for_delete, 1 migrated" in done.output
    assert _qfd(cli, gone) is True
    assert _qfd(cli, alive) is False
    assert cli.run("online-data-migrations").exit_code == 0
    assert cli.run("online-data-migrations", "--max-count", "0").exit_code == 127
