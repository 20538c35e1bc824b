"""Node states: provision verbs, power, maintenance, clean steps."""

from __future__ import annotations

from typing import Any

import falcon

from corral.baremetal.api import common, schemas, views
from corral.baremetal.api.errors import RetryLater
from corral.baremetal.api.state import BaremetalState
from corral.baremetal.conductor.manager import StepsPending
from corral.baremetal.domain import states
from corral.baremetal.drivers import deploy_utils
from corral.baremetal.drivers.base import DriverError
from corral.core.errors import ApiError, BadRequest, NotAcceptable
from corral.core.http import Endpoint, Route, send_json

# Verbs and the microversion that introduced them.
VERB_VERSIONS = {
    "manage": (1, 4),
    "provide": (1, 4),
    "inspect": (1, 6),
    "abort": (1, 13),
    "clean": (1, 15),
    "adopt": (1, 17),
    "rescue": (1, 38),
    "unrescue": (1, 38),
    "deploy": (1, 73),
    "undeploy": (1, 73),
    "unhold": (1, 85),
    "service": (1, 87),
}
CONFIGDRIVE_OBJECT_VERSION = (1, 56)
CONFIGDRIVE_VENDOR_DATA_VERSION = (1, 59)
DEPLOY_STEPS_VERSION = (1, 69)
CLEAN_DISABLE_RAMDISK_VERSION = (1, 70)
SERVICE_DISABLE_RAMDISK_VERSION = (1, 108)
RUNBOOKS_VERSION = (1, 92)
# Abort from these waiting states appeared later than the verb.
ABORT_VERSIONS = {states.INSPECTWAIT: (1, 41), states.DEPLOYWAIT: (1, 110)}
SOFT_POWER_VERSION = (1, 27)


def _states_location(req: falcon.Request, node_ident: str) -> str:
    return f"{views.links.base(req)}/v1/nodes/{node_ident}/states"


def get_states(state: BaremetalState, req: falcon.Request, resp: falcon.Response, node_ident: str) -> None:
    node = common.find_node(state, req, node_ident)
    common.authorize(state, req, "baremetal:node:get_states", node)
    send_json(resp, views.states_body(req, node))


def _validate_steps(steps: list[dict[str, Any]], field: str) -> None:
    schemas.validate_full(schemas.CLEAN_STEPS, steps, f"Invalid {field}")
    # Upstream's schema has the keys; Corral never runs a step on child
    # nodes, and must not pretend it did.
    if any(step.get("execute_on_child_nodes") for step in steps):
        raise BadRequest(f"Invalid {field}: running steps on child nodes is not supported")


