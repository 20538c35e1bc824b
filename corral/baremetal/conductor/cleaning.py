"""Automated and manual cleaning of a locked node (design: manual cleaning).

Automated cleaning (``provide``, tear-down) runs every step with a
priority above zero, highest first, and ends in ``available``.  Manual
cleaning (``clean`` from ``manageable``) runs exactly the requested steps
in the requested order and ends back in ``manageable``.  Requested steps
are checked before any of them runs: an unknown step, a missing required
argument or an unexpected argument fails cleaning (``clean failed``) with
a clear ``last_error``.  A step that rejects its arguments while running
fails cleaning after the steps before it ran.

A step returning ``ASYNC`` leaves the node in ``clean wait``; the
conductor polls it (``poll_waiting``) and resumes with the next step.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from corral.baremetal.conductor.task import stop_if_lost
from corral.baremetal.drivers.base import ASYNC, CLEAN_STEP_INTERFACES, CLEANING_INTERFACE_PRIORITY, StepsNotAvailable
from corral.baremetal.domain import states

LOG = logging.getLogger(__name__)


class CleaningError(Exception):
    """Cleaning cannot go on; the message becomes the node's last_error."""


def automated_clean_enabled(task: Any) -> bool:
    # The node's own setting wins over the conductor's default.
    setting = task.node.get("automated_clean")
    if setting is not None:
        return bool(setting)
    return bool(task.conductor.conf.conductor.automated_clean)


def driver_steps(task: Any) -> list[dict[str, Any]]:
    """Every clean step the node's interfaces offer, highest priority first."""
    steps: list[dict[str, Any]] = []
    for interface_type in CLEAN_STEP_INTERFACES:
        steps.extend(getattr(task.driver, interface_type).get_clean_steps(task))
    return sorted(
        steps,
        key=lambda step: (step["priority"], CLEANING_INTERFACE_PRIORITY.get(step["interface"], 0)),
        reverse=True,
    )


def wipe_cleaning_info(info: Mapping[str, Any]) -> dict[str, Any]:
    wiped = dict(info)
    wiped["clean_steps"] = None
    for key in ("clean_step_index", "cleaning_disable_ramdisk", "declarative_cleaning", "cleaning_pending_start"):
        wiped.pop(key, None)
    return wiped


def fail(task: Any, message: str, *, event: str = "fail") -> None:
    stop_if_lost(task)  # the node is another conductor's: neither its ramdisk nor its row are ours to touch
    LOG.warning("cleaning of node %s failed: %s", task.node["uuid"], message)
    _tear_down_ramdisk(task, failed=True)
    task.process_event(event, last_error=message, clean_step={}, driver_internal_info=wipe_cleaning_info(task.internal_info))


def _tear_down_ramdisk(task: Any, *, failed: bool = False) -> None:
    """A ramdisk booted for cleaning is stopped (and its agent's token forgotten), unless fast track keeps it."""
    if not task.internal_info.get("agent_cleaning"):
        return
    try:
        task.driver.deploy.tear_down_cleaning(task, failed=failed)
    except Exception as error:  # noqa: BLE001 - cleaning's outcome is already decided
        LOG.warning("stopping the cleaning ramdisk of node %s: %s", task.node["uuid"], error)


def _ramdisk_booting(task: Any, start: dict[str, Any]) -> bool:
    """Boot the deploy interface's ramdisk when its steps come from an agent.

    True when cleaning now waits for the agent, or failed because the ramdisk could not be booted.
    """
    prepare = getattr(task.driver.deploy, "prepare_cleaning", None)
    if prepare is None or task.internal_info.get("agent_cleaning"):
        return False
    try:
        if prepare(task) != ASYNC:
            return False
    except Exception as error:  # noqa: BLE001 - recorded on the node
        fail(task, f"Failed to prepare node {task.node['uuid']} for cleaning: {error}")
        return True
    info = task.internal_info
    info["cleaning_pending_start"] = start
    task.update(driver_internal_info=info, last_error=None)
    task.process_event("wait")
    return True


def start_after_ramdisk(task: Any) -> None:
    """clean wait -> cleaning: the agent called back and its steps are known; start the cleaning asked for."""
    start = task.internal_info.get("cleaning_pending_start") or {}
    task.process_event("resume")
    if start.get("manual"):
        start_manual(task, start.get("steps") or [])
    else:
        start_automated(task)


def finish(task: Any) -> None:
    # Manual cleaning returns to manageable; so does a retired node, which is not to be used again.
    manual = task.node["target_provision_state"] == states.MANAGEABLE or bool(task.node.get("retired"))
    _tear_down_ramdisk(task)
    task.process_event(
        "manage" if manual else "done", clean_step={}, driver_internal_info=wipe_cleaning_info(task.internal_info)
    )


# ------------------------------------------------------------- start


def start_automated(task: Any) -> None:
    """Node in ``cleaning`` towards ``available``."""
    if not automated_clean_enabled(task):
        finish(task)
        return
    if _ramdisk_booting(task, {"manual": False}):
        return
    try:
        steps = [dict(step) for step in driver_steps(task) if step["priority"] > 0]
    except Exception as error:  # noqa: BLE001 - recorded on the node
        fail(task, f"Cannot clean node {task.node['uuid']}: {error}")
        return
    _prepare(task, steps, declarative=False)
    run_steps(task, 0)


