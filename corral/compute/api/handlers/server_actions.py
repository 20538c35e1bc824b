"""POST /servers/{id}/action: upstream's server actions, with their schemas, policies and refusals.

Each action validates its body first (400), then finds the server (404),
checks its policy (403), then the lock, host and state checks of
upstream's ``compute/api.py`` (409), as Nova's decorators order them.
Actions the compute service carries out answer 202 at once; their
progress shows in the server's status and task state, and in
``os-instance-actions``.
"""

from __future__ import annotations

import re
import secrets
import string
from collections.abc import Callable
from typing import Any

import falcon

from corral.core import errors
from corral.core.http import Route, send_empty, send_json
from corral.compute import glance
from corral.compute.api import policies, util, validation
from corral.compute.api.errors import format_error
from corral.compute.api.handlers import servers as server_handlers
from corral.compute.api.state import ComputeState
from corral.compute.db import cell_queries as cq
from corral.compute.domain import images, quota, server_actions as actions, servers, states
from corral.compute.domain.exceptions import CellDown, ImageServiceFailed
from corral.compute.domain.servers import Found
from corral.compute.virt.driver import driver_for_hypervisor_type

LOCKED_REASON = (2, 73)
REBUILD_DESCRIPTION = (2, 19)
REBUILD_KEY_NAME = (2, 54)
REBUILD_USER_DATA = (2, 57)
REBUILD_TRUSTED_CERTS = (2, 63)
CREATE_IMAGE_ID = (2, 45)

_UUID = {"type": "string", "format": "uuid"}
_METADATA = {
    "type": "object",
    "patternProperties": {"^[a-zA-Z0-9-_:. ]{1,255}$": {"type": "string", "maxLength": 255}},
    "additionalProperties": False,
}
_NAME = {"type": "string", "format": "name", "minLength": 1, "maxLength": 255}


def _action_schema(name: str, body: dict[str, Any], required: bool = True) -> util.Schema:
    return util.Schema({
        "type": "object",
        "properties": {name: body},
        "required": [name] if required else [],
        "additionalProperties": False,
    })


def _rebuild_schema(description: bool, key_name: bool, user_data: bool, trusted_certs: bool) -> util.Schema:
    properties: dict[str, Any] = {
        "name": _NAME,
        "imageRef": _UUID,
        "adminPass": {"type": "string"},
        "metadata": _METADATA,
        "preserve_ephemeral": validation.BOOLEAN,
        "OS-DCF:diskConfig": {"type": "string", "enum": ["AUTO", "MANUAL"]},
        "accessIPv4": {"type": "string", "format": "ipv4"},
        "accessIPv6": {"type": "string", "format": "ipv6"},
    }
    if not user_data:
        properties["personality"] = {"type": "array", "items": {"type": "object"}}
    if description:
        properties["description"] = {"type": ["string", "null"], "maxLength": 255}
    if key_name:
        properties["key_name"] = {"oneOf": [{"type": "string", "minLength": 1, "maxLength": 255}, {"type": "null"}]}
    if user_data:
        properties["user_data"] = {"type": ["string", "null"], "format": "base64", "maxLength": 65535}
    if trusted_certs:
        properties["trusted_image_certificates"] = {
            "type": ["array", "null"], "minItems": 1, "maxItems": 50, "uniqueItems": True,
            "items": {"type": "string", "minLength": 1},
        }
    return _action_schema("rebuild", {
        "type": "object", "properties": properties, "required": ["imageRef"], "additionalProperties": False,
    })


