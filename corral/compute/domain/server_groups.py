"""Server groups and host hints when scheduling a boot.

Upstream enforces a group's policy in the scheduler (filters for the hard
policies, weighers for the soft ones) and again in the compute service,
under a lock on the group, because concurrent boots read the group before
any of them is placed.  Corral's equivalent of that second check is the
claim: once Placement has granted a host, the boot takes the group's row
lock in the API database, counts the members already placed per host
(their ``host`` on ``instance_group_member``) and records its own host
only if the policy still holds; otherwise it releases the claim and tries
another host.  So two concurrent boots into an anti-affinity group never
end up on one host, even when both chose it.

* ``anti-affinity``: a host takes a member while it has fewer than
  ``max_server_per_host`` (default 1) of them.
* ``affinity``: once a member is placed, only its host takes the others.
* ``soft-affinity`` / ``soft-anti-affinity``: hosts are weighed by the
  members they have (more, respectively fewer, is better), normalised and
  multiplied by ``[filter_scheduler] soft_affinity_weight_multiplier`` /
  ``soft_anti_affinity_weight_multiplier``, and added to the RAM weight.

The ``same_host`` and ``different_host`` hints keep only the hosts that
have (respectively have none of) the named servers.

A member's host is cleared when it is deleted for good (a soft-deleted
member still counts, as upstream counts it until it is reclaimed).
"""

from __future__ import annotations

import collections
import logging
from typing import Any

from sqlalchemy.engine import Connection

from corral.core import errors
from corral.compute.cells import CellMapping, is_failure
from corral.compute.db import cell_queries as cq
from corral.compute.db import server_groups as db
from corral.core.db import Database
from corral.compute.scheduler import NoValidHost, Selection

LOG = logging.getLogger(__name__)

POLICIES = ("anti-affinity", "affinity", "soft-anti-affinity", "soft-affinity")
HARD = ("anti-affinity", "affinity")


def typed_rules(rules: dict[str, str] | None) -> dict[str, int]:
    """The rules as the API shows them (from 2.64): ``{}`` or ``{"max_server_per_host": n}``."""
    if rules and "max_server_per_host" in rules:
        return {"max_server_per_host": int(rules["max_server_per_host"])}
    return {}


def _max_per_host(group: dict[str, Any]) -> int:
    return typed_rules(group.get("rules")).get("max_server_per_host", 1)


def allows(group: dict[str, Any], placed: collections.Counter[str], host: str) -> bool:
    """Whether the group's hard policy lets ``host`` take one more member."""
    if group["policy"] == "anti-affinity":
        return placed[host] < _max_per_host(group)
    if group["policy"] == "affinity":
        return not placed or host in placed
    return True


def soft_weights(group: dict[str, Any], placed: collections.Counter[str]) -> dict[str, float]:
    """Raw weight per host for the soft policies (upstream's affinity weighers)."""
    if group["policy"] == "soft-affinity":
        return {host: float(count) for host, count in placed.items()}
    if group["policy"] == "soft-anti-affinity":
        return {host: -float(count) for host, count in placed.items()}
    return {}


def requested_group(api_db: Database, hints: dict[str, Any], project_id: str | None) -> dict[str, Any] | None:
    """The group of the ``group`` hint (a list's first entry); ``project_id`` None: any project's."""
    hint = hints.get("group")
    if isinstance(hint, list):
        hint = hint[0] if hint else None
    if not hint:
        return None
    with api_db.read() as conn:
        group = db.get_group(conn, hint, project_id)
    if group is None:
        raise errors.BadRequest(f"Instance group {hint} could not be found.")
    return group


def uuid_list(value: Any) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else [str(item) for item in value]


# ------------------------------------------------------------- members


def _instances_by_cell(state: Any, uuids: list[str]) -> tuple[dict[int, list[Any]], list[Any]]:
    """Mappings of ``uuids`` by cell id, and those not in a cell yet."""
    with state.api_db.read() as conn:
        mappings = db.member_mappings(conn, uuids)
    by_cell: dict[int, list[Any]] = {}
    unscheduled = []
    for mapping in mappings:
        if mapping.cell_id is None:
            unscheduled.append(mapping)
        else:
            by_cell.setdefault(mapping.cell_id, []).append(mapping)
    return by_cell, unscheduled


def _ask_cells(state: Any, by_cell: dict[int, list[Any]]) -> dict[int, list[dict[str, Any]] | None]:
    """The cells' live (not deleted) instances among the mappings; None for a cell that did not answer."""
    cells: list[CellMapping] = []
    for cell_id in by_cell:
        try:
            cells.append(state.cells.by_id(cell_id))
        except LookupError:
            continue
    wanted = {cell.uuid: [m.instance_uuid for m in by_cell[cell.id]] for cell in cells}

    def work(cell: CellMapping, database: Database) -> list[dict[str, Any]]:
        with database.read() as conn:
            return cq.instances_by_uuid(conn, wanted[cell.uuid], read_deleted=False)

    answers = state.cells.scatter_gather(cells, work) if cells else {}
    found: dict[int, list[dict[str, Any]] | None] = {}
    for cell in cells:
        answer = answers[cell.uuid]
        found[cell.id] = None if is_failure(answer) else answer  # type: ignore[assignment]
    return found


