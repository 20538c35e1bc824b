"""Image as a Corral service (see corral.core.services)."""

from __future__ import annotations

from typing import Any

from oslo_config import cfg

from corral.core.migrations import MigrationTree
from corral.image import conf as image_conf

NAME = "image"
PREFIX = "/image"
# Image data is streamed, never buffered whole (see corral.image.api.handlers.data).
STREAMED_BODIES = (("PUT", r"/v2(\.\d+)?/images/[^/]+/(file|stage)"),)


def register_opts(conf: cfg.ConfigOpts) -> None:
    image_conf.register_opts(conf)


def migration_targets(conf: cfg.ConfigOpts) -> list[tuple[MigrationTree, str]]:
    from corral.image.db.schema import TREE

    return [(TREE, image_conf.database_url(conf))]


def make_app(conf: cfg.ConfigOpts) -> Any:
    from corral.image.api.app import make_app as build

    return build(conf)


def start_background(conf: cfg.ConfigOpts, role: str) -> list[Any]:
    # Imports and the recovery of interrupted uploads run in the API processes.
    return []