def set_provision_state(state: BaremetalState, req: falcon.Request, resp: falcon.Response,
                        node_ident: str) -> None:
    node = common.find_node(state, req, node_ident)
    common.authorize(state, req, "baremetal:node:set_provision_state", node)
    body = common.json_body(state, req)
    schemas.validate(schemas.PROVISION, body, "provision")
    if body.get("runbook") is None:
        for steps_field in ("clean_steps", "service_steps"):
            if body.get(steps_field):
                common.authorize(state, req, f"baremetal:node:set_provision_state:{steps_field}", node)
    target = body.get("target")
    if target is None:
        raise BadRequest("Missing mandatory parameter: target")
    version = VERB_VERSIONS.get(target)
    if version is not None and not req.context.at_least(*version):
        raise NotAcceptable("Request not acceptable.")
    if target in ("active", "deploy", "rebuild") and node["maintenance"]:
        raise BadRequest(
            f"The provisioning operation can't be performed on node {node['uuid']} because it's in maintenance mode."
        )
    if target in ("rescue", "unrescue") and node["maintenance"]:
        operation = {"rescue": "rescuing", "unrescue": "unrescuing"}[target]
        raise BadRequest(f"The {operation} operation can't be performed on node {node['uuid']} because it's in "
                         "maintenance mode.")
    if target == "provide" and node.get("retired"):
        raise BadRequest(f"The provide operation can't be performed on node {node['uuid']} because it is retired.")
    event = states.VERB_EVENTS.get(target, target)
    if states.next_state(node["provision_state"], event) is None:
        if node.get("reservation"):
            raise ApiError(f"Node {node['uuid']} is locked by host {node['reservation']}, please retry after the "
                           "current operation is completed.", status=409)
        raise BadRequest(f'The requested action "{target}" can not be performed on node "{node["uuid"]}" while it '
                         f'is in state "{node["provision_state"]}".')
    clean_steps = body.get("clean_steps")
    service_steps = body.get("service_steps")
    disable_ramdisk = body.get("disable_ramdisk")
    if body.get("runbook") is not None:
        clean_steps, service_steps, disable_ramdisk = _runbook_steps(state, req, node, target, body)
    _check_disable_ramdisk(req, target, disable_ramdisk)
    if target == "clean":
        if not clean_steps:
            raise BadRequest('"clean_steps" is required when setting target provision state to clean')
        _validate_steps(clean_steps, "clean_steps")
    elif clean_steps:
        raise BadRequest('"clean_steps" is only valid when setting target provision state to clean')
    deploy_steps = body.get("deploy_steps")
    if deploy_steps:
        if not req.context.at_least(*DEPLOY_STEPS_VERSION):
            raise views.not_acceptable(DEPLOY_STEPS_VERSION)
        if target not in ("active", "rebuild", "deploy"):
            raise BadRequest('"deploy_steps" is only valid when setting target provision state to active or rebuild')
        schemas.validate_full(schemas.DEPLOY_STEPS, deploy_steps, "Invalid deploy_steps")
        deploy_steps = [{**step, "priority": int(step["priority"])} for step in deploy_steps]
    _check_configdrive(req, target, body.get("configdrive"), node)
    if target == "rescue":
        password = body.get("rescue_password")
        if not password or not str(password).strip():
            raise BadRequest('A non-empty "rescue_password" is required when setting target provision state '
                             "to rescue")
    elif body.get("rescue_password") is not None:
        raise BadRequest('"rescue_password" is only valid when setting target provision state to rescue')
    abort_version = ABORT_VERSIONS.get(node["provision_state"])
    if target == "abort" and abort_version is not None and not req.context.at_least(*abort_version):
        raise NotAcceptable("Request not acceptable.")
    if service_steps and target != "service":
        raise BadRequest('"service_steps" is only valid when setting target provision state to service')
    if target == "service":
        if not service_steps:
            raise BadRequest('"service_steps" is required when setting target provision state to service')
        _validate_steps(service_steps, "service_steps")
    common.conductor_call(
        state, node, "do_provisioning_action", action=target, clean_steps=clean_steps,
        configdrive=body.get("configdrive"), rescue_password=body.get("rescue_password"),
        deploy_steps=deploy_steps, service_steps=service_steps, disable_ramdisk=bool(disable_ramdisk),
    )
    common.accepted(resp, _states_location(req, node_ident))


_B64_ALPHABET = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=\n\r\t ")


def _check_configdrive(req: falcon.Request, target: str, configdrive: Any, node: dict[str, Any]) -> None:
    """A config drive: base64 text or a URL, or (1.56) an object to build one from ((1.59) with vendor_data).

    One larger than the agent writes (64 MiB) is refused here rather than
    failing the deployment once the machine booted.
    """
    if not configdrive:
        return
    if target not in ("active", "deploy", "rebuild"):
        raise BadRequest("Adding a config drive is only supported when setting provision state to active, rebuild")
    if isinstance(configdrive, dict):
        schemas.validate_full(schemas.CONFIGDRIVE, configdrive, "Invalid configdrive format")
        if not req.context.at_least(*CONFIGDRIVE_OBJECT_VERSION):
            raise BadRequest("Providing a JSON object for configdrive is only supported starting with API version "
                             "1.56")
        if "vendor_data" in configdrive and not req.context.at_least(*CONFIGDRIVE_VENDOR_DATA_VERSION):
            raise BadRequest("Providing vendor_data in configdrive is only supported starting with API version 1.59")
    elif "://" not in configdrive and set(configdrive) - _B64_ALPHABET:
        raise BadRequest("Invalid configdrive format: it is neither a JSON, nor a URL, nor a base64 string")
    try:
        deploy_utils.check_configdrive_size(configdrive, node["uuid"])
    except DriverError as error:
        raise BadRequest(str(error)) from None


