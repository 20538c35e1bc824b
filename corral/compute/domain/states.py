"""Server states: vm_state, task_state, power_state and the API status they show as.

The tables below are the single place the mapping lives (upstream's
vm_state/task_state -> status table, restricted to the states Corral's
fake driver goes through).
"""

from __future__ import annotations

# vm_state values
ACTIVE = "active"
BUILDING = "building"
STOPPED = "stopped"
ERROR = "error"
DELETED = "deleted"
SOFT_DELETED = "soft-delete"

# task_state values
SCHEDULING = "scheduling"
SPAWNING = "spawning"
DELETING = "deleting"
SOFT_DELETING = "soft-deleting"
RESTORING = "restoring"

# power_state values
NOSTATE = 0
RUNNING = 1
SHUTDOWN = 4

UNKNOWN_STATUS = "UNKNOWN"

# vm_state -> {task_state or "default": status}
_STATUS = {
    BUILDING: {"default": "BUILD"},
    ACTIVE: {"default": "ACTIVE"},
    STOPPED: {"default": "SHUTOFF"},
    ERROR: {"default": "ERROR"},
    DELETED: {"default": "DELETED"},
    SOFT_DELETED: {"default": "SOFT_DELETED"},
}

# status filter -> vm_states it selects (upstream's reverse mapping)
_STATUS_FILTER = {
    "BUILD": [BUILDING],
    "ACTIVE": [ACTIVE],
    "SHUTOFF": [STOPPED],
    "ERROR": [ERROR],
    "DELETED": [DELETED],
    "SOFT_DELETED": [SOFT_DELETED],
    # Statuses of states Corral's fake driver never enters: valid filters, no match.
    "REBOOT": [], "HARD_REBOOT": [], "PASSWORD": [], "REBUILD": [], "MIGRATING": [], "RESIZE": [],
    "VERIFY_RESIZE": [], "REVERT_RESIZE": [], "PAUSED": [], "SUSPENDED": [], "RESCUE": [],
    "SHELVED": [], "SHELVED_OFFLOADED": [], "UNKNOWN": [],
}

# Statuses for which a server record shows "progress".
PROGRESS_STATUSES = frozenset({"ACTIVE", "BUILD", "REBUILD", "RESIZE", "VERIFY_RESIZE", "MIGRATING"})


def status_of(vm_state: str | None, task_state: str | None) -> str:
    table = _STATUS.get(vm_state or "")
    if table is None:
        return UNKNOWN_STATUS
    return table.get(task_state or "", table["default"])


def vm_states_for_status(status: str) -> list[str] | None:
    """The vm_states a status filter selects; None for an unknown status."""
    return _STATUS_FILTER.get(status.upper())
