"""Usage of projects over a period (upstream's ``simple_tenant_usage.py``).

Every cell (cell0 included) is asked, in mapping order, for the instances
that ran during the period: launched before its end and not terminated
before its start, deleted ones included.  Each cell's instances come by
project then uuid; cells are not merged, so a page may go back in that
order at a cell boundary, as upstream's do.  A marker is looked for cell
by cell; a cell that does not answer is left out.
"""

from __future__ import annotations

import datetime
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from corral.compute.cells import CellMapping, is_failure
from corral.compute.db import cell_queries as cq
from corral.core.db import Database


class MarkerNotFound(Exception):
    pass


@dataclass
class Period:
    start: datetime.datetime
    stop: datetime.datetime


def hours_for(instance: dict[str, Any], period: Period) -> float:
    launched, terminated = instance.get("launched_at"), instance.get("terminated_at")
    if terminated is not None and terminated < period.start:
        return 0
    if launched is not None and launched > period.stop:
        return 0
    if launched is None:
        return 0
    start = max(launched, period.start)
    stop = min(period.stop, terminated) if terminated is not None else period.stop
    return (stop - start).total_seconds() / 3600.0


def _instances(state: Any, period: Period, project_id: str | None, limit: int | None,
               marker: str | None) -> list[dict[str, Any]]:
    cells = state.cells.mappings()

    def work(_cell: CellMapping, database: Database) -> tuple[list[dict[str, Any]] | None, list[dict[str, Any]]]:
        """(the instances after the marker, None if it is not here; the instances from the start)."""
        with database.read() as conn:
            whole = cq.active_in_window(conn, period.start, period.stop, project_id, limit)
            if marker is None:
                return whole, whole
            after = cq.get_instance(conn, marker, read_deleted=True)
            if after is None:
                return None, whole
            return cq.active_in_window(conn, period.start, period.stop, project_id, limit, after), whole

    answers = state.cells.scatter_gather(cells, work)
    found: list[dict[str, Any]] = []
    looking_for_marker = marker is not None
    for cell in cells:
        answer = answers[cell.uuid]
        if is_failure(answer):
            continue
        after_marker, whole = answer  # type: ignore[misc]
        if looking_for_marker:
            if after_marker is None:
                continue
            instances, looking_for_marker = after_marker, False
        else:
            instances = whole
        instances = instances if limit is None else instances[:limit]
        found.extend(instances)
        if limit is not None:
            limit -= len(instances)
            if limit <= 0:
                break
    if looking_for_marker:
        raise MarkerNotFound(marker)
    return found


def tenant_usages(state: Any, period: Period, *, project_id: str | None = None, detailed: bool,
                  limit: int | None, marker: str | None,
                  now: datetime.datetime) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(one summary per project in order of appearance, every server usage)."""
    summaries: OrderedDict[str, dict[str, Any]] = OrderedDict()
    server_usages = []
    for instance in _instances(state, period, project_id, limit, marker):
        flavor = instance["flavor"]
        info: dict[str, Any] = {
            "hours": hours_for(instance, period),
            "flavor": flavor.get("name") or "",
            "instance_id": instance["uuid"],
            "name": instance["display_name"],
            "tenant_id": instance["project_id"],
            "memory_mb": flavor["memory_mb"],
            "local_gb": flavor["root_gb"] + flavor["ephemeral_gb"],
            "vcpus": flavor["vcpus"],
            "started_at": instance["launched_at"],
            "ended_at": instance["terminated_at"],
        }
        info["state"] = "terminated" if info["ended_at"] else instance["vm_state"]
        ended = info["ended_at"] if info["state"] == "terminated" else now
        info["uptime"] = int((ended - info["started_at"]).total_seconds())
        summary = summaries.get(info["tenant_id"])
        if summary is None:
            summary = {"tenant_id": info["tenant_id"]}
            if detailed:
                summary["server_usages"] = []
            summary.update({"total_local_gb_usage": 0, "total_vcpus_usage": 0, "total_memory_mb_usage": 0,
                            "total_hours": 0, "start": period.start, "stop": period.stop})
            summaries[info["tenant_id"]] = summary
        summary["total_local_gb_usage"] += info["local_gb"] * info["hours"]
        summary["total_vcpus_usage"] += info["vcpus"] * info["hours"]
        summary["total_memory_mb_usage"] += info["memory_mb"] * info["hours"]
        summary["total_hours"] += info["hours"]
        server_usages.append(info)
        if detailed:
            summary["server_usages"].append(info)
    return list(summaries.values()), server_usages
