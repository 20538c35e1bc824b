"""Placement's configuration options (upstream names)."""

from __future__ import annotations

from oslo_config import cfg

from corral.core.config import database_opts, sqlite_url

DATABASE_OPTS = database_opts(
    "Database URL for Placement; "
    "an embedded SQLite file under state_path when unset."
)

PLACEMENT_OPTS = [
    cfg.StrOpt(
        "incomplete_consumer_project_id",
        default="00000000-0000-0000-0000-000000000000",
        help="Project recorded for consumers created from allocations that predate consumer records.",
    ),
    cfg.StrOpt(
        "incomplete_consumer_user_id",
        default="00000000-0000-0000-0000-000000000000",
        help="User recorded for consumers created from allocations that predate consumer records.",
    ),
    cfg.BoolOpt(
        "randomize_allocation_candidates",
        default=False,
        help="With a limit on GET /allocation_candidates, return a random selection "
        "instead of the first candidates found.",
    ),
    cfg.BoolOpt(
        "refuse_inventory_below_usage",
        default=True,
        help="Refuse (409 placement.inventory.inuse) inventory changes that would leave a "
        "resource class with less capacity than is already allocated. Upstream Placement "
        "accepts such changes; set False for that behaviour.",
    ),
    cfg.IntOpt(
        "allocation_conflict_retry_count",
        default=10,
        min=0,
        help="Times an allocation write is retried after a concurrent provider update.",
    ),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_opts(DATABASE_OPTS, group="placement_database")
    conf.register_opts(PLACEMENT_OPTS, group="placement")


def database_url(conf: cfg.ConfigOpts) -> str:
    return conf.placement_database.connection or sqlite_url(conf, "placement.sqlite")
