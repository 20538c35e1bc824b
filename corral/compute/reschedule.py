"""Rescheduling a failed build onto its alternates (upstream's conductor ``build_instances``).

The scheduler claims one node for a server and hands along up to
``[scheduler] max_attempts - 1`` alternates from the same cell (none for
a forced host or ``max_attempts = 1``); the API stores them, with the
hosts tried, in the server's ``build_alternates``. When a build fails on
a compute service with anything but a :class:`BuildAbortException`, that
service (which already cleaned the node up and deleted the allocation)
claims the next alternate in Placement, as upstream's cell conductor
does, and moves the server there still ``building``/``spawning``: the
alternate's compute service builds it on its next pass. An alternate
whose claim fails (taken meanwhile) or whose host its server group no
longer allows is skipped. With none left, the server goes to ``ERROR``
with upstream's fault, "Exceeded maximum number of retries. Exhausted all
hosts available for retrying build failures for instance <uuid>.".

It runs in the compute service and reaches Placement through its
scheduler client (HTTP); the API database only for server groups.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from corral.compute.db import cell_queries as cq
from corral.compute.db import server_records as records
from corral.compute.domain import server_groups, states

LOG = logging.getLogger(__name__)


class MaxRetriesExceeded(Exception):
    """Upstream's MaxRetriesExceeded (a NoValidHost), as the fault of a build that ran out of hosts."""

    def __init__(self, instance_uuid: str) -> None:
        super().__init__(
            "Exceeded maximum number of retries. Exhausted all hosts available for retrying build failures "
            f"for instance {instance_uuid}."
        )

    def format_message(self) -> str:
        return str(self)


def retry_info(instance: dict[str, Any]) -> dict[str, Any] | None:
    """The hosts tried and the alternates left; None when the build is not to be rescheduled."""
    stored = instance.get("build_alternates")
    if not stored:
        return None
    info = json.loads(stored)
    return {"hosts": list(info.get("hosts") or []), "alternates": list(info.get("alternates") or [])}


def building_on(host: str, instance: dict[str, Any]) -> dict[str, Any]:
    """The compare-and-set condition of a server still being built on ``host``'s node (not deleted or deleting)."""
    return {"vm_state": states.BUILDING, "task_state": states.SPAWNING, "host": host,
            "node": instance.get("node"), "deleted": False}


def reschedule(scheduler: Any, cell_db: Any, api_db: Any, host: str, instance: dict[str, Any],
               retry: dict[str, Any]) -> str | None:
    """Move the server (its allocation already deleted) to the next alternate that can be claimed.

    Returns the new host, or None when the build ended in ERROR (or the
    server was deleted meanwhile).
    """
    uuid = instance["uuid"]
    expected = building_on(host, instance)
    alternates = retry["alternates"]
    hosts = retry["hosts"]
    while alternates:
        alternate = alternates.pop(0)
        try:
            claimed = scheduler.claim(uuid, alternate["allocations"], instance["project_id"], instance["user_id"])
        except Exception as error:  # noqa: BLE001 - Placement not answering: upstream's ERROR with that fault
            _fail(cell_db, api_db, host, uuid, expected, error)
            return None
        if not claimed:
            LOG.info("server %s: alternate node %s is taken; trying the next", uuid, alternate["node"])
            continue
        if api_db is not None and not server_groups.move_member(api_db, uuid, alternate["host"]):
            LOG.info("server %s: its server group no longer allows host %s", uuid, alternate["host"])
            scheduler.release(uuid)
            continue
        hosts.append([alternate["host"], alternate["node"]])
        moved = cell_db.write(
            cq.update_instance, uuid, expected, host=alternate["host"], node=alternate["node"],
            availability_zone=alternate["availability_zone"],
            build_alternates=json.dumps({"hosts": hosts, "alternates": alternates}),
        )
        if not moved:
            # Deleted while its build failed: nothing is built there.
            scheduler.release(uuid)
            return None
        LOG.info("server %s rescheduled from %s (node %s) to %s (node %s)", uuid, host, instance.get("node"),
                 alternate["host"], alternate["node"])
        return str(alternate["host"])
    _fail(cell_db, api_db, host, uuid, expected, MaxRetriesExceeded(uuid))
    return None


def _fail(cell_db: Any, api_db: Any, host: str, uuid: str, expected: dict[str, Any], error: Exception) -> None:
    """The build is over: ERROR on no host, with the fault (upstream's _cleanup_when_reschedule_fails)."""
    LOG.warning("server %s: %s", uuid, error)
    format_message = getattr(error, "format_message", None)
    message = str(format_message()) if callable(format_message) else type(error).__name__

    def fail(conn: Any) -> None:
        if cq.update_instance(conn, uuid, expected, vm_state=states.ERROR, task_state=None, host=None, node=None,
                              build_alternates=None):
            records.add_fault(conn, uuid, 500, message, None, host)

    cell_db.write(fail)
    if api_db is not None:
        server_groups.forget_host(api_db, uuid)
