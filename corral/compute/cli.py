"""``corral compute ...``: cell management, database sync and online data migrations."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import click
from oslo_config import cfg

from corral.core.db import Database, database_from_conf
from corral.compute import conf as compute_conf
from corral.compute.domain import cell_admin
from corral.compute.domain.cell_admin import CellAdminError


def _conf_options(function):  # type: ignore[no-untyped-def]
    from corral.cli import conf_options

    return conf_options(function)


def _load(config_files: Sequence[str], data_dir: str | None) -> cfg.ConfigOpts:
    from corral.cli import load_conf

    return load_conf(config_files, data_dir)


@contextmanager
def _api_db(config_files: Sequence[str], data_dir: str | None) -> Iterator[tuple[cfg.ConfigOpts, Database]]:
    conf = _load(config_files, data_dir)
    api_db = database_from_conf(conf, compute_conf.api_database_url(conf), "api_database")
    try:
        yield conf, api_db
    except CellAdminError as error:
        click.echo(str(error), err=True)
        sys.exit(error.exit_code)
    finally:
        api_db.dispose()


def _table(headers: list[str], rows: list[list[object]]) -> str:
    cells = [[str(value) for value in row] for row in rows]
    widths = [max([len(h)] + [len(row[i]) for row in cells]) for i, h in enumerate(headers)]
    line = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
    out = [line, "| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths)) + " |", line]
    out += ["| " + " | ".join(v.ljust(w) for v, w in zip(row, widths)) + " |" for row in cells]
    out.append(line)
    return "\n".join(out)


def _mask(url: str) -> str:
    # Hide passwords: scheme://user:****@host/...
    if "://" in url and "@" in url.split("://", 1)[1]:
        scheme, rest = url.split("://", 1)
        credentials, host = rest.split("@", 1)
        user = credentials.split(":", 1)[0]
        return f"{scheme}://{user}:****@{host}"
    return url


@click.group()
def cli() -> None:
    """Compute: cells, databases and data migrations."""


# ------------------------------------------------------------------ cell_v2


@cli.group("cell_v2")
def cell_v2() -> None:
    """Manage cells (as nova-manage cell_v2 does)."""


@cell_v2.command("simple-cell-setup")
@_conf_options
def simple_cell_setup(config_files: Sequence[str], data_dir: str | None) -> None:
    """Map cell0, create cell1 from [database] connection and discover its hosts."""
    with _api_db(config_files, data_dir) as (conf, api_db):
        cell_admin.map_cell0(api_db, compute_conf.cell0_database_url(conf))
        url = compute_conf.cell1_database_url(conf)
        if cell_admin.cell_for_database(api_db, url) is None:
            cell_admin.create_cell(api_db, name="cell1", database_connection=url, cell_uuid=cell_admin.DEFAULT_CELL1_UUID)
        cell_admin.discover_hosts(conf, api_db)
        click.echo("Cell0 and cell1 are mapped.")


@cell_v2.command("map-cell0")
@click.option("--database_connection", "--database-connection", "database_connection", default=None)
@_conf_options
def map_cell0(database_connection: str | None, config_files: Sequence[str], data_dir: str | None) -> None:
    """Create the cell0 mapping (instances that could not be scheduled)."""
    with _api_db(config_files, data_dir) as (conf, api_db):
        url = database_connection or compute_conf.cell0_database_url(conf)
        _cell, created = cell_admin.map_cell0(api_db, url)
        if not created:
            click.echo("Cell0 is already setup")


@cell_v2.command("create-cell")
@click.option("--name", default=None)
@click.option("--database_connection", "--database-connection", "database_connection", default=None)
@click.option("--transport-url", "--transport_url", "transport_url", default=cell_admin.DEFAULT_TRANSPORT_URL)
@click.option("--disabled", is_flag=True, default=False)
@click.option("--no-migrate", is_flag=True, default=False, help="Do not create the cell database's tables.")
@click.option("--verbose", is_flag=True, default=False)
@_conf_options
def create_cell(name: str | None, database_connection: str | None, transport_url: str, disabled: bool,
                no_migrate: bool, verbose: bool, config_files: Sequence[str], data_dir: str | None) -> None:
    """Create a cell mapping (and its database's tables)."""
    with _api_db(config_files, data_dir) as (conf, api_db):
        url = database_connection or compute_conf.cell1_database_url(conf)
        cell = cell_admin.create_cell(
            api_db, name=name, database_connection=url, transport_url=transport_url, disabled=disabled,
            migrate=not no_migrate,
        )
        click.echo(cell.uuid)


@cell_v2.command("update-cell")
@click.option("--cell_uuid", "--cell-uuid", "cell_uuid", required=True)
@click.option("--name", default=None)
@click.option("--database_connection", "--database-connection", "database_connection", default=None)
@click.option("--transport-url", "--transport_url", "transport_url", default=None)
@click.option("--disable", is_flag=True, default=False)
@click.option("--enable", is_flag=True, default=False)
@_conf_options
def update_cell(cell_uuid: str, name: str | None, database_connection: str | None, transport_url: str | None,
                disable: bool, enable: bool, config_files: Sequence[str], data_dir: str | None) -> None:
    """Change a cell's name, database, transport URL or enabled state."""
    if disable and enable:
        raise click.UsageError("Cell cannot be disabled and enabled at the same time.")
    with _api_db(config_files, data_dir) as (_conf, api_db):
        disabled = True if disable else (False if enable else None)
        cell_admin.update_cell(
            api_db, cell_uuid, name=name, database_connection=database_connection, transport_url=transport_url,
            disabled=disabled,
        )


@cell_v2.command("list-cells")
@click.option("--verbose", is_flag=True, default=False, help="Show database URLs unmasked.")
@_conf_options
def list_cells(verbose: bool, config_files: Sequence[str], data_dir: str | None) -> None:
    """List cell mappings."""
    with _api_db(config_files, data_dir) as (_conf, api_db):
        cells = sorted(cell_admin.list_cells(api_db), key=lambda c: c.name or "")
        rows = [
            [cell.name or "", cell.uuid, cell.transport_url if verbose else _mask(cell.transport_url),
             cell.database_connection if verbose else _mask(cell.database_connection), cell.disabled]
            for cell in cells
        ]
        click.echo(_table(["Name", "UUID", "Transport URL", "Database Connection", "Disabled"], rows))


@cell_v2.command("delete-cell")
@click.option("--cell_uuid", "--cell-uuid", "cell_uuid", required=True)
@click.option("--force", is_flag=True, default=False, help="Also delete the cell's host and instance mappings.")
@_conf_options
def delete_cell(cell_uuid: str, force: bool, config_files: Sequence[str], data_dir: str | None) -> None:
    """Delete an empty cell mapping (exit 1: not found, 2: hosts mapped, 3: instances mapped)."""
    with _api_db(config_files, data_dir) as (conf, api_db):
        cell_admin.delete_cell(conf, api_db, cell_uuid, force=force)


@cell_v2.command("discover-hosts")
@click.option("--cell_uuid", "--cell-uuid", "cell_uuid", default=None)
@click.option("--verbose", is_flag=True, default=False)
@_conf_options
def discover_hosts(cell_uuid: str | None, verbose: bool, config_files: Sequence[str], data_dir: str | None) -> None:
    """Map compute hosts found in the cells' databases."""
    with _api_db(config_files, data_dir) as (conf, api_db):
        found = cell_admin.discover_hosts(conf, api_db, cell_uuid)
        if verbose:
            for item in found:
                click.echo(f"Checking host mapping for compute host '{item.host}': creating mapping to cell "
                           f"{item.cell.uuid}")
            click.echo(f"Found {len(found)} unmapped computes.")


@cell_v2.command("list-hosts")
@click.option("--cell_uuid", "--cell-uuid", "cell_uuid", default=None)
@_conf_options
def list_hosts(cell_uuid: str | None, config_files: Sequence[str], data_dir: str | None) -> None:
    """List host mappings."""
    from corral.compute.db import api_queries as q

    with _api_db(config_files, data_dir) as (_conf, api_db):
        cells = {cell.id: cell for cell in cell_admin.list_cells(api_db)}
        with api_db.read() as conn:
            hosts = q.host_mappings(conn)
        rows = [[cells[h.cell_id].name or "", h.cell_uuid, h.host] for h in hosts
                if cell_uuid is None or h.cell_uuid == cell_uuid]
        click.echo(_table(["Cell Name", "Cell UUID", "Hostname"], rows))


# ------------------------------------------------------------------- db


@cli.group("db")
def db() -> None:
    """Compute databases."""


@db.command("sync")
@_conf_options
def db_sync(config_files: Sequence[str], data_dir: str | None) -> None:
    """Upgrade the API database and every mapped cell's database."""
    from corral.core import migrations
    from corral.core.db import create_engine
    from corral.compute.db.schema import API_TREE

    conf = _load(config_files, data_dir)
    engine = create_engine(compute_conf.api_database_url(conf))
    try:
        migrations.upgrade(engine, API_TREE)
    finally:
        engine.dispose()
    with _api_db(config_files, data_dir) as (_conf, api_db):
        for cell in cell_admin.list_cells(api_db):
            cell_admin.migrate_cell_database(cell.database_connection)
    click.echo("Compute databases are up to date.")


@cli.command("online-data-migrations")
@click.option("--max-count", "max_count", type=int, default=None, help="Rows to migrate in this run.")
@_conf_options
def online_data_migrations(max_count: int | None, config_files: Sequence[str], data_dir: str | None) -> None:
    """Fill in data older rows lack (exit 0: done, 1: more to do, 2: a migration failed)."""
    from corral.compute.cells import CellRegistry
    from corral.compute.domain.online_migrations import run_online_migrations

    if max_count is not None and max_count < 1:
        click.echo("Must supply a positive value for max_count.", err=True)
        sys.exit(127)
    with _api_db(config_files, data_dir) as (conf, api_db):
        cells = CellRegistry(conf, api_db)
        try:
            run = run_online_migrations(api_db, cells, max_count)
        finally:
            cells.close()
        for name, error in run.errors.items():
            click.echo(f"Error attempting to run {name}: {error}", err=True)
        rows = [[name, found, done] for name, (found, done) in run.totals.items()]
        click.echo(_table(["Migration", "Total Needed", "Completed"], rows))
        for name, (found, done) in run.totals.items():
            if found:
                click.echo(f"{found} rows matched query {name}, {done} migrated")
        if run.errors:
            click.echo("Some migrations failed unexpectedly. Check log for details.")
        sys.exit(run.exit_code)