_SCHEMAS: dict[str, list[tuple[tuple[int, int], util.Schema]]] = {
    # (lowest version, schema), highest lowest version first
    "os-start": [((2, 1), _action_schema("os-start", {}))],
    "os-stop": [((2, 1), _action_schema("os-stop", {}))],
    "reboot": [((2, 1), _action_schema("reboot", {
        "type": "object",
        "properties": {"type": {"type": "string", "enum": ["HARD", "Hard", "hard", "SOFT", "Soft", "soft"]}},
        "required": ["type"], "additionalProperties": False,
    }))],
    "rebuild": [
        ((2, 63), _rebuild_schema(True, True, True, True)),
        ((2, 57), _rebuild_schema(True, True, True, False)),
        ((2, 54), _rebuild_schema(True, True, False, False)),
        ((2, 19), _rebuild_schema(True, False, False, False)),
        ((2, 1), _rebuild_schema(False, False, False, False)),
    ],
    "rescue": [((2, 1), _action_schema("rescue", {
        "type": ["object", "null"],
        "properties": {"adminPass": {"type": "string"}, "rescue_image_ref": _UUID},
        "additionalProperties": False,
    }))],
    "unrescue": [((2, 1), _action_schema("unrescue", {}))],
    "lock": [
        ((2, 73), _action_schema("lock", {
            "type": ["object", "null"],
            "properties": {"locked_reason": {"type": "string", "minLength": 1, "maxLength": 255}},
            "additionalProperties": False,
        })),
        ((2, 1), _action_schema("lock", {})),
    ],
    "unlock": [((2, 1), _action_schema("unlock", {}))],
    "os-getConsoleOutput": [((2, 1), _action_schema("os-getConsoleOutput", {
        "type": "object",
        "properties": {"length": {"type": ["integer", "string", "null"], "pattern": "^-?[0-9]+$", "minimum": -1}},
        "additionalProperties": False,
    }))],
    "createImage": [((2, 1), _action_schema("createImage", {
        "type": "object", "properties": {"name": _NAME, "metadata": _METADATA},
        "required": ["name"], "additionalProperties": False,
    }))],
}


def _validate(req: falcon.Request, name: str, body: dict[str, Any]) -> None:
    for version, schema in _SCHEMAS.get(name, []):
        if req.context.at_least(*version):
            schema.validate(body)
            return


def _password(length: int = 12) -> str:
    alphabet = string.ascii_letters + string.digits
    return "".join(secrets.choice(alphabet) for _ in range(length))


def _find(state: ComputeState, req: falcon.Request, server_id: str, action: str) -> Found:
    return servers.find_server(state, req.context, server_id, cell_down_support=False, action=action)


def _authorize(state: ComputeState, req: falcon.Request, rule: str, found: Found) -> None:
    instance = found.instance or {}
    util.authorize(state, req, rule, {"project_id": found.mapping.project_id,
                                      "user_id": instance.get("user_id") or found.mapping.user_id})


# ----------------------------------------------------------------- power


def _start(state: ComputeState, req: falcon.Request, resp: falcon.Response, found: Found, body: Any) -> None:
    _authorize(state, req, policies.SERVERS_START, found)
    actions.check_lock(req.context, found)
    actions.check_host(found)
    actions.check_state(found, "start", states.ALLOW_START)
    actions.begin_task(state, req.context, found, action="start", instance_action="start", task="start",
                       task_state=states.POWERING_ON, params={})
    send_empty(resp, 202)


def _stop(state: ComputeState, req: falcon.Request, resp: falcon.Response, found: Found, body: Any) -> None:
    _authorize(state, req, policies.SERVERS_STOP, found)
    actions.check_lock(req.context, found)
    actions.check_host(found)
    actions.check_state(found, "stop", states.ALLOW_STOP)
    actions.begin_task(state, req.context, found, action="stop", instance_action="stop", task="stop",
                       task_state=states.POWERING_OFF, params={"timeout": state.conf.shutdown_timeout},
                       values={"progress": 0})
    send_empty(resp, 202)


def _reboot(state: ComputeState, req: falcon.Request, resp: falcon.Response, found: Found, body: Any) -> None:
    reboot_type = body["reboot"]["type"].upper()
    _authorize(state, req, policies.SERVERS_REBOOT, found)
    actions.check_lock(req.context, found)
    if reboot_type == "SOFT":
        actions.check_state(found, "reboot", states.ALLOW_SOFT_REBOOT)
        task_state = states.REBOOTING
    else:
        actions.check_state(found, "reboot", states.ALLOW_HARD_REBOOT, states.ALLOW_REBOOT_TASKS)
        task_state = states.REBOOTING_HARD
    actions.begin_task(state, req.context, found, action="reboot", instance_action="reboot", task="reboot",
                       task_state=task_state, params={"type": reboot_type})
    send_empty(resp, 202)


