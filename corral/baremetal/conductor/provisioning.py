"""The work behind each provisioning verb, run by a worker on a locked node.

Each function is entered with the node already moved into the transient
state (verifying, deploying, deleting ...).  It ends the node in the next
stable or failure state and records errors as ``last_error`` instead of
raising: nobody waits for the result.
"""

from __future__ import annotations

import logging
from typing import Any

from corral.baremetal.conductor import allocations, cleaning, inspection, steps
from corral.baremetal.conductor.task import stop_if_lost
from corral.baremetal.db.nodes import utcnow
from corral.baremetal.domain import passwords, states
from corral.baremetal.drivers import agent as agent_driver
from corral.baremetal.drivers import deploy_utils
from corral.baremetal.drivers import rescue as rescue_driver
from corral.baremetal.drivers.base import ASYNC

LOG = logging.getLogger(__name__)
# Undeploying from these states undoes the rescue first.
RESCUE_STATES = frozenset({states.RESCUE, states.RESCUEWAIT, states.RESCUEFAIL, states.UNRESCUEFAIL})


def verify(task: Any) -> None:
    """enroll -> verifying -> manageable: the power interface must work."""
    uuid = task.node["uuid"]
    try:
        task.driver.power.validate(task)
        task.driver.management.validate(task)
    except Exception as error:  # noqa: BLE001 - recorded on the node
        task.process_event(
            "fail", last_error=f"Failed to validate power driver interface for node {uuid}. Error: {error}"
        )
        return
    try:
        power_state = task.driver.power.get_power_state(task)
    except Exception as error:  # noqa: BLE001 - recorded on the node
        task.process_event("fail", last_error=f"Failed to get power state for node {uuid}. Error: {error}")
        return
    task.process_event("done", power_state=power_state, last_error=None)


def deploy(task: Any, configdrive: Any = None, deploy_steps: list[dict[str, Any]] | None = None) -> None:
    """available/deploy failed/active -> deploying -> active, through the deploy steps."""
    if configdrive is not None:
        task.update(instance_info={**(task.node["instance_info"] or {}), "configdrive": configdrive})
    try:
        task.driver.deploy.validate(task)
        plan = steps.deploy_plan(task, deploy_steps)
    except Exception as error:  # noqa: BLE001 - recorded on the node
        task.process_event("fail", last_error=f"Failed to validate deploy steps for node {task.node['uuid']}: "
                                              f"{error}", deploy_step={})
        return
    run_deploy(task, plan, 0)


def run_deploy(task: Any, plan: list[dict[str, Any]], start: int) -> None:
    """Deploy steps from ``start``: the node ends active, deploy failed, or waiting for the agent."""
    try:
        result = steps.run_deploy_steps(task, plan, start)
    except Exception as error:  # noqa: BLE001 - recorded on the node
        deploy_failed(task, f"Deploy step {task.node.get('deploy_step')} failed on node {task.node['uuid']}: "
                            f"{error}")
        return
    if result == ASYNC:
        task.process_event("wait")
        return
    task.process_event(
        "done", deploy_step={}, last_error=None, conductor_affinity=task.conductor.conductor_id
    )


def continue_deploy(task: Any) -> None:
    """wait call-back -> deploying: the agent finished what the current step started; run the next ones."""
    task.process_event("resume")
    info = task.internal_info
    run_deploy(task, list(info.get("deploy_steps") or []), int(info.get("deploy_step_index", -1)) + 1)


def deploy_failed(task: Any, message: str) -> None:
    """The deployment failed: record why, stop the ramdisk if one runs (the agent's token goes with it)."""
    stop_if_lost(task)  # the node is another conductor's now
    LOG.warning("deployment of node %s failed: %s", task.node["uuid"], message)
    task.process_event("fail", last_error=message, deploy_step={})
    stop_ramdisk(task)


def stop_ramdisk(task: Any) -> None:
    """After a failed or aborted deployment: a deploy interface with a ramdisk stops it and forgets its token."""
    clean_up = getattr(task.driver.deploy, "clean_up", None)
    if clean_up is not None:
        try:
            clean_up(task)
        except Exception as error:  # noqa: BLE001 - the failure is already recorded
            LOG.warning("cleaning up after the deployment of node %s: %s", task.node["uuid"], error)


def tear_down(task: Any, initial_state: str | None = None) -> None:
    """active/deploy failed/error/rescue -> deleting -> cleaning -> available."""
    try:
        if initial_state in RESCUE_STATES and hasattr(task.driver.rescue, "clean_up"):
            # The rescue ramdisk may still be booted: its boot is undone first.
            task.driver.rescue.clean_up(task)
        task.driver.deploy.tear_down(task)
    except Exception as error:  # noqa: BLE001 - recorded on the node
        task.process_event("error", last_error=f"Failed to tear down. Error: {error}")
        return
    info = task.internal_info
    info.pop("fake_boot_device", None)
    for key in deploy_utils.INSTANCE_INTERNAL_KEYS:
        info.pop(key, None)
    task.update(instance_info={}, instance_uuid=None, driver_internal_info=info)
    allocations.release_on_tear_down(task)
    task.process_event("clean")
    cleaning.start_automated(task)


def inspect(task: Any) -> None:
    """manageable/inspect failed -> inspecting -> manageable."""
    task.update(inspection_started_at=utcnow(), inspection_finished_at=None)
    inspector = task.driver.inspect
    try:
        inspector.validate(task)
        result = inspector.inspect_hardware(task) if hasattr(inspector, "inspect_hardware") else None
    except Exception as error:  # noqa: BLE001 - recorded on the node
        task.process_event("fail", last_error=f"Failed to inspect hardware. Reason: {error}")
        inspection.clean_up(task)
        return
    if result == ASYNC:
        # The agent ramdisk boots; its inventory moves the node on (POST /v1/continue_inspection).
        task.process_event("wait")
        return
    task.process_event("done", inspection_finished_at=utcnow(), last_error=None)


