"""Server states: vm_state, task_state, power_state and the API status they show as.

The tables below are the single place the mapping lives: upstream's
vm_state/task_state -> status table (``nova.api.openstack.common``),
restricted to the states Corral's servers go through, and the states
each action may start from (``nova.compute.api``'s decorators).
"""

from __future__ import annotations

# vm_state values
ACTIVE = "active"
BUILDING = "building"
STOPPED = "stopped"
RESCUED = "rescued"
ERROR = "error"
DELETED = "deleted"
SOFT_DELETED = "soft-delete"
PAUSED = "paused"
SUSPENDED = "suspended"

# task_state values
SCHEDULING = "scheduling"
SPAWNING = "spawning"
DELETING = "deleting"
SOFT_DELETING = "soft-deleting"
RESTORING = "restoring"
POWERING_OFF = "powering-off"
POWERING_ON = "powering-on"
REBOOTING = "rebooting"
REBOOT_PENDING = "reboot_pending"
REBOOT_STARTED = "reboot_started"
REBOOTING_HARD = "rebooting_hard"
REBOOT_PENDING_HARD = "reboot_pending_hard"
REBOOT_STARTED_HARD = "reboot_started_hard"
REBUILDING = "rebuilding"
REBUILD_BLOCK_DEVICE_MAPPING = "rebuild_block_device_mapping"
REBUILD_SPAWNING = "rebuild_spawning"
RESCUING = "rescuing"
UNRESCUING = "unrescuing"
IMAGE_SNAPSHOT_PENDING = "image_snapshot_pending"
IMAGE_SNAPSHOT = "image_snapshot"
RESUMING = "resuming"
UNPAUSING = "unpausing"
PAUSING = "pausing"
SUSPENDING = "suspending"

# power_state values (nova.compute.power_state)
NOSTATE = 0
RUNNING = 1
PAUSED_POWER = 3
SHUTDOWN = 4
CRASHED = 6
SUSPENDED_POWER = 7

# What each action may start from (upstream's check_instance_state).
ALLOW_SOFT_REBOOT = (ACTIVE,)
ALLOW_HARD_REBOOT = (ACTIVE, STOPPED, PAUSED, SUSPENDED, ERROR)
ALLOW_REBOOT_TASKS = (None, REBOOTING, REBOOT_PENDING, REBOOT_STARTED, RESUMING, REBOOTING_HARD, UNPAUSING,
                      PAUSING, SUSPENDING)
ALLOW_STOP = (ACTIVE, ERROR)
ALLOW_START = (STOPPED,)
ALLOW_REBUILD = (ACTIVE, STOPPED, ERROR)
ALLOW_RESCUE = (ACTIVE, STOPPED, ERROR)
ALLOW_UNRESCUE = (RESCUED,)
ALLOW_SNAPSHOT = (ACTIVE, STOPPED, PAUSED, SUSPENDED)
# Metadata and tag changes.
ALLOW_UPDATE = (ACTIVE, PAUSED, SUSPENDED, STOPPED)

UNKNOWN_STATUS = "UNKNOWN"

_REBUILD = {REBUILDING: "REBUILD", REBUILD_BLOCK_DEVICE_MAPPING: "REBUILD", REBUILD_SPAWNING: "REBUILD"}

# vm_state -> {task_state or "default": status}
_STATUS = {
    BUILDING: {"default": "BUILD"},
    ACTIVE: {
        "default": "ACTIVE",
        REBOOTING: "REBOOT", REBOOT_PENDING: "REBOOT", REBOOT_STARTED: "REBOOT",
        REBOOTING_HARD: "HARD_REBOOT", REBOOT_PENDING_HARD: "HARD_REBOOT", REBOOT_STARTED_HARD: "HARD_REBOOT",
        **_REBUILD,
    },
    STOPPED: {"default": "SHUTOFF", **_REBUILD},
    RESCUED: {"default": "RESCUE"},
    PAUSED: {"default": "PAUSED"},
    SUSPENDED: {"default": "SUSPENDED"},
    ERROR: {"default": "ERROR", **_REBUILD},
    DELETED: {"default": "DELETED"},
    SOFT_DELETED: {"default": "SOFT_DELETED"},
}

# status filter -> vm_states it selects (upstream's reverse mapping)
_STATUS_FILTER = {
    "BUILD": [BUILDING],
    "ACTIVE": [ACTIVE],
    "SHUTOFF": [STOPPED],
    "RESCUE": [RESCUED],
    "PAUSED": [PAUSED],
    "SUSPENDED": [SUSPENDED],
    "ERROR": [ERROR],
    "DELETED": [DELETED],
    "SOFT_DELETED": [SOFT_DELETED],
    # Statuses of a task in progress (their task states: task_states_for_status).
    "REBOOT": [ACTIVE], "HARD_REBOOT": [ACTIVE], "REBUILD": [ACTIVE, STOPPED, ERROR],
    # Statuses of states Corral's servers never enter: valid filters, no match.
    "PASSWORD": [], "MIGRATING": [], "RESIZE": [], "VERIFY_RESIZE": [], "REVERT_RESIZE": [],
    "SHELVED": [], "SHELVED_OFFLOADED": [], "UNKNOWN": [],
}

# Statuses for which a server record shows "progress".
PROGRESS_STATUSES = frozenset({"ACTIVE", "BUILD", "REBUILD", "RESIZE", "VERIFY_RESIZE", "MIGRATING"})
# Statuses for which a server record shows its latest fault.
FAULT_STATUSES = frozenset({"ERROR", "DELETED"})


def status_of(vm_state: str | None, task_state: str | None) -> str:
    table = _STATUS.get(vm_state or "")
    if table is None:
        return UNKNOWN_STATUS
    return table.get(task_state or "", table["default"])


def vm_states_for_status(status: str) -> list[str] | None:
    """The vm_states a status filter selects; None for an unknown status."""
    return _STATUS_FILTER.get(status.upper())


def task_states_for_status(status: str) -> list[str] | None:
    """The task states a status filter selects, as upstream adds them; None: any task state."""
    wanted = status.upper()
    tasks: set[str] = set()
    for table in _STATUS.values():
        for task, shown in table.items():
            if shown == wanted:
                if task == "default":
                    return None
                tasks.add(task)
    return sorted(tasks) if tasks else None