# --------------------------------------------------------------- rebuild


def _rebuild(state: ComputeState, req: falcon.Request, resp: falcon.Response, found: Found, body: Any) -> None:
    context = req.context
    rebuild = body["rebuild"]
    _authorize(state, req, policies.SERVERS_REBUILD, found)
    actions.check_lock(context, found)
    actions.check_state(found, "rebuild", states.ALLOW_REBUILD)
    instance = actions.instance_of(found)
    values: dict[str, Any] = {"progress": 0}
    if context.at_least(*REBUILD_KEY_NAME) and "key_name" in rebuild:
        key_name = rebuild["key_name"]
        values["key_name"] = key_name
        values["key_data"] = server_handlers.key_data(state, req, key_name) if key_name else None
    image = images.requested_image(state.images, server_handlers.forwarded_credentials(state, req),
                                   rebuild["imageRef"], not_found="Cannot find image for rebuild")
    metadata = rebuild.get("metadata")
    limit = quota.project_limits(state.conf, state.api_db, instance["project_id"])["metadata_items"]
    if metadata and limit >= 0 and len(metadata) > limit:
        raise errors.Forbidden(f"Maximum number of metadata items exceeds {limit}")
    images.check_flavor_image(image, _flavor(instance))
    values["image_ref"] = image["id"]
    if "name" in rebuild:
        values["display_name"] = rebuild["name"].strip()
    if context.at_least(*REBUILD_DESCRIPTION) and "description" in rebuild:
        values["display_description"] = rebuild["description"]
    if context.at_least(*REBUILD_USER_DATA) and "user_data" in rebuild:
        values["user_data"] = rebuild["user_data"]
    for field, column in (("accessIPv4", "access_ip_v4"), ("accessIPv6", "access_ip_v6")):
        if field in rebuild:
            values[column] = rebuild[field]
    password = rebuild.get("adminPass") or _password()
    params = {"admin_password": password, "original_vm_state": instance["vm_state"],
              "preserve_ephemeral": str(rebuild.get("preserve_ephemeral", False)).lower() in validation.TRUE_STRINGS}
    actions.begin_task(state, context, found, action="rebuild", instance_action="rebuild", task="rebuild",
                       task_state=states.REBUILDING, params=params, values=values, metadata=metadata)
    found = _find(state, req, found.mapping.instance_uuid, "rebuild")
    view = server_handlers.rebuild_view(state, req, found)
    if state.conf.api.enable_instance_password:
        view["adminPass"] = password
    if context.at_least(*REBUILD_USER_DATA):
        view["user_data"] = (found.instance or {}).get("user_data")
    resp.set_header("Location", view["links"][0]["href"])
    send_json(resp, {"server": view}, 202)


def _flavor(instance: dict[str, Any]) -> dict[str, Any]:
    """The embedded flavor, with the names the image checks read."""
    flavor = instance["flavor"]
    return {"memory_mb": flavor["memory_mb"], "root_gb": flavor["root_gb"]}


# ---------------------------------------------------------------- rescue


def _rescue(state: ComputeState, req: falcon.Request, resp: falcon.Response, found: Found, body: Any) -> None:
    rescue = body["rescue"] or {}
    password = rescue.get("adminPass") or _password()
    _authorize(state, req, policies.RESCUE, found)
    actions.check_lock(req.context, found)
    actions.check_state(found, "rescue", states.ALLOW_RESCUE)
    image_ref = rescue.get("rescue_image_ref")
    if image_ref:
        try:
            state.images.show(image_ref, server_handlers.forwarded_credentials(state, req))
        except (glance.ImageNotFound, glance.ImageBadRequest):
            raise errors.BadRequest(f"Requested rescue image '{image_ref}' is not supported") from None
        except glance.ImageNotAuthorized:
            raise errors.BadRequest(f"Not authorized for image {image_ref}.") from None
        except glance.GlanceConnectionFailed as error:
            raise ImageServiceFailed("nova.exception.GlanceConnectionFailed", str(error)) from error
        except glance.UnexpectedImageAnswer as error:
            raise ImageServiceFailed(error.exception_class, str(error)) from error
    actions.begin_task(state, req.context, found, action="rescue", instance_action="rescue", task="rescue",
                       task_state=states.RESCUING,
                       params={"rescue_password": password, "rescue_image_ref": image_ref})
    # Upstream answers 200 here (not 202), for backwards compatibility.
    send_json(resp, {"adminPass": password} if state.conf.api.enable_instance_password else {}, 200)


