"""Operators' cell management, in the spirit of ``nova-manage cell_v2``.

Every function returns data or raises :class:`CellAdminError` carrying the
exit code the command line reports; printing is the CLI's job.
"""

from __future__ import annotations

import uuid as uuidlib
from dataclasses import dataclass
from typing import Any

from oslo_config import cfg
from sqlalchemy.engine import Connection

from corral.core import migrations
from corral.core.db import Database, create_engine, is_duplicate
from corral.compute import conf as compute_conf
from corral.compute.cells import CELL0_NAME, CELL0_UUID, CellMapping, load_cell_mappings
from corral.compute.db import api_queries as q
from corral.compute.db import cell_queries as cq
from corral.compute.db.schema import CELL_TREE

DEFAULT_TRANSPORT_URL = "none:///"
# cell1 made by simple-cell-setup / auto-mapping gets a fixed uuid so that
# several API workers starting together cannot map it twice.
DEFAULT_CELL1_UUID = str(uuidlib.uuid5(uuidlib.NAMESPACE_URL, "corral:compute:cell1"))

# Exit codes, as nova-manage cell_v2 reports them.
EXIT_NOT_FOUND = 1
EXIT_HAS_HOSTS = 2
EXIT_HAS_INSTANCES = 3
EXIT_DUPLICATE = 2
EXIT_CELL0_MISSING = 1


class CellAdminError(Exception):
    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass(frozen=True)
class DiscoveredHost:
    host: str
    cell: CellMapping


def migrate_cell_database(url: str) -> None:
    engine = create_engine(url)
    try:
        migrations.upgrade(engine, CELL_TREE)
    finally:
        engine.dispose()


def list_cells(api_db: Database) -> list[CellMapping]:
    with api_db.read() as conn:
        return load_cell_mappings(conn)


def _find(api_db: Database, cell_uuid: str) -> CellMapping:
    for cell in list_cells(api_db):
        if cell.uuid == cell_uuid:
            return cell
    raise CellAdminError(f"Cell with uuid {cell_uuid} was not found.", EXIT_NOT_FOUND)


def create_cell(
    api_db: Database,
    *,
    name: str | None,
    database_connection: str,
    transport_url: str = DEFAULT_TRANSPORT_URL,
    disabled: bool = False,
    cell_uuid: str | None = None,
    migrate: bool = True,
) -> CellMapping:
    if migrate:
        migrate_cell_database(database_connection)
    new_uuid = cell_uuid or str(uuidlib.uuid4())

    def work(conn: Connection) -> None:
        for existing in load_cell_mappings(conn):
            if existing.database_connection == database_connection and existing.transport_url == transport_url:
                raise CellAdminError(
                    "The specified transport_url and/or database_connection combination already exists "
                    f"for another cell with uuid {existing.uuid}.",
                    EXIT_DUPLICATE,
                )
        q.create_cell_mapping(
            conn, uuid=new_uuid, name=name, database_connection=database_connection,
            transport_url=transport_url, disabled=disabled,
        )

    api_db.write(work)
    return _find(api_db, new_uuid)


def map_cell0(api_db: Database, database_connection: str, *, migrate: bool = True) -> tuple[CellMapping, bool]:
    """cell0's mapping and whether this call created it."""
    for cell in list_cells(api_db):
        if cell.is_cell0:
            return cell, False
    if migrate:
        migrate_cell_database(database_connection)
    try:
        api_db.write(
            lambda conn: q.create_cell_mapping(
                conn, uuid=CELL0_UUID, name=CELL0_NAME, database_connection=database_connection,
                transport_url=DEFAULT_TRANSPORT_URL,
            )
        )
    except Exception as error:
        if not is_duplicate(error):
            raise
        return _find(api_db, CELL0_UUID), False
    return _find(api_db, CELL0_UUID), True


def update_cell(api_db: Database, cell_uuid: str, **values: Any) -> CellMapping:
    _find(api_db, cell_uuid)
    api_db.write(lambda conn: q.update_cell_mapping(conn, cell_uuid, **{k: v for k, v in values.items() if v is not None}))
    return _find(api_db, cell_uuid)


def delete_cell(conf: cfg.ConfigOpts, api_db: Database, cell_uuid: str, *, force: bool = False) -> None:
    cell = _find(api_db, cell_uuid)

    def work(conn: Connection) -> None:
        hosts = q.host_mappings(conn, [cell.id])
        if hosts and not force:
            raise CellAdminError(
                "There are existing hosts mapped to cell with uuid " f"{cell_uuid}.", EXIT_HAS_HOSTS
            )
        if q.count_mappings_in_cell(conn, cell.id) and not force:
            raise CellAdminError(
                f"There are instance mappings to cell with uuid {cell_uuid}.", EXIT_HAS_INSTANCES
            )
        q.delete_host_mappings(conn, cell.id)
        # DELETE FROM instance_mappings WHERE cell_id = :id (only with --force)
        from corral.compute.db import api_tables as t

        conn.execute(t.instance_mappings.delete().where(t.instance_mappings.c.cell_id == cell.id))
        q.delete_cell_mapping(conn, cell.id)

    api_db.write(work)


def discover_hosts(conf: cfg.ConfigOpts, api_db: Database, cell_uuid: str | None = None) -> list[DiscoveredHost]:
    """Map every compute host found in the cells' databases that has no host mapping yet."""
    cells = [cell for cell in list_cells(api_db) if not cell.is_cell0]
    if cell_uuid is not None:
        cells = [cell for cell in cells if cell.uuid == cell_uuid]
        if not cells:
            raise CellAdminError(f"Cell with uuid {cell_uuid} was not found.", EXIT_NOT_FOUND)
    found: list[DiscoveredHost] = []
    for cell in cells:
        database = Database.from_url(cell.database_connection)
        try:
            with database.read() as conn:
                hosts = cq.compute_hosts(conn)
        finally:
            database.dispose()
        for host in hosts:
            if map_host(api_db, cell, host):
                found.append(DiscoveredHost(host, cell))
    return found


def map_host(api_db: Database, cell: CellMapping, host: str) -> bool:
    """Map ``host`` to ``cell`` unless it is mapped already; True when a mapping was made."""

    def work(conn: Connection) -> bool:
        if q.host_mapping(conn, host) is not None:
            return False
        q.create_host_mapping(conn, cell.id, host)
        return True

    try:
        return bool(api_db.write(work))
    except Exception as error:
        if is_duplicate(error):
            return False
        raise


def ensure_default_cells(conf: cfg.ConfigOpts, api_db: Database, *, migrate: bool) -> None:
    """Map cell0 and cell1 from the configuration when no cell is mapped yet."""
    if list_cells(api_db):
        return
    map_cell0(api_db, compute_conf.cell0_database_url(conf), migrate=migrate)
    try:
        create_cell(
            api_db, name="cell1", database_connection=compute_conf.cell1_database_url(conf),
            cell_uuid=DEFAULT_CELL1_UUID, migrate=migrate,
        )
    except CellAdminError:
        pass
    except Exception as error:
        if not is_duplicate(error):
            raise


def cell_for_database(api_db: Database, url: str) -> CellMapping | None:
    for cell in list_cells(api_db):
        if cell.database_connection == url:
            return cell
    return None
