"""The ``agent`` rescue interface: the agent ramdisk booted into rescue mode.

Rescuing powers the machine off, undoes the instance's boot, boots the
rescue ramdisk (the boot interface prepares it: network boot for
``fake``, an ISO from ``rescue_kernel`` + ``rescue_ramdisk`` or
``rescue_iso`` in the virtual CD drive for ``redfish-virtual-media``) and
waits in ``rescue wait``.  When the agent heartbeats, the conductor sends it
``rescue.finalize_rescue`` with the SHA-crypt hash of the rescue password
(``hashed: true``, as upstream): the agent makes it the ``rescue`` user's
password and stops serving its API.  The rescue ramdisk's boot is then
cleaned up (the medium ejected; the machine runs from memory) and the node
is in ``rescue``.

Unrescuing powers the machine off, cleans the rescue boot up, makes the
disk the boot device again and powers it on: ``active``.

The password (and its hash) lives in instance_info only while the rescue
is under way: every answer masks it, and it goes once the agent has it, or
when the rescue fails or the node is undeployed.
"""

from __future__ import annotations

from typing import Any

from corral.baremetal.domain import states
from corral.baremetal.drivers import agent as agent_driver
from corral.baremetal.drivers.base import ASYNC, BaseInterface, InvalidParameterValue

PASSWORD_KEYS = ("rescue_password", "hashed_rescue_password")
FINALIZE_RESCUE = "rescue.finalize_rescue"


def without_password(info: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in info.items() if key not in PASSWORD_KEYS}


def remove_password(task: Any) -> None:
    info = task.node.get("instance_info") or {}
    if any(key in info for key in PASSWORD_KEYS):
        task.update(instance_info=without_password(info))


class AgentRescue(BaseInterface):
    interface_type = "rescue"
    name = "agent"

    def validate(self, task: Any) -> None:
        boot = task.driver.boot
        validate_rescue = getattr(boot, "validate_rescue", None)
        if validate_rescue is not None:
            validate_rescue(task)
        if not (task.node.get("instance_info") or {}).get("rescue_password"):
            raise InvalidParameterValue(
                f"Node {task.node['uuid']} is missing 'instance_info/rescue_password'. It is required for "
                "rescuing node.")

    def rescue(self, task: Any) -> str:
        """Boot the rescue ramdisk; the rescue finishes when the agent heartbeats."""
        agent_driver.set_power(task, states.POWER_OFF)
        task.driver.boot.clean_up_instance(task)
        # A new ramdisk, a new agent: its token and URL are made afresh.
        info = agent_driver.without_agent(task.internal_info)
        info["agent_pending"] = agent_driver.WAITING_FOR_BOOT
        task.update(driver_internal_info=info)
        task.driver.boot.prepare_ramdisk(task)
        agent_driver.set_power(task, states.POWER_ON)
        return ASYNC

    def finalize(self, task: Any) -> None:
        """Give the agent the hashed password; it fails with the agent's error unless the agent took it."""
        hashed = (task.node.get("instance_info") or {}).get("hashed_rescue_password")
        result = agent_driver.client_for(task).finalize_rescue(hashed)
        if result.get("command_status") != "SUCCEEDED":
            raise InvalidParameterValue(
                f"Agent returned bad result for command finalize_rescue: {result.get('command_error')}")

    def unrescue(self, task: Any) -> None:
        agent_driver.set_power(task, states.POWER_OFF)
        self.clean_up(task)
        task.driver.boot.prepare_instance(task)
        agent_driver.set_power(task, states.POWER_ON)

    def clean_up(self, task: Any) -> None:
        """The password goes, the rescue ramdisk's boot is undone, the agent forgotten."""
        remove_password(task)
        try:
            task.driver.boot.clean_up_ramdisk(task)
        finally:
            task.update(driver_internal_info=agent_driver.without_agent(task.internal_info))
