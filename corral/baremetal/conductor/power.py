"""Power actions on a locked node."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from corral.baremetal.domain import states
from corral.core.errors import BadRequest

LOG = logging.getLogger(__name__)

# Requested target -> the power state the node ends in.
FINAL_STATES = {
    states.POWER_ON: states.POWER_ON,
    states.POWER_OFF: states.POWER_OFF,
    states.REBOOT: states.POWER_ON,
    states.SOFT_POWER_OFF: states.POWER_OFF,
    states.SOFT_REBOOT: states.POWER_ON,
}


def check_target(target: Any) -> str:
    if target not in FINAL_STATES:
        raise BadRequest(f"Invalid power state transition requested: {target}")
    return str(target)


def power_action(task: Any, target: str, timeout: int | None = None) -> None:
    """Ask the power interface for ``target``; record the outcome on the node.

    A failure is recorded as ``last_error`` (the caller's request already
    returned), never raised.
    """
    node = task.node
    final = FINAL_STATES[target]
    power = task.driver.power
    try:
        if target in (states.POWER_ON, states.POWER_OFF) and power.get_power_state(task) == final:
            task.update(power_state=final, target_power_state=None, last_error=None)
            return
        if target in (states.REBOOT, states.SOFT_REBOOT) and hasattr(power, "reboot"):
            power.reboot(task, timeout=timeout)
        else:
            power.set_power_state(task, target, timeout=timeout)
    except Exception as error:  # noqa: BLE001 - recorded on the node for the operator
        LOG.warning("power action %s on node %s failed: %s", target, node["uuid"], error)
        task.update(
            target_power_state=None,
            last_error=f"Failed to change power state to '{target}' by '{target}'. Error: {error}",
        )
        return
    # Upstream stamps every change the hardware made (not a request for the
    # state the node is already in) in driver_internal_info, naive UTC.
    info = {**(task.node["driver_internal_info"] or {}),
            "last_power_state_change": datetime.now(UTC).replace(tzinfo=None).isoformat()}
    task.update(power_state=final, target_power_state=None, last_error=None, driver_internal_info=info)