def adopt(task: Any) -> None:
    """manageable/adopt failed -> adopting -> active, without touching the hardware."""
    try:
        task.driver.power.validate(task)
        task.driver.deploy.validate(task)
    except Exception as error:  # noqa: BLE001 - recorded on the node
        task.process_event(
            "fail", last_error=f"Error while attempting to adopt node {task.node['uuid']}: {error}."
        )
        return
    task.process_event("done", last_error=None)


def with_rescue_password(node: dict[str, Any], rescue_password: str, algorithm: str) -> dict[str, Any]:
    """The node's instance_info with the rescue password and its hash (what the agent is given)."""
    return {**(node.get("instance_info") or {}), "rescue_password": rescue_password,
            "hashed_rescue_password": passwords.hash_password(rescue_password, algorithm)}


def rescue(task: Any, rescue_password: str) -> None:
    """active/rescue/rescue failed/... -> rescuing -> rescue, or rescue wait until the agent calls back."""
    algorithm = task.conductor.conf.conductor.rescue_password_hash_algorithm
    task.update(instance_info=with_rescue_password(task.node, rescue_password, algorithm))
    rescuer = task.driver.rescue
    if not hasattr(rescuer, "rescue"):
        task.process_event("done", last_error=None)
        return
    try:
        result = rescuer.rescue(task)
    except Exception as error:  # noqa: BLE001 - recorded on the node
        rescue_failed(task, f"Failed to rescue: {error}")
        return
    if result == ASYNC:
        task.process_event("wait")
    else:
        task.process_event("done", last_error=None)


def finish_rescue(task: Any) -> None:
    """rescue wait -> rescuing -> rescue: the agent took the password; its ramdisk's boot is cleaned up."""
    try:
        task.driver.rescue.finalize(task)
    except Exception as error:  # noqa: BLE001 - recorded on the node
        rescue_failed(task, f"Asynchronous exception: Node failed to perform rescue operation. Exception: {error} "
                            f"for node {task.node['uuid']}")
        return
    task.process_event("resume")
    try:
        task.driver.rescue.clean_up(task)
    except Exception as error:  # noqa: BLE001 - recorded on the node
        task.process_event("fail", last_error=f"Rescue operation was unsuccessful, clean up failed for node: "
                                              f"{error}")
        return
    task.process_event("done", last_error=None)


def rescue_failed(task: Any, message: str) -> None:
    """rescuing/rescue wait -> rescue failed: power off, undo the rescue ramdisk, forget the password."""
    LOG.warning("rescue of node %s failed: %s", task.node["uuid"], message)
    try:
        agent_driver.set_power(task, states.POWER_OFF)
        clean_up = getattr(task.driver.rescue, "clean_up", None)
        if clean_up is not None:
            clean_up(task)
    except Exception as error:  # noqa: BLE001 - the clean-up failure is the news
        message = f"Rescue operation was unsuccessful, clean up failed for node: {error}"
    finally:
        info = task.node.get("instance_info") or {}
        if any(key in info for key in rescue_driver.PASSWORD_KEYS):
            task.update(instance_info=rescue_driver.without_password(info))
    task.process_event("fail", last_error=message)


def abort_rescue(task: Any) -> None:
    """rescue wait -> rescue failed by request: the rescue ramdisk's boot is undone, the password forgotten."""
    task.process_event("abort", action="abort", last_error="By request, the rescue operation was aborted.")
    clean_up = getattr(task.driver.rescue, "clean_up", None)
    try:
        if clean_up is not None:
            clean_up(task)
    except Exception as error:  # noqa: BLE001 - recorded on the node, as upstream: maintenance
        LOG.warning("cleaning up the aborted rescue of node %s: %s", task.node["uuid"], error)
        task.update(maintenance=True,
                    maintenance_reason="Failed to clean up rescue after aborting the operation")
    finally:
        rescue_driver.remove_password(task)


def unrescue(task: Any) -> None:
    """rescue/rescue failed/unrescue failed -> unrescuing -> active, booted from its disk again."""
    rescuer = task.driver.rescue
    try:
        if hasattr(rescuer, "unrescue"):
            rescuer.unrescue(task)
    except Exception as error:  # noqa: BLE001 - recorded on the node
        task.process_event("fail", last_error=f"Failed to unrescue: {error}")
        return
    rescue_driver.remove_password(task)
    task.process_event("done", last_error=None)


def fail_interrupted(task: Any, holder: str) -> None:
    """Work on the node stopped with its conductor: move it to the failure state."""
    state = task.node["provision_state"]
    failed = states.INTERRUPTED.get(state)
    if failed is None:
        return
    message = (
        f"The {state} operation on node {task.node['uuid']} was interrupted because conductor {holder} "
        "stopped while working on it."
    )
    LOG.warning(message)
    values: dict[str, Any] = {
        "provision_state": failed,
        "target_provision_state": None if failed in states.STABLE_STATES else task.node["target_provision_state"],
        "provision_updated_at": utcnow(),
        "last_error": message,
    }
    if state == states.CLEANING:
        values["clean_step"] = {}
        values["driver_internal_info"] = cleaning.wipe_cleaning_info(task.internal_info)
    task.update(**values)
