"""Listing instances across cells (``GET /servers`` and ``/servers/detail``).

Every cell (cell0 included) is asked in one scatter-gather with the same
filters, sort and limit; the answers are merged in the requested order.
A cell that does not answer is handled one of three ways:

* ``cell_down_support`` (microversion 2.69 and no filters, sorting or
  paging): its live instance mappings become minimal records, placed
  before everything else;
* otherwise, with ``[api] list_records_by_skipping_down_cells``: it is
  left out;
* otherwise the request fails (:class:`~corral.compute.api.errors.CellDown`).

A marker is looked up in its own cell directly; a marker in a cell that
cannot be reached fails the request whatever the configuration.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from corral.core import errors
from corral.compute.domain.exceptions import CellDatabaseError, CellDown
from corral.compute.cells import DID_NOT_RESPOND, CellMapping, CellRegistry, is_failure
from corral.core.db import Database
from corral.compute.db import api_queries as q
from corral.compute.db import cell_queries as cq
from corral.compute.db import server_records as records


@dataclass
class ListRequest:
    filters: cq.InstanceFilters
    # [(column, ascending)]
    sort: list[tuple[str, bool]]
    limit: int
    marker: str | None = None
    cell_down_support: bool = False
    # Project whose down-cell mappings become minimal records; None: every project.
    minimal_project_id: str | None = None
    # Build requests (servers not in a cell yet) are listed only for plain listings.
    include_build_requests: bool = True
    # Read each instance's metadata too (detail listings).
    with_metadata: bool = False


# Keys added to each listed instance: the cell it came from, its metadata,
# and (detail listings) its tags and newest fault.
CELL_KEY = "_cell_uuid"
METADATA_KEY = "_metadata"
TAGS_KEY = "_tags"
FAULT_KEY = "_fault"


@dataclass
class ListResult:
    # instance_mappings rows of down cells (minimal records), in order
    minimal: list[Any] = field(default_factory=list)
    # build request instances, then merged instances from the cells that answered
    instances: list[dict[str, Any]] = field(default_factory=list)
    down_cells: list[CellMapping] = field(default_factory=list)


def _compare(sort: Sequence[tuple[str, bool]], left: dict[str, Any], right: dict[str, Any]) -> int:
    # The same order the cell queries use: NULLs first ascending, last
    # descending, ties broken by uuid in the direction of the last key.
    keys = list(sort) + [("uuid", sort[-1][1] if sort else False)]
    for column, ascending in keys:
        a, b = left.get(column), right.get(column)
        if a == b:
            continue
        if a is None:
            result = -1
        elif b is None:
            result = 1
        else:
            result = -1 if a < b else 1
        return result if ascending else -result
    return 0


def merge_sorted(sort: Sequence[tuple[str, bool]], batches: Sequence[list[dict[str, Any]]],
                 limit: int) -> list[dict[str, Any]]:
    rows = [row for batch in batches for row in batch]
    rows.sort(key=functools.cmp_to_key(functools.partial(_compare, sort)))
    return rows[:limit]


def _marker_instance(api_db: Database, cells: CellRegistry, marker: str) -> dict[str, Any]:
    with api_db.read() as conn:
        mapping = q.instance_mapping(conn, marker)
    if mapping is None or mapping.cell_id is None:
        raise errors.BadRequest(f"marker [{marker}] not found")
    cell = cells.by_id(mapping.cell_id)

    def read_marker(_cell: CellMapping, database: Database) -> dict[str, Any] | None:
        with database.read() as conn:
            return cq.get_instance(conn, marker, read_deleted=True)

    try:
        instance = cells.run_in_cell(cell, read_marker)
    except Exception as error:
        # Upstream reads the marker straight from its cell: a DB error, 500.
        raise CellDatabaseError(f"marker lookup in cell {cell.identity} failed: {error}") from error
    if instance is None:
        raise errors.BadRequest(f"marker [{marker}] not found")
    return instance


def list_instances(api_db: Database, cells: CellRegistry, request: ListRequest, *, skip_down_cells: bool) -> ListResult:
    marker = _marker_instance(api_db, cells, request.marker) if request.marker else None
    all_cells = cells.mappings()

    def work(cell: CellMapping, database: Database) -> list[dict[str, Any]]:
        with database.read() as conn:
            rows = cq.list_instances(conn, request.filters, request.sort, request.limit, marker)
            uuids = [row["uuid"] for row in rows]
            metadata = cq.instance_metadata(conn, uuids) if request.with_metadata else {}
            tags = records.tags_of(conn, uuids) if request.with_metadata else {}
            faults = records.latest_faults(conn, uuids) if request.with_metadata else {}
        for row in rows:
            row[CELL_KEY] = cell.uuid
            row[METADATA_KEY] = metadata.get(row["uuid"], {})
            row[TAGS_KEY] = tags.get(row["uuid"], [])
            row[FAULT_KEY] = faults.get(row["uuid"])
        return rows

    answers = cells.scatter_gather(all_cells, work)
    failed = [cell for cell in all_cells if is_failure(answers[cell.uuid]) and answers[cell.uuid] is not DID_NOT_RESPOND]
    timed_out = [cell for cell in all_cells if answers[cell.uuid] is DID_NOT_RESPOND]
    down = failed + timed_out
    result = ListResult(down_cells=down)
    if down and not request.cell_down_support and not skip_down_cells:
        raise CellDown(
            f"Cell {down[0].uuid} is not responding but configuration indicates that we should fail."
        )
    if request.include_build_requests and marker is None:
        with api_db.read() as conn:
            for build in q.build_requests(conn, request.filters.project_id):
                build[CELL_KEY] = None
                build[METADATA_KEY] = build.pop("metadata", {})
                build[TAGS_KEY] = build.pop("tags", [])
                result.instances.append(build)
    batches = [answers[cell.uuid] for cell in all_cells if not is_failure(answers[cell.uuid])]
    merged = merge_sorted(request.sort, batches, request.limit)  # type: ignore[arg-type]
    result.instances.extend(merged)
    result.instances = result.instances[: request.limit]
    if down and request.cell_down_support:
        room = request.limit - len(result.instances)
        with api_db.read() as conn:
            for cell in down:
                if room <= 0:
                    break
                rows = q.live_mappings_in_cells(conn, [cell.id], request.minimal_project_id, room)
                result.minimal.extend(rows)
                room -= len(rows)
    return result
