"""Online data migrations: fill in data older rows lack, in batches, while serving.

``populate_queued_for_delete`` sets ``instance_mappings.queued_for_delete``
where it is NULL: True for instances that are deleted or soft-deleted in
their cell, False for the rest (including mappings whose instance row is
missing).  A cell that cannot be reached makes the migration fail; the
command line then exits 2 and a later run finishes the job.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from corral.core.db import Database
from corral.compute.cells import CellRegistry
from corral.compute.db import api_queries as q
from corral.compute.db import cell_queries as cq

# name -> function(api_db, cells, max_count) -> (found, done)
Migration = Callable[[Database, CellRegistry, int], tuple[int, int]]


def populate_queued_for_delete(api_db: Database, cells: CellRegistry, max_count: int) -> tuple[int, int]:
    processed = 0
    for cell in cells.mappings():
        if processed >= max_count:
            break
        with api_db.read() as conn:
            mappings = q.unmigrated_mappings(conn, cell.id, max_count - processed)
        if not mappings:
            continue
        uuids = [row.instance_uuid for row in mappings]
        gone = cells.run_in_cell(cell, lambda _cell, db: _deleted_in(db, uuids))

        def work(conn: object) -> None:
            q.set_queued_for_delete(conn, [u for u in uuids if u in gone], True)  # type: ignore[arg-type]
            q.set_queued_for_delete(conn, [u for u in uuids if u not in gone], False)  # type: ignore[arg-type]

        api_db.write(work)
        processed += len(uuids)
    return processed, processed


def _deleted_in(database: Database, uuids: list[str]) -> set[str]:
    with database.read() as conn:
        return cq.deleted_or_soft_deleted(conn, uuids)


MIGRATIONS: dict[str, Migration] = {
    "populate_queued_for_delete": populate_queued_for_delete,
}


@dataclass
class MigrationRun:
    # name -> (total found, total completed)
    totals: dict[str, tuple[int, int]]
    errors: dict[str, BaseException]
    exit_code: int


def run_online_migrations(api_db: Database, cells: CellRegistry, max_count: int | None) -> MigrationRun:
    """Exit codes as upstream: 0 done, 1 more to do (with max_count), 2 a migration failed."""
    unlimited = max_count is None
    batch = 50 if max_count is None else max_count
    totals: dict[str, tuple[int, int]] = {name: (0, 0) for name in MIGRATIONS}
    errors: dict[str, BaseException] = {}
    while True:
        ran = 0
        for name, migration in MIGRATIONS.items():
            if name in errors:
                continue
            try:
                found, done = migration(api_db, cells, batch)
            except Exception as error:  # recorded and reported, never fatal
                errors[name] = error
                continue
            totals[name] = (totals[name][0] + found, totals[name][1] + done)
            ran += done
        if not unlimited or ran == 0:
            break
    if errors:
        code = 2
    else:
        code = 1 if ran and not unlimited else 0
    return MigrationRun(totals, errors, code)
