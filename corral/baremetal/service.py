"""Bare Metal as a Corral service (see corral.core.services)."""

from __future__ import annotations

from typing import Any

from oslo_config import cfg

from corral.baremetal import conf as baremetal_conf
from corral.core.migrations import MigrationTree

NAME = "baremetal"
PREFIX = "/baremetal"


def register_opts(conf: cfg.ConfigOpts) -> None:
    baremetal_conf.register_opts(conf)


def migration_targets(conf: cfg.ConfigOpts) -> list[tuple[MigrationTree, str]]:
    from corral.baremetal.db.schema import TREE

    return [(TREE, baremetal_conf.database_url(conf))]


def check_startup(conf: cfg.ConfigOpts, role: str) -> None:
    from corral.baremetal.startup import check_json_rpc

    check_json_rpc(conf, role)


def make_app(conf: cfg.ConfigOpts) -> Any:
    from corral.baremetal.api.app import make_app as build

    return build(conf)


def start_background(conf: cfg.ConfigOpts, role: str) -> list[Any]:
    from corral.baremetal.conductor import service

    return service.start(conf, role)


def health_checks(conf: cfg.ConfigOpts) -> list[Any]:
    from corral.baremetal.health import checks

    return checks(conf)


def __getattr__(name: str) -> Any:
    # The command group is imported only when the CLI asks for it.
    if name == "cli":
        from corral.baremetal.cli import cli

        return cli
    raise AttributeError(name)