def _unrescue(state: ComputeState, req: falcon.Request, resp: falcon.Response, found: Found, body: Any) -> None:
    _authorize(state, req, policies.UNRESCUE, found)
    actions.check_lock(req.context, found)
    actions.check_state(found, "unrescue", states.ALLOW_UNRESCUE)
    actions.begin_task(state, req.context, found, action="unrescue", instance_action="unrescue", task="unrescue",
                       task_state=states.UNRESCUING, params={})
    send_empty(resp, 202)


# ------------------------------------------------------------------ lock


def _lock(state: ComputeState, req: falcon.Request, resp: falcon.Response, found: Found, body: Any) -> None:
    _authorize(state, req, policies.LOCK, found)
    reason = None
    if req.context.at_least(*LOCKED_REASON) and body["lock"] is not None:
        reason = body["lock"].get("locked_reason")
    instance = actions.instance_of(found)
    # Upstream: an owner locking a locked server changes nothing (an admin takes the lock over).
    if not (instance.get("locked") and instance["project_id"] == req.context.project_id):
        actions.set_lock(state, req.context, found, True, reason)
    send_empty(resp, 202)


def _unlock(state: ComputeState, req: falcon.Request, resp: falcon.Response, found: Found, body: Any) -> None:
    _authorize(state, req, policies.UNLOCK, found)
    if not actions.is_expected_locked_by(req.context, found):
        util.authorize(state, req, policies.UNLOCK_OVERRIDE, {"project_id": found.mapping.project_id})
    actions.set_lock(state, req.context, found, False)
    send_empty(resp, 202)


# --------------------------------------------------------------- console

_CONTROL = re.compile("[\x00-\x08\x0b-\x1f]")


def _console_output(state: ComputeState, req: falcon.Request, resp: falcon.Response, found: Found,
                    body: Any) -> None:
    _authorize(state, req, policies.CONSOLE_OUTPUT, found)
    length = body["os-getConsoleOutput"].get("length")
    actions.check_host(found)
    instance = actions.instance_of(found)

    def node_type(_cell: Any, database: Any) -> str | None:
        with database.read() as conn:
            for node in cq.compute_nodes(conn, host=instance["host"]):
                if node["hypervisor_hostname"] == instance.get("node"):
                    return str(node["hypervisor_type"])
        return None

    assert found.cell is not None
    try:
        hypervisor_type = state.cells.run_in_cell(found.cell, node_type)
    except Exception as error:
        raise CellDown(f"Cell {found.cell.uuid} did not answer: {error}") from error
    driver = driver_for_hypervisor_type(state.conf, hypervisor_type or "")
    try:
        if driver is None:
            raise NotImplementedError()
        output = driver.get_console_output(instance)
    except NotImplementedError:
        # Upstream's raise_feature_not_supported: an answer, not a failure, so it is not logged as one.
        body, content_type = format_error(req, errors.ApiError("The requested functionality is not supported.",
                                                               status=501))
        resp.status = 501
        resp.content_type = content_type
        resp.data = body
        return
    raw = output.encode("latin-1") if isinstance(output, str) else output
    if length is not None and int(length) != -1:
        # Upstream's _tail_log.
        raw = b"" if int(length) == 0 else b"\n".join(raw.split(b"\n")[-int(length):])
    send_json(resp, {"output": _CONTROL.sub("", raw.decode("ascii", "replace"))})


# ----------------------------------------------------------- createImage


