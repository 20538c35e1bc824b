"""Identity as a Corral service (see corral.core.services)."""

from __future__ import annotations

from typing import Any

from oslo_config import cfg

from corral.core.migrations import MigrationTree
from corral.identity import conf as identity_conf

NAME = "identity"
PREFIX = "/identity"


def register_opts(conf: cfg.ConfigOpts) -> None:
    identity_conf.register_opts(conf)


def migration_targets(conf: cfg.ConfigOpts) -> list[tuple[MigrationTree, str]]:
    from corral.identity.db.schema import TREE

    return [(TREE, identity_conf.database_url(conf))]


def make_app(conf: cfg.ConfigOpts) -> Any:
    from corral.identity.api.app import make_app as build

    return build(conf)


def start_background(conf: cfg.ConfigOpts, role: str) -> list[Any]:
    # Identity has no background work.
    return []


def prepare(conf: cfg.ConfigOpts, url: str) -> list[str]:
    """Before serving: token keys, and on first start the admin and a clouds.yaml.

    ``url`` is where this server is reached (http://host:port).  Returns
    lines to show the operator (never a password).
    """
    from corral.identity.bootstrap import first_start

    return first_start(conf, url)


def make_authenticator(conf: cfg.ConfigOpts) -> Any:
    """The ``corral`` auth strategy, for every service's application."""
    from corral.identity.auth import make_authenticator as build

    return build(conf)


def __getattr__(name: str) -> Any:
    # The command group is imported only when the CLI asks for it.
    if name == "cli":
        from corral.identity.cli import cli

        return cli
    raise AttributeError(name)
