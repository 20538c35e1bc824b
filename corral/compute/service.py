"""Compute as a Corral service (see corral.core.services)."""

from __future__ import annotations

from typing import Any

from oslo_config import cfg

from corral.core.migrations import MigrationTree
from corral.compute import conf as compute_conf
from corral.compute.cli import cli

__all__ = ["NAME", "PREFIX", "cli", "health_checks", "make_app", "migration_targets", "register_opts",
           "start_background"]

NAME = "compute"
PREFIX = "/compute"


def register_opts(conf: cfg.ConfigOpts) -> None:
    compute_conf.register_opts(conf)


def migration_targets(conf: cfg.ConfigOpts) -> list[tuple[MigrationTree, str]]:
    """The API database, cell0 and the default cell.

    Cells added later with ``corral compute cell_v2 create-cell`` are
    migrated by that command (and by ``corral compute db sync``).
    """
    from corral.compute.db.schema import API_TREE, CELL_TREE

    return [
        (API_TREE, compute_conf.api_database_url(conf)),
        (CELL_TREE, compute_conf.cell0_database_url(conf)),
        (CELL_TREE, compute_conf.cell1_database_url(conf)),
    ]


def make_app(conf: cfg.ConfigOpts) -> Any:
    from corral.compute.api.app import make_app as build

    return build(conf)


def start_background(conf: cfg.ConfigOpts, role: str) -> list[Any]:
    """For roles 'all', 'background' and 'compute': this host's compute service in cell1.

    With the default ``[DEFAULT] compute_driver`` (``ironic.IronicDriver``)
    the service's hypervisors are the nodes of this Corral's own Bare
    Metal service that have a resource class; with an empty one the host
    runs no compute service.
    """
    if role not in ("all", "background", "compute"):
        return []
    if not conf.compute_driver:
        if role == "compute":
            import click

            raise click.ClickException(
                "--role compute needs a virt driver: set [DEFAULT] compute_driver "
                "(ironic.IronicDriver or fake.FakeDriver)"
            )
        return []
    from corral.core.db import database_from_conf
    from corral.compute.domain.cell_admin import cell_for_database, ensure_default_cells
    from corral.compute.manager import ComputeManager
    from corral.compute.scheduler import make_scheduler

    api_db = database_from_conf(conf, compute_conf.api_database_url(conf), "api_database")
    cell_url = compute_conf.cell1_database_url(conf)
    cell_db = database_from_conf(conf, cell_url, "database")
    if conf.compute.auto_map_cells:
        ensure_default_cells(conf, api_db, migrate=False)
    manager = ComputeManager(
        conf, conf.host, cell_db, make_scheduler(conf), api_db=api_db, cell=cell_for_database(api_db, cell_url)
    )
    return [manager.start()]


def health_checks(conf: cfg.ConfigOpts) -> list[Any]:
    """The API database and the cells created with it, each reachable and migrated."""
    from corral.core import health

    names = ("compute.api_database", "compute.cell0", "compute.cell1")
    targets = migration_targets(conf)
    return [health.database_check(name, url, tree, conf) for name, (tree, url) in zip(names, targets)]