def _check_disable_ramdisk(req: falcon.Request, target: str, disable_ramdisk: Any) -> None:
    if disable_ramdisk is None:
        return
    if not isinstance(disable_ramdisk, bool):
        raise BadRequest(f"Invalid disable_ramdisk: {disable_ramdisk!r} is not a boolean")
    versions = {"clean": CLEAN_DISABLE_RAMDISK_VERSION, "service": SERVICE_DISABLE_RAMDISK_VERSION}
    if target not in versions:
        raise BadRequest("disable_ramdisk is supported only with manual cleaning or servicing")
    if not req.context.at_least(*versions[target]):
        raise NotAcceptable("disable_ramdisk is not acceptable in this API version")


def _runbook_steps(state: BaremetalState, req: falcon.Request, node: dict[str, Any], target: str,
                   body: dict[str, Any]) -> tuple[Any, Any, Any]:
    """The clean or service steps of the runbook the request names (1.92), once the node may use it."""
    from corral.baremetal.api.handlers import runbooks

    if not req.context.at_least(*RUNBOOKS_VERSION):
        raise NotAcceptable("Request not acceptable.")
    if target not in ("clean", "service"):
        raise BadRequest("\"runbooks\" is only valid when setting target provision state to any of "
                         "['clean', 'service']")
    if body.get("clean_steps") or body.get("service_steps"):
        steps_name = "clean_steps" if target == "clean" else "service_steps"
        raise BadRequest(f'Please provide either "{steps_name}" or a runbook, but not both.')
    runbook = runbooks.usable_runbook(state, req, body["runbook"])
    node_traits = set(common.traits_of(state, [node["id"]])[node["id"]])
    if req.context.at_least(*runbooks.TRAITS_VERSION):
        if not runbook["traits"]:
            raise BadRequest(f"Runbook {runbook['uuid']} has no traits configured. Please ask an administrator "
                             "to add traits to the runbook.")
        if not set(runbook["traits"]) & node_traits:
            raise BadRequest(f"This runbook has not been approved for use on this node {node['uuid']}. The node "
                             f"does not have any of the runbook's traits {sorted(runbook['traits'])}. Please ask "
                             "an administrator to add a matching trait to your node.")
    elif runbook["name"] not in node_traits:
        raise BadRequest(f"This runbook has not been approved for use on this node {node['uuid']}. Please ask an "
                         "administrator to add it to your node traits.")
    steps = [{"interface": step["interface"], "step": step["step"], "args": step["args"]}
             for step in sorted(runbook["steps"], key=lambda step: step["order"])]
    disable_ramdisk = runbook["disable_ramdisk"] or None
    if target == "clean":
        return steps, None, disable_ramdisk
    return None, steps, disable_ramdisk


def set_power_state(state: BaremetalState, req: falcon.Request, resp: falcon.Response, node_ident: str) -> None:
    node = common.find_node(state, req, node_ident)
    common.authorize(state, req, "baremetal:node:set_power_state", node)
    body = common.json_body(state, req)
    if not isinstance(body, dict):
        raise BadRequest("Schema error for power: the body must be an object")
    target = body.get("target")
    if target is None:
        raise BadRequest("Missing mandatory parameter: target")
    timeout = body.get("timeout")
    soft = target in (states.SOFT_POWER_OFF, states.SOFT_REBOOT)
    if (soft or timeout is not None) and not req.context.at_least(*SOFT_POWER_VERSION):
        raise NotAcceptable("Request not acceptable.")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int) or timeout < 1):
        raise BadRequest(f"Invalid timeout value {timeout}. The timeout must be a positive integer.")
    if target not in (states.POWER_ON, states.POWER_OFF, states.REBOOT, states.SOFT_POWER_OFF, states.SOFT_REBOOT):
        raise BadRequest(f"Invalid power state transition requested: {target}")
    if node["provision_state"] in states.WORKING_STATES:
        raise ApiError(
            f"Node {node['uuid']} is in a state transition ({node['provision_state']}); power changes wait.",
            status=409,
        )
    common.conductor_call(state, node, "change_power_state", target=target, timeout=timeout)
    common.accepted(resp, _states_location(req, node_ident))


def set_maintenance(state: BaremetalState, req: falcon.Request, resp: falcon.Response, node_ident: str) -> None:
    node = common.find_node(state, req, node_ident)
    common.authorize(state, req, "baremetal:node:set_maintenance", node)
    body = common.json_body(state, req, required=False) or {}
    if not isinstance(body, dict) or set(body) - {"reason"}:
        raise BadRequest("Schema error for maintenance: only 'reason' is accepted")
    reason = body.get("reason")
    if reason is not None and not isinstance(reason, str):
        raise BadRequest("Schema error for maintenance: 'reason' must be a string")
    common.conductor_call(state, node, "set_maintenance", maintenance=True, reason=reason)
    common.accepted(resp, f"{views.links.base(req)}/v1/nodes/{node_ident}")