def live_members(state: Any, uuids: list[str]) -> set[str]:
    """Which of ``uuids`` are servers that are not deleted (soft-deleted ones are).

    Servers not in a cell yet count unless their boot was cancelled; in a
    cell that does not answer, a server counts unless it is queued for
    delete.
    """
    if not uuids:
        return set()
    by_cell, unscheduled = _instances_by_cell(state, uuids)
    live = {m.instance_uuid for m in unscheduled if not m.queued_for_delete}
    for cell_id, instances in _ask_cells(state, by_cell).items():
        if instances is None:
            live |= {m.instance_uuid for m in by_cell[cell_id] if not m.queued_for_delete}
        else:
            live |= {instance["uuid"] for instance in instances}
    return live


def hosts_of(state: Any, uuids: list[str]) -> set[str]:
    """Hosts of the named servers that are in a cell and not deleted (unknown servers have none)."""
    if not uuids:
        return set()
    by_cell, _unscheduled = _instances_by_cell(state, uuids)
    hosts: set[str] = set()
    for instances in _ask_cells(state, by_cell).values():
        hosts |= {instance["host"] for instance in instances or [] if instance.get("host")}
    return hosts


# ---------------------------------------------------------- scheduling


def _placed(conn: Connection, group: dict[str, Any], instance_uuid: str) -> collections.Counter[str]:
    return collections.Counter(db.member_hosts(conn, group["id"], excluding=instance_uuid))


def _record_host(conn: Connection, group: dict[str, Any], instance_uuid: str, host: str) -> bool:
    """Under the group's row lock: the policy still holds on ``host``, and the member is placed there."""
    locked = db.get_group(conn, group["uuid"], lock=True)
    if locked is None:
        # Deleted meanwhile: nothing left to enforce.
        return True
    if not allows(locked, _placed(conn, locked, instance_uuid), host):
        return False
    db.set_member_host(conn, instance_uuid, host, locked["id"])
    return True


def select_and_claim(state: Any, plan: Any, instance: dict[str, Any],
                     nodes: dict[str, tuple[str, str]]) -> Selection:
    """Claim a host allowed by the plan's hints and group; raises NoValidHost."""
    request = plan.request
    instance_uuid = instance["uuid"]
    if plan.same_host:
        wanted = hosts_of(state, plan.same_host)
        nodes = {node: where for node, where in nodes.items() if where[0] in wanted}
    if plan.different_host:
        avoided = hosts_of(state, plan.different_host)
        nodes = {node: where for node, where in nodes.items() if where[0] not in avoided}
    group = plan.group
    refused: set[str] = set()
    for _attempt in range(len({host for host, _node in nodes.values()}) + 1):
        candidates = {node: where for node, where in nodes.items() if where[0] not in refused}
        if group is not None:
            with state.api_db.read() as conn:
                placed = _placed(conn, group, instance_uuid)
            candidates = {node: where for node, where in candidates.items() if allows(group, placed, where[0])}
            request.host_weights = soft_weights(group, placed)
            request.host_weight_multiplier = _multiplier(state.conf, group)
        request.eligible_nodes = candidates
        if not candidates:
            raise NoValidHost()
        selection: Selection = state.scheduler.select_and_claim(
            request, instance_uuid, instance["project_id"], instance["user_id"]
        )
        if group is None or state.api_db.write(_record_host, group, instance_uuid, selection.host):
            return selection
        LOG.info("server %s: host %s no longer fits the %s policy of group %s; trying another",
                 instance_uuid, selection.host, group["policy"], group["uuid"])
        state.scheduler.release(instance_uuid)
        refused.add(selection.host)
    raise NoValidHost()


def _multiplier(conf: Any, group: dict[str, Any]) -> float:
    if group["policy"] == "soft-affinity":
        return float(conf.filter_scheduler.soft_affinity_weight_multiplier)
    if group["policy"] == "soft-anti-affinity":
        return float(conf.filter_scheduler.soft_anti_affinity_weight_multiplier)
    return 0.0


def move_member(api_db: Database, instance_uuid: str, host: str) -> bool:
    """A rescheduled build: the server's groups still allow ``host``, and record it there (else False)."""

    def work(conn: Connection) -> bool:
        return all(_record_host(conn, {"uuid": group_uuid}, instance_uuid, host)
                   for group_uuid in db.groups_of_instance(conn, instance_uuid))

    return bool(api_db.write(work))


def forget_host(api_db: Database, instance_uuid: str) -> None:
    """The server left its host for good (deleted, or never built there)."""
    api_db.write(db.set_member_host, instance_uuid, None)
