"""``corral placement ...``: Placement's maintenance commands."""

from __future__ import annotations

import sys
from collections.abc import Sequence

import click

from corral.cli import conf_options, load_conf


@click.group(name="placement")
def cli() -> None:
    """Placement maintenance commands."""


@cli.command("online-data-migrations")
@click.option("--max-count", type=click.IntRange(1), default=None,
              help="Migrate at most this many records (default: all, in batches).")
@conf_options
def online_data_migrations(max_count: int | None, config_files: Sequence[str], data_dir: str | None) -> None:
    """Create consumer records for allocations written before consumers existed.

    Exit status: 0 when nothing is left to migrate, 1 when --max-count
    stopped before the end (run again).
    """
    from corral.placement import conf as placement_conf
    from corral.core.db import database_from_conf
    from corral.placement.db.online_migrations import create_incomplete_consumers

    conf = load_conf(config_files, data_dir)
    db = database_from_conf(conf, placement_conf.database_url(conf), "placement_database")
    remaining = max_count
    total = 0
    try:
        while remaining is None or remaining > 0:
            batch = 50 if remaining is None else min(50, remaining)
            found, migrated = create_incomplete_consumers(
                db, conf.placement.incomplete_consumer_project_id, conf.placement.incomplete_consumer_user_id, batch
            )
            total += migrated
            if remaining is not None:
                remaining -= found
            if found < batch:
                click.echo(f"create_incomplete_consumers: {total} migrated; nothing left.")
                sys.exit(0)
        click.echo(f"create_incomplete_consumers: {total} migrated; more remain, run again.")
        sys.exit(1)
    finally:
        db.dispose()