def start_manual(task: Any, requested: Sequence[Mapping[str, Any]], disable_ramdisk: bool = False) -> None:
    """Node in ``cleaning`` towards ``manageable``: run ``requested`` in order.

    With ``disable_ramdisk`` (1.70) only steps that need no ramdisk may run.
    """
    if not disable_ramdisk and _ramdisk_booting(task, {"manual": True, "steps": [dict(step) for step in requested]}):
        return
    try:
        steps = validate_manual_steps(task, requested)
        if disable_ramdisk:
            _check_no_ramdisk(task, steps)
    except CleaningError as error:
        fail(task, f"Cannot clean node {task.node['uuid']}: {error}")
        return
    _prepare(task, steps, declarative=True, disable_ramdisk=disable_ramdisk)
    run_steps(task, 0)


def _check_no_ramdisk(task: Any, steps: Sequence[Mapping[str, Any]]) -> None:
    offered = {(step["interface"], step["step"]): step for step in driver_steps(task)}
    for step in steps:
        if offered[(step["interface"], step["step"])].get("requires_ramdisk", True):
            shown = {"interface": step["interface"], "step": step["step"]}
            raise CleaningError(f"clean step {shown!r} requires booting a ramdisk")


def _prepare(task: Any, steps: list[dict[str, Any]], *, declarative: bool, disable_ramdisk: bool = False) -> None:
    info = task.internal_info
    info["clean_steps"] = steps
    info["cleaning_disable_ramdisk"] = disable_ramdisk
    if declarative:
        info["declarative_cleaning"] = True
    task.update(driver_internal_info=info, last_error=None)


def validate_manual_steps(task: Any, requested: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The requested steps expanded with their priority and abortability.

    Raises CleaningError naming every problem found.
    """
    try:
        available = {(step["interface"], step["step"]): step for step in driver_steps(task)}
    except StepsNotAvailable as error:
        raise CleaningError(str(error)) from None
    expanded, problems = [], []
    for user_step in requested:
        known = available.get((user_step["interface"], user_step["step"]))
        if known is None:
            problems.append(f"node does not support this clean step: {dict(user_step)!r}")
            continue
        step = dict(user_step)
        step["abortable"] = known["abortable"]
        step["priority"] = known["priority"]
        args = user_step.get("args") or {}
        argsinfo = known.get("argsinfo") or {}
        unexpected = sorted(set(args) - set(argsinfo))
        if unexpected:
            problems.append(f"clean step {step!r} has these unexpected arguments: {', '.join(unexpected)}")
        missing = [
            f"{name} ({info['description']})"
            for name, info in argsinfo.items()
            if info.get("required") and name not in args
        ]
        if missing:
            problems.append(f"clean step {step!r} is missing these required arguments: {', '.join(missing)}")
        expanded.append(step)
    if problems:
        raise CleaningError("; ".join(problems))
    return expanded


# --------------------------------------------------------------- run


def run_steps(task: Any, start: int) -> None:
    """Run the node's clean steps from index ``start`` (node in ``cleaning``)."""
    steps = task.internal_info.get("clean_steps") or []
    for index in range(start, len(steps)):
        step = steps[index]
        info = task.internal_info
        info["clean_step_index"] = index
        task.update(clean_step=step, driver_internal_info=info)
        interface = getattr(task.driver, step["interface"])
        try:
            result = interface.execute_clean_step(task, step)
        except Exception as error:  # noqa: BLE001 - the step's failure is the node's last_error
            fail(task, f"Node {task.node['uuid']} failed step {step!r}: {error}")
            return
        if result == ASYNC:
            task.process_event("wait", release=True)
            return
    finish(task)


def resume(task: Any) -> None:
    """An asynchronous step finished (node in ``clean wait``): go on with the next."""
    step = task.node["clean_step"] or {}
    if step.get("abort_after"):
        abort(task, after_step=step.get("step"))
        return
    task.process_event("resume")
    index = task.internal_info.get("clean_step_index", -1)
    run_steps(task, index + 1)


def abort(task: Any, *, after_step: str | None = None) -> None:
    """Abort cleaning of a node in ``clean wait`` / ``clean hold``."""
    step = task.node["clean_step"] or {}
    if step and after_step is None:
        try:
            getattr(task.driver, step["interface"]).abort_step(task, step)
        except Exception as error:  # noqa: BLE001 - aborting goes on regardless
            LOG.warning("aborting step %s on node %s: %s", step, task.node["uuid"], error)
    message = "By request, the clean operation was aborted"
    if after_step:
        message += f' after the completion of step "{after_step}"'
    fail(task, message, event="abort")


def request_abort(task: Any) -> bool:
    """The abort verb in ``clean wait``/``clean hold``.

    Aborts now when the running step is abortable; otherwise marks the step
    so cleaning stops once it completes.  Returns True when aborted now.
    """
    step = task.node["clean_step"] or {}
    if step and not step.get("abortable"):
        if not step.get("abort_after"):
            task.update(clean_step={**step, "abort_after": True})
        return False
    abort(task)
    return True


def poll_waiting(task: Any) -> bool:
    """Check the asynchronous step of a node in ``clean wait``; True when cleaning moved on."""
    step = task.node["clean_step"] or {}
    if not step and task.internal_info.get("agent_pending"):
        return False  # the ramdisk is booting: its agent's heartbeat moves cleaning on
    if not step:
        fail(task, f"Node {task.node['uuid']} is waiting in cleaning without a clean step.")
        return True
    interface = getattr(task.driver, step["interface"])
    try:
        done = interface.poll_step(task, step)
    except Exception as error:  # noqa: BLE001 - the step's failure is the node's last_error
        fail(task, f"Node {task.node['uuid']} failed step {step!r}: {error}")
        return True
    if done:
        resume(task)
        return True
    return False
