"""The ``agent`` inspect interface: in-band inspection by the agent ramdisk.

Inspecting boots the agent ramdisk as deploying does (the boot interface
prepares it: network boot for ``fake``, an ISO in the virtual CD drive for
``redfish-virtual-media``, whose kernel command line then carries
``ipa-inspection-callback-url``), powers the machine on and leaves the
node in ``inspect wait``.  The agent collects the machine's inventory and
posts it to ``POST /v1/continue_inspection``; the conductor processes it
(:mod:`corral.baremetal.conductor.inspection`), powers the machine off and
undoes the ramdisk's boot (with ``[deploy] fast_track``, after a finished
inspection, the machine stays on with the agent running).
"""

from __future__ import annotations

from typing import Any

from corral.baremetal.drivers import agent as agent_driver
from corral.baremetal.drivers.base import ASYNC, BaseInterface

# Set while the agent is expected to post the machine's inventory.
WAITING_FOR_INVENTORY = "inventory"


class AgentInspect(BaseInterface):
    interface_type = "inspect"
    name = "agent"

    def validate(self, task: Any) -> None:
        # The boot interface knows what the ramdisk needs (deploy_kernel/deploy_ramdisk, the API's URL ...).
        task.driver.boot.validate(task)

    def inspect_hardware(self, task: Any) -> str:
        """Boot the agent ramdisk; inspection goes on when the agent posts the inventory."""
        info = agent_driver.without_agent(task.internal_info)
        info["agent_pending"] = WAITING_FOR_INVENTORY
        task.update(driver_internal_info=info)
        agent_driver.boot_ramdisk(task)
        return ASYNC

    def clean_up(self, task: Any, failed: bool = True) -> None:
        """After inspection (finished, failed, timed out or aborted): the machine off, the ramdisk's boot undone.

        With fast track a finished inspection leaves the machine on with its agent running (from memory: its
        medium is ejected), as upstream: the agent looks the node up, heartbeats, and the next cleaning or
        deployment uses it without a reboot.
        """
        if not failed and task.conductor.conf.deploy.fast_track:
            task.driver.boot.clean_up_ramdisk(task)
            info = task.internal_info
            info.pop("agent_pending", None)
            task.update(driver_internal_info=info)
            return
        power_off = task.conductor.conf.inspector.power_off
        agent_driver.stop_ramdisk(task, power_off=power_off)
