"""Deploy and service steps of a locked node.

Deploying runs the driver's deploy steps with a priority above zero, the
steps of the deploy templates named by the instance's traits
(``instance_info["traits"]``) and the request's own ``deploy_steps``
(1.69), highest priority first.  A template or request step replaces the
driver's step of the same interface and name; priority 0 disables it.

Servicing (1.87) runs exactly the requested service steps in order, on an
active node, which returns to ``active``; a failure leaves it in
``service failed`` with a clear ``last_error``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from corral.baremetal.db import step_sets
from corral.baremetal.drivers.base import ASYNC, CLEANING_INTERFACE_PRIORITY, INTERFACE_TYPES

LOG = logging.getLogger(__name__)


class StepsInvalid(Exception):
    """Requested steps the node cannot run; the message becomes last_error."""


def driver_steps(task: Any, kind: str) -> list[dict[str, Any]]:
    """Every step of ``kind`` the node's interfaces offer."""
    steps: list[dict[str, Any]] = []
    for interface_type in INTERFACE_TYPES:
        interface = getattr(task.driver, interface_type, None)
        if interface is not None:
            steps.extend(interface.steps(kind))
    return steps


def _ordered(steps: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(steps, key=lambda step: (step["priority"], CLEANING_INTERFACE_PRIORITY.get(step["interface"], 0)),
                  reverse=True)


def check_requested(task: Any, kind: str, requested: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The requested steps checked against what the node offers (StepsInvalid names every problem)."""
    offered = {(step["interface"], step["step"]): step for step in driver_steps(task, kind)}
    checked, problems = [], []
    for user_step in requested:
        known = offered.get((user_step["interface"], user_step["step"]))
        if known is None:
            problems.append(f"node does not support this {kind} step: {dict(user_step)!r}")
            continue
        step = {"interface": user_step["interface"], "step": user_step["step"],
                "args": dict(user_step.get("args") or {}), "priority": user_step.get("priority", known["priority"])}
        argsinfo = known.get("argsinfo") or {}
        unexpected = sorted(set(step["args"]) - set(argsinfo))
        if unexpected:
            problems.append(f"{kind} step {step!r} has these unexpected arguments: {', '.join(unexpected)}")
        missing = [f"{name} ({info['description']})" for name, info in argsinfo.items()
                   if info.get("required") and name not in step["args"]]
        if missing:
            problems.append(f"{kind} step {step!r} is missing these required arguments: {', '.join(missing)}")
        checked.append(step)
    if problems:
        raise StepsInvalid("; ".join(problems))
    return checked


# -------------------------------------------------------------- deploy


def deploy_plan(task: Any, user_steps: Sequence[Mapping[str, Any]] | None) -> list[dict[str, Any]]:
    """The deploy steps to run, in order (StepsInvalid when a template or request step is unknown)."""
    plan: dict[tuple[str, str], dict[str, Any]] = {}
    for step in driver_steps(task, "deploy"):
        if step["priority"] > 0:
            plan[(step["interface"], step["step"])] = {
                "interface": step["interface"], "step": step["step"], "args": {}, "priority": step["priority"]}
    traits = list((task.node.get("instance_info") or {}).get("traits") or [])
    with task.conductor.db.read() as conn:
        templates = step_sets.templates_for_traits(conn, traits)
    requested = [step for template in templates for step in template["steps"]]
    requested += [dict(step) for step in user_steps or []]
    for step in check_requested(task, "deploy", requested):
        plan[(step["interface"], step["step"])] = step
    return _ordered([step for step in plan.values() if step["priority"] > 0])


def run_deploy_steps(task: Any, plan: Sequence[dict[str, Any]], start: int = 0) -> str | None:
    """Run the planned steps from ``start``, each shown as the node's deploy_step while it runs.

    Returns ASYNC when a step goes on outside the conductor (the node then
    waits for the agent); raises on failure.
    """
    info = task.internal_info
    info["deploy_steps"] = list(plan)
    task.update(driver_internal_info=info)
    for index in range(start, len(plan)):
        step = plan[index]
        info = task.internal_info
        info["deploy_step_index"] = index
        task.update(deploy_step=step, driver_internal_info=info)
        if getattr(task.driver, step["interface"]).execute_deploy_step(task, step) == ASYNC:
            return ASYNC
    info = task.internal_info
    info["deploy_steps"] = None
    info.pop("deploy_step_index", None)
    task.update(driver_internal_info=info)
    return None


# ------------------------------------------------------------- service


def service(task: Any, requested: Sequence[Mapping[str, Any]], disable_ramdisk: bool = False) -> None:
    """Node in ``servicing``: run ``requested`` in order, back to ``active`` (or ``service failed``)."""
    uuid = task.node["uuid"]
    try:
        plan = check_requested(task, "service", requested)
    except StepsInvalid as error:
        _service_failed(task, f"Cannot service node {uuid}: {error}")
        return
    if disable_ramdisk:
        needs = [step for step in plan if _requires_ramdisk(task, step)]
        if needs:
            _service_failed(task, f"Cannot service node {uuid}: service step {needs[0]!r} requires booting a "
                                  "ramdisk")
            return
    info = task.internal_info
    info["service_steps"] = plan
    info["service_disable_ramdisk"] = bool(disable_ramdisk)
    task.update(driver_internal_info=info, last_error=None)
    for index, step in enumerate(plan):
        info = task.internal_info
        info["service_step_index"] = index
        task.update(service_step=step, driver_internal_info=info)
        try:
            result = getattr(task.driver, step["interface"]).execute_service_step(task, step)
        except Exception as error:  # noqa: BLE001 - the step's failure is the node's last_error
            _service_failed(task, f"Node {uuid} failed service step {step!r}: {error}")
            return
        if result == ASYNC:
            task.process_event("wait", release=True)
            return
    task.process_event("done", service_step={}, driver_internal_info=_wipe(task.internal_info))


def _requires_ramdisk(task: Any, step: Mapping[str, Any]) -> bool:
    for offered in driver_steps(task, "service"):
        if (offered["interface"], offered["step"]) == (step["interface"], step["step"]):
            return bool(offered.get("requires_ramdisk"))
    return True


def _wipe(info: dict[str, Any]) -> dict[str, Any]:
    wiped = dict(info)
    wiped["service_steps"] = None
    for key in ("service_step_index", "service_disable_ramdisk"):
        wiped.pop(key, None)
    return wiped


def _service_failed(task: Any, message: str) -> None:
    LOG.warning("servicing of node %s failed: %s", task.node["uuid"], message)
    task.process_event("fail", last_error=message, service_step={}, driver_internal_info=_wipe(task.internal_info))


def abort_service(task: Any) -> None:
    """The abort verb in ``service wait``/``service hold`` (to ``service failed``) or ``service failed`` (to active)."""
    from corral.baremetal.domain import states

    if task.node["provision_state"] == states.SERVICEFAIL:
        task.process_event("abort", service_step={}, last_error=None)
        return
    task.process_event("abort", service_step={}, driver_internal_info=_wipe(task.internal_info),
                       last_error="By request, the service operation was aborted")
