"""Placement as a Corral service (see corral.core.services)."""

from __future__ import annotations

from typing import Any

from oslo_config import cfg

from corral.core.migrations import MigrationTree
from corral.placement import conf as placement_conf

NAME = "placement"
PREFIX = "/placement"


def register_opts(conf: cfg.ConfigOpts) -> None:
    placement_conf.register_opts(conf)


def migration_targets(conf: cfg.ConfigOpts) -> list[tuple[MigrationTree, str]]:
    from corral.placement.db.schema import TREE

    return [(TREE, placement_conf.database_url(conf))]


def make_app(conf: cfg.ConfigOpts) -> Any:
    from corral.placement.api.app import make_app as build

    return build(conf)


def start_background(conf: cfg.ConfigOpts, role: str) -> list[Any]:
    # Placement has no background work.
    return []


def __getattr__(name: str) -> Any:
    # The command group is imported only when the CLI asks for it.
    if name == "cli":
        from corral.placement.cli import cli

        return cli
    raise AttributeError(name)
