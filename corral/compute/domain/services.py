"""Compute services across cells (``GET /os-services`` and host status).

From 2.69, a cell that does not answer contributes one minimal record per
host mapped to it: ``{"binary": "nova-compute", "host", "status":
"UNKNOWN"}``; before 2.69 it is left out.  Services are listed cell by
cell in cell-mapping order, so a down cell's records sit where its full
records would.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Any

from corral.core import errors
from corral.core.db import Database
from corral.compute.cells import CellMapping, is_failure
from corral.compute.db import api_queries as q
from corral.compute.db import cell_queries as cq
from corral.compute.domain.scheduling import COMPUTE_BINARY

# Services the API itself would register upstream; never listed.
HIDDEN_BINARIES = frozenset({"nova-osapi_compute", "nova-metadata"})


@dataclass
class ServiceEntry:
    cell: CellMapping
    # A full services row, or None for a minimal record of a down cell.
    row: dict[str, Any] | None
    host: str
    binary: str


def is_up(conf: Any, service: dict[str, Any], now: datetime.datetime | None = None) -> bool:
    if service["forced_down"]:
        return False
    now = now or q.utcnow()
    seen = service["last_seen_up"] or service["updated_at"] or service["created_at"]
    return seen is not None and abs((now - seen).total_seconds()) <= conf.compute.service_down_time


def list_services(state: Any, *, host: str | None, binary: str | None, minimal_for_down: bool) -> list[ServiceEntry]:
    cells = state.cells.mappings()

    def work(_cell: CellMapping, database: Database) -> list[dict[str, Any]]:
        with database.read() as conn:
            return cq.list_services(conn, host=host, binary=binary)

    answers = state.cells.scatter_gather(cells, work)
    down = [cell for cell in cells if is_failure(answers[cell.uuid])]
    hosts_by_cell: dict[int, list[str]] = {}
    if down and minimal_for_down:
        with state.api_db.read() as conn:
            for row in q.host_mappings(conn, [cell.id for cell in down]):
                hosts_by_cell.setdefault(row.cell_id, []).append(row.host)
    entries: list[ServiceEntry] = []
    for cell in cells:
        answer = answers[cell.uuid]
        if is_failure(answer):
            if not minimal_for_down or (binary is not None and binary != COMPUTE_BINARY):
                continue
            for mapped_host in hosts_by_cell.get(cell.id, []):
                if host is None or mapped_host == host:
                    entries.append(ServiceEntry(cell, None, mapped_host, COMPUTE_BINARY))
            continue
        for row in answer:  # type: ignore[union-attr]
            if row["binary"] not in HIDDEN_BINARIES:
                entries.append(ServiceEntry(cell, row, row["host"], row["binary"]))
    return entries


def find_service(state: Any, *, uuid: str | None = None, host: str | None = None,
                 binary: str | None = None) -> tuple[CellMapping, dict[str, Any]]:
    """One service by uuid, or by host and binary, in whichever cell holds it."""
    cells = state.cells.mappings()

    def work(_cell: CellMapping, database: Database) -> dict[str, Any] | None:
        with database.read() as conn:
            return cq.get_service(conn, uuid=uuid, host=host, binary=binary)

    answers = state.cells.scatter_gather(cells, work)
    for cell in cells:
        answer = answers[cell.uuid]
        if not is_failure(answer) and answer is not None:
            return cell, answer  # type: ignore[return-value]
    if uuid is not None:
        raise errors.NotFound(f"Service {uuid} could not be found.")
    raise errors.NotFound(f"Service {binary} on host {host} could not be found.")


def update_service(state: Any, cell: CellMapping, service_id: int, **values: Any) -> dict[str, Any]:
    def work(_cell: CellMapping, database: Database) -> dict[str, Any]:
        def write(conn: Any) -> dict[str, Any]:
            cq.update_service(conn, service_id, **values)
            found = cq.get_service(conn, service_id=service_id)
            assert found is not None
            return found

        return database.write(write)

    return state.cells.run_in_cell(cell, work)


def host_statuses(state: Any, hosts_by_cell: dict[str, set[str]]) -> dict[tuple[str, str], str]:
    """Upstream's host_status for (cell uuid, host) pairs (``get_instance_host_status``).

    ``DOWN`` only for a service forced down (an operator said so);
    ``MAINTENANCE`` for a disabled one; ``UNKNOWN`` for one whose heartbeat
    is older than ``service_down_time`` (the host may well run its servers:
    nobody knows), or whose cell does not answer; ``""`` when the host has
    no compute service.
    """
    cells = [cell for cell in state.cells.mappings() if cell.uuid in hosts_by_cell]
    if not cells:
        return {}

    def work(_cell: CellMapping, database: Database) -> list[dict[str, Any]]:
        with database.read() as conn:
            return cq.list_services(conn, binary=COMPUTE_BINARY)

    answers = state.cells.scatter_gather(cells, work)
    now = q.utcnow()
    found: dict[tuple[str, str], str] = {}
    for cell in cells:
        answer = answers[cell.uuid]
        if is_failure(answer):
            found.update({(cell.uuid, host): "UNKNOWN" for host in hosts_by_cell[cell.uuid]})
            continue
        by_host = {row["host"]: row for row in answer}  # type: ignore[union-attr]
        for host in hosts_by_cell[cell.uuid]:
            found[(cell.uuid, host)] = _host_status(state.conf, by_host.get(host), now)
    return found


def _host_status(conf: Any, service: dict[str, Any] | None, now: datetime.datetime) -> str:
    if service is None:
        return ""
    if service["forced_down"]:
        return "DOWN"
    if service["disabled"]:
        return "MAINTENANCE"
    return "UP" if is_up(conf, service, now) else "UNKNOWN"
