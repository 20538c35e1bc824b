"""Quotas: limits per project and the usage counted from the cells.

Usage of instances, cores and RAM is counted in every cell at once.  A
cell that does not answer is never counted as zero: its share is
estimated from the API database (the project's live instance mappings in
that cell and the flavors recorded in their request specs), and the cell
is reported so that the caller can refuse a boot (see
:func:`corral.compute.domain.servers.create_servers`).  Upstream's legacy
counting treats such a cell as empty, which lets a project go over quota.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from oslo_config import cfg

from corral.core import errors
from corral.core.db import Database
from corral.compute.cells import CellMapping, CellRegistry, is_failure
from corral.compute.db import api_queries as q
from corral.compute.db import cell_queries as cq
from corral.compute.db import server_groups as group_db

COUNTED = ("instances", "cores", "ram")
# Resources shown at every version from 2.57 on, in upstream's order.
BASE_RESOURCES = ("instances", "cores", "ram", "metadata_items", "key_pairs", "server_groups", "server_group_members")
# Shown before 2.57 (file injection) and before 2.36 (network proxies), with upstream's defaults.
FILE_RESOURCES = {"injected_files": 5, "injected_file_content_bytes": 10240, "injected_file_path_bytes": 255}
NETWORK_RESOURCES = {"floating_ips": 10, "fixed_ips": -1, "security_groups": 10, "security_group_rules": 20}


@dataclass
class Usage:
    counts: dict[str, int]
    # Cells that did not answer; their share in ``counts`` is an estimate.
    down_cells: list[CellMapping] = field(default_factory=list)


def resources_for(version: Any) -> list[str]:
    names = list(BASE_RESOURCES)
    if version is None or version < (2, 57):
        names += list(FILE_RESOURCES)
    if version is None or version < (2, 36):
        names += list(NETWORK_RESOURCES)
    return names


def default_limits(conf: cfg.ConfigOpts) -> dict[str, int]:
    limits = {name: int(getattr(conf.quota, name)) for name in BASE_RESOURCES}
    limits.update(FILE_RESOURCES)
    limits.update(NETWORK_RESOURCES)
    return limits


def project_limits(conf: cfg.ConfigOpts, api_db: Database, project_id: str) -> dict[str, int]:
    limits = default_limits(conf)
    with api_db.read() as conn:
        limits.update(q.project_quotas(conn, project_id))
    return limits


def _estimate_from_mappings(api_db: Database, project_id: str, cell: CellMapping) -> dict[str, int]:
    counts = {"instances": 0, "cores": 0, "ram": 0}
    with api_db.read() as conn:
        mappings = q.live_mappings_in_cells(conn, [cell.id], project_id, limit=1_000_000)
        for mapping in mappings:
            counts["instances"] += 1
            spec = q.request_spec(conn, mapping.instance_uuid) or {}
            flavor = spec.get("flavor") or {}
            counts["cores"] += int(flavor.get("vcpus", 0))
            counts["ram"] += int(flavor.get("memory_mb", 0))
    return counts


def count_usage(api_db: Database, cells: CellRegistry, project_id: str) -> Usage:
    def work(_cell: CellMapping, database: Database) -> dict[str, int]:
        with database.read() as conn:
            return cq.usage(conn, project_id)

    answers = cells.scatter_gather(cells.mappings(), work)
    usage = Usage(counts={name: 0 for name in COUNTED})
    for cell in cells.mappings():
        answer = answers.get(cell.uuid)
        if answer is None:
            continue
        if is_failure(answer):
            usage.down_cells.append(cell)
            answer = _estimate_from_mappings(api_db, project_id, cell)
        for name in COUNTED:
            usage.counts[name] += answer[name]  # type: ignore[index]
    return usage


def server_groups_in_use(api_db: Database, project_id: str) -> int:
    """The project's server groups (``key_pairs`` and ``server_group_members`` are per user: upstream shows 0)."""
    with api_db.read() as conn:
        return group_db.count_groups(conn, project_id)


def project_has_servers_in(api_db: Database, project_id: str, down_cells: list[CellMapping]) -> bool:
    if not down_cells:
        return False
    with api_db.read() as conn:
        return q.project_has_live_mappings_in(conn, project_id, [cell.id for cell in down_cells])


class OverQuota(errors.Forbidden):
    pass


def check_room(limits: dict[str, int], usage: Usage, wanted: dict[str, int]) -> None:
    """Raise :class:`OverQuota` (403) when ``wanted`` does not fit."""
    overs = [
        name for name, amount in wanted.items()
        if limits.get(name, -1) >= 0 and usage.counts.get(name, 0) + amount > limits[name]
    ]
    if overs:
        names = ", ".join(sorted(overs))
        requested = ", ".join(str(wanted[name]) for name in sorted(overs))
        used = ", ".join(str(usage.counts.get(name, 0)) for name in sorted(overs))
        allowed = ", ".join(str(limits[name]) for name in sorted(overs))
        raise OverQuota(
            f"Quota exceeded for {names}: Requested {requested}, but already used {used} of {allowed} {names}"
        )


def max_fitting(limits: dict[str, int], usage: Usage, per_instance: dict[str, int], max_count: int) -> int:
    """How many instances of ``per_instance`` fit, at most ``max_count``."""
    fitting = max_count
    for name, amount in per_instance.items():
        limit = limits.get(name, -1)
        if limit < 0 or amount <= 0:
            continue
        room = limit - usage.counts.get(name, 0)
        fitting = min(fitting, max(room // amount, 0))
    return fitting