def unset_maintenance(state: BaremetalState, req: falcon.Request, resp: falcon.Response, node_ident: str) -> None:
    node = common.find_node(state, req, node_ident)
    common.authorize(state, req, "baremetal:node:clear_maintenance", node)
    common.conductor_call(state, node, "set_maintenance", maintenance=False)
    common.accepted(resp, f"{views.links.base(req)}/v1/nodes/{node_ident}")


def get_console(state: BaremetalState, req: falcon.Request, resp: falcon.Response, node_ident: str) -> None:
    node = common.find_node(state, req, node_ident)
    common.authorize(state, req, "baremetal:node:get_console", node)
    send_json(resp, common.conductor_call(state, node, "get_console_information"))


def set_console(state: BaremetalState, req: falcon.Request, resp: falcon.Response, node_ident: str) -> None:
    node = common.find_node(state, req, node_ident)
    common.authorize(state, req, "baremetal:node:set_console_state", node)
    body = common.json_body(state, req)
    if not isinstance(body, dict) or "enabled" not in body:
        raise BadRequest("Missing mandatory parameter: enabled")
    enabled = body["enabled"]
    if isinstance(enabled, str):
        enabled = {"true": True, "false": False}.get(enabled.lower(), enabled)
    if not isinstance(enabled, bool):
        raise BadRequest(f"Invalid value for enabled: {body['enabled']!r} is not a boolean.")
    common.conductor_call(state, node, "set_console_mode", enabled=enabled)
    common.accepted(resp, f"{_states_location(req, node_ident)}/console")


def clean_steps(state: BaremetalState, req: falcon.Request, resp: falcon.Response, node_ident: str) -> None:
    """GET /v1/nodes/{node}/cleaning/steps (design: manual cleaning)."""
    node = common.find_node(state, req, node_ident)
    common.authorize(state, req, "baremetal:node:clean_steps:get", node)
    raw = req.get_param("min_priority")
    min_priority = 0
    if raw is not None:
        try:
            min_priority = int(raw)
        except ValueError:
            raise BadRequest(f"Invalid min_priority {raw!r}: must be a non-negative integer.") from None
        if min_priority < 0:
            raise BadRequest(f"Invalid min_priority {raw!r}: must be a non-negative integer.")
    if node["provision_state"] == states.ENROLL:
        raise RetryLater(
            f"The clean steps of node {node['uuid']} are not available yet: it is still in enroll.",
            headers={"Retry-Request-After": "-1"},
        )
    try:
        steps = common.conductor_call(state, node, "get_clean_steps", min_priority=min_priority)
    except StepsPending as pending:
        raise RetryLater(pending.message, headers={"Retry-Request-After": str(pending.extra["retry_after"])}) from None
    except ApiError as error:
        if error.status == 202:
            raise RetryLater(error.message, headers={"Retry-Request-After": str(error.extra.get("retry_after", -1))}) from None
        raise
    send_json(resp, [_step_view(step) for step in steps])


def _step_view(step: dict[str, Any]) -> dict[str, Any]:
    return {
        "interface": step["interface"],
        "step": step["step"],
        "priority": step["priority"],
        "abortable": step["abortable"],
        "args": [
            {"name": name, "description": info["description"], "required": info["required"]}
            for name, info in sorted((step.get("argsinfo") or {}).items())
        ],
    }


ROUTES = [
    Route("/v1/nodes/{node_ident}/states", {"GET": get_states}),
    Route("/v1/nodes/{node_ident}/states/provision", {"PUT": set_provision_state}),
    Route("/v1/nodes/{node_ident}/states/power", {"PUT": set_power_state}),
    Route("/v1/nodes/{node_ident}/states/console", {"GET": get_console, "PUT": set_console}),
    Route("/v1/nodes/{node_ident}/maintenance", {"PUT": set_maintenance, "DELETE": unset_maintenance}),
    Route("/v1/nodes/{node_ident}/cleaning/steps", {"GET": Endpoint(clean_steps, min_version=(1, 15))}),
]