def _create_image(state: ComputeState, req: falcon.Request, resp: falcon.Response, found: Found,
                  body: Any) -> None:
    entity = body["createImage"]
    _authorize(state, req, policies.SERVERS_CREATE_IMAGE, found)
    metadata = entity.get("metadata", {})
    instance = actions.instance_of(found)
    if not req.context.at_least(2, 39):
        limit = quota.project_limits(state.conf, state.api_db, instance["project_id"])["metadata_items"]
        if limit >= 0 and len(metadata) > limit:
            raise errors.Forbidden(f"Quota exceeded for metadata_items: Requested {len(metadata)}, but "
                                   f"already used 0 of {limit} metadata_items")
    # No lock check: upstream lets a locked server be snapshotted.
    actions.check_state(found, "createImage", states.ALLOW_SNAPSHOT)
    credentials = server_handlers.forwarded_credentials(state, req)
    image_body: dict[str, Any] = {
        "name": entity["name"].strip(), "image_type": "snapshot", "instance_uuid": instance["uuid"],
        "user_id": req.context.user_id,
    }
    if instance.get("image_ref"):
        image_body["base_image_ref"] = instance["image_ref"]
    image_body.update({key: value for key, value in metadata.items() if key not in image_body})
    try:
        image = state.images.create(image_body, credentials)
    except glance.ImageNotAuthorized:
        raise errors.Forbidden("Not authorized to create an image.") from None
    except glance.ImageBadRequest as error:
        raise errors.BadRequest(str(error)) from None
    except glance.GlanceConnectionFailed as error:
        raise ImageServiceFailed("nova.exception.GlanceConnectionFailed", str(error)) from error
    except glance.UnexpectedImageAnswer as error:
        raise ImageServiceFailed(error.exception_class, str(error)) from error
    try:
        actions.begin_task(state, req.context, found, action="createImage", instance_action="createImage",
                           task="snapshot", task_state=states.IMAGE_SNAPSHOT_PENDING,
                           params={"image_id": image["id"]})
    except Exception:
        # Upstream deletes the image when the server cannot take the snapshot.
        try:
            state.images.delete(image["id"], credentials)
        except glance.ImageError:
            pass
        raise
    if req.context.at_least(*CREATE_IMAGE_ID):
        send_json(resp, {"image_id": image["id"]}, 202)
        return
    resp.set_header("Location", state.images.image_url(image["id"]))
    send_empty(resp, 202)


# -------------------------------------------------------- soft delete


def _restore(state: ComputeState, req: falcon.Request, resp: falcon.Response, found: Found, body: Any) -> None:
    servers.restore_server(state, req.context, found.mapping.instance_uuid)
    send_empty(resp, 202)


def _force_delete(state: ComputeState, req: falcon.Request, resp: falcon.Response, found: Found,
                  body: Any) -> None:
    servers.force_delete_server(state, req.context, found.mapping.instance_uuid)
    send_empty(resp, 202)


Handler = Callable[[ComputeState, falcon.Request, falcon.Response, Found, Any], None]

_ACTIONS: dict[str, Handler] = {
    "os-start": _start, "os-stop": _stop, "reboot": _reboot, "rebuild": _rebuild, "rescue": _rescue,
    "unrescue": _unrescue, "lock": _lock, "unlock": _unlock, "os-getConsoleOutput": _console_output,
    "createImage": _create_image, "restore": _restore, "forceDelete": _force_delete,
}


def action(state: ComputeState, req: falcon.Request, resp: falcon.Response, server_id: str) -> None:
    body = util.json_body(state, req)
    if not isinstance(body, dict) or len(body) != 1:
        raise errors.BadRequest("Malformed request body")
    (name,) = body
    handler = _ACTIONS.get(name)
    if handler is None:
        raise errors.BadRequest(f"There is no such action: {name}")
    _validate(req, name, body)
    if name in ("restore", "forceDelete"):
        # Their own lookups (a soft-deleted server is found there).
        handler(state, req, resp, Found(mapping=_Mapping(server_id), cell=None), body)
        return
    found = _find(state, req, server_id, name)
    handler(state, req, resp, found, body)


class _Mapping:
    def __init__(self, instance_uuid: str) -> None:
        self.instance_uuid = instance_uuid



ROUTES = [Route("/servers/{server_id}/action", {"POST": action})]
