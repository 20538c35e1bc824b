"""JSON schemas of request bodies and how their errors read (upstream's wording)."""

from __future__ import annotations

from typing import Any

import jsonschema

from corral.baremetal.drivers.base import CLEAN_STEP_INTERFACES, INTERFACE_TYPES
from corral.core.errors import BadRequest

NAME_PATTERN = r"^[a-zA-Z0-9-._~]+$"
UUID_PATTERN = r"^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$"
TRAIT_PATTERN = r"^CUSTOM_[A-Z0-9_]+$"

_STRING_OR_NULL = {"type": ["string", "null"]}
_OBJECT = {"type": ["object", "null"]}
# Booleans may also arrive as strings ("true", "off" ...), as upstream accepts.
_BOOLEAN_LIKE = {"type": ["string", "boolean", "null"]}

# A node body: the types upstream's schema checks.  Formats (UUIDs,
# booleans given as text, names) are checked afterwards with upstream's
# own wording (see check_node_formats).
NODE_PROPERTIES: dict[str, Any] = {
    "automated_clean": _BOOLEAN_LIKE,
    "boot_mode": _STRING_OR_NULL,
    "chassis_uuid": _STRING_OR_NULL,
    "conductor_group": _STRING_OR_NULL,
    "console_enabled": _BOOLEAN_LIKE,
    "description": {"type": ["string", "null"], "maxLength": 4096},
    "disable_power_off": _BOOLEAN_LIKE,
    "driver": {"type": "string"},
    "driver_info": _OBJECT,
    "extra": _OBJECT,
    "instance_info": _OBJECT,
    "instance_name": {"type": ["string", "null"], "minLength": 1, "maxLength": 255},
    "instance_uuid": _STRING_OR_NULL,
    "lessee": _STRING_OR_NULL,
    "maintenance": _BOOLEAN_LIKE,
    "name": _STRING_OR_NULL,
    "network_data": _OBJECT,
    "owner": _STRING_OR_NULL,
    "parent_node": {"type": ["string", "null"], "maxLength": 36},
    "properties": _OBJECT,
    "resource_class": {"type": ["string", "null"], "maxLength": 80},
    "retired": _BOOLEAN_LIKE,
    "retired_reason": _STRING_OR_NULL,
    "secure_boot": _BOOLEAN_LIKE,
    "shard": _STRING_OR_NULL,
    "uuid": _STRING_OR_NULL,
    **{f"{name}_interface": _STRING_OR_NULL for name in INTERFACE_TYPES},
}

NODE_CREATE = {
    "type": "object",
    "properties": NODE_PROPERTIES,
    "required": ["driver"],
    "additionalProperties": False,
}

# After a patch: the same types, plus what only a patch may set.
NODE_PATCHED = {
    "type": "object",
    "properties": {**NODE_PROPERTIES, "protected": _BOOLEAN_LIKE, "protected_reason": _STRING_OR_NULL},
    "required": ["driver"],
}

# Fields checked after the schema, as upstream does, with its wording.
BOOLEAN_FIELDS = ("automated_clean", "console_enabled", "disable_power_off", "protected", "maintenance",
                  "retired", "secure_boot")
UUID_FIELDS = ("chassis_uuid", "instance_uuid", "uuid")
LENGTH_LIMITS = {"owner": 255, "lessee": 255, "shard": 255, "conductor_group": 255, "retired_reason": 65535,
                 "boot_mode": 16, "health": 32}
CONDUCTOR_GROUP_PATTERN = r"^[a-zA-Z0-9_\-\.]*$"


def check_node_formats(node: dict[str, Any], *, node_uuid: str | None = None) -> dict[str, Any]:
    """Upstream's per-field checks after the schema: booleans converted, UUIDs checked.

    Returns the node with boolean-like strings turned into booleans.
    ``node_uuid`` names the node being patched (for the name error).
    """
    import re

    from oslo_utils import strutils, uuidutils

    checked = dict(node)
    for field in BOOLEAN_FIELDS:
        value = checked.get(field)
        if value is None or isinstance(value, bool):
            continue
        try:
            checked[field] = strutils.bool_from_string(value, strict=True)
        except ValueError as error:
            raise BadRequest(f"Invalid {field}: {error}") from None
    for field in UUID_FIELDS:
        value = checked.get(field)
        if value is not None and not uuidutils.is_uuid_like(value):
            raise BadRequest(f"Expected UUID for {field}: {value}")
    name = checked.get("name")
    if name is not None and not is_valid_node_name(name):
        if node_uuid is None:
            raise BadRequest(f"Cannot create node with invalid name '{name}'")
        raise BadRequest(f"Node {node_uuid}: Cannot change name to invalid name '{name}'")
    group = checked.get("conductor_group")
    if group is not None and re.match(CONDUCTOR_GROUP_PATTERN, group) is None:
        raise BadRequest(f"Expected a conductor group but received {group}.")
    for field, limit in LENGTH_LIMITS.items():
        value = checked.get(field)
        if isinstance(value, str) and len(value) > limit:
            raise BadRequest(f"Schema error for node: {value!r} is too long (more than {limit} characters "
                             f"for {field})")
    return checked


def is_valid_node_name(name: Any) -> bool:
    """A logical name (RFC 3986 unreserved characters) that is not UUID-like."""
    import re

    from oslo_utils import uuidutils

    return (isinstance(name, str) and 0 < len(name) <= 255 and re.match(NAME_PATTERN, name) is not None
            and not uuidutils.is_uuid_like(name))


PATCH = {
    "type": "array",
    "items": {
        "type": "object",
        "properties": {
            "op": {"type": "string", "enum": ["add", "replace", "remove"]},
            "path": {"type": "string", "pattern": r"^(/[\w\-\.~]+)+$"},
            "value": {},
        },
        "required": ["op", "path"],
        "additionalProperties": False,
    },
}

TRAITS = {
    "type": "object",
    "properties": {
        "traits": {
            "type": "array",
            "items": {"anyOf": [{"type": "string", "maxLength": 255, "pattern": TRAIT_PATTERN},
                                {"type": "string", "enum": []}]},
        }
    },
    "required": ["traits"],
    "additionalProperties": False,
}

CLEAN_STEPS = {
    "type": "array",
    "minItems": 1,
    "items": {
        "type": "object",
        "required": ["interface", "step"],
        "properties": {
            "interface": {"description": "driver interface", "enum": list(CLEAN_STEP_INTERFACES)},
            "step": {"description": "name of clean step", "type": "string", "minLength": 1},
            "args": {"description": "additional args", "type": "object", "properties": {}},
            "order": {"anyOf": [{"type": "integer", "minimum": 0},
                                {"type": "string", "minLength": 1, "pattern": "^[0-9]+$"}]},
            # Upstream's keys for steps run on a parent's child nodes; Corral
            # refuses them when they ask for that (see node_states).
            "execute_on_child_nodes": {"description": "Boolean if the step should be executed on child nodes.",
                                       "type": "boolean"},
            "limit_child_node_execution": {"description": "List of nodes upon which to execute child node steps on.",
                                           "type": "array"},
        },
        "additionalProperties": False,
    },
}

DEPLOY_STEPS = {
    "type": "array",
    "items": {
        "type": "object",
        "required": ["interface", "step", "args", "priority"],
        "properties": {
            "interface": {"description": "driver interface", "enum": list(INTERFACE_TYPES)},
            "step": {"description": "name of deploy step", "type": "string", "minLength": 1},
            "args": {"description": "additional args", "type": "object"},
            "priority": {"anyOf": [{"type": "integer", "minimum": 0},
                                   {"type": "string", "minLength": 1, "pattern": "^[0-9]+$"}]},
        },
        "additionalProperties": False,
    },
}

CONFIGDRIVE = {
    "type": "object",
    "properties": {
        "meta_data": {"type": "object"},
        "network_data": {"type": "object"},
        "user_data": {"type": ["object", "array", "string", "null"]},
        "vendor_data": {"type": "object"},
    },
    "additionalProperties": False,
}

PROVISION = {
    "type": "object",
    "properties": {
        "target": {"type": "string"},
        "clean_steps": {"type": ["array", "null"]},
        "deploy_steps": {"type": ["array", "null"]},
        "service_steps": {"type": ["array", "null"]},
        "configdrive": {"type": ["string", "object", "null"]},
        "rescue_password": {"type": "string"},
        "disable_ramdisk": {},
        "runbook": {"type": ["string", "null"]},
    },
    "additionalProperties": False,
}


def validate(schema: dict[str, Any], value: Any, what: str | None) -> None:
    """400 "Schema error for <what>: <first error>" unless ``value`` matches.

    With ``what`` None the text is "Schema error: ..." (upstream's newer
    validators).  A vague error names its likeliest cause, as upstream does.
    """
    error = jsonschema.exceptions.best_match(
        jsonschema.Draft4Validator(schema, format_checker=FORMATS).iter_errors(value))
    if error is not None:
        message = f"Schema error for {what}: {error.message}" if what else f"Schema error: {error.message}"
        cause = None
        current = error
        while current.context:
            current = jsonschema.exceptions.best_match(current.context)
            cause = current.message
        if cause is not None:
            message += f". Possible root cause: {cause}"
        raise BadRequest(message)


FORMATS = jsonschema.FormatChecker()


@FORMATS.checks("uuid")
def _is_uuid(value: object) -> bool:
    from oslo_utils import uuidutils

    return not isinstance(value, str) or uuidutils.is_uuid_like(value)


@FORMATS.checks("mac-address")
def _is_mac(value: object) -> bool:
    from oslo_utils import netutils

    return not isinstance(value, str) or netutils.is_valid_mac(value)


def validate_full(schema: dict[str, Any], value: Any, prefix: str) -> None:
    """400 with the full jsonschema report, as upstream words clean_steps errors."""
    error = jsonschema.exceptions.best_match(jsonschema.Draft4Validator(schema).iter_errors(value))
    if error is not None:
        raise BadRequest(f"{prefix}: {error}")


def is_valid_trait(trait: Any) -> bool:
    import re

    standard = _standard_traits()
    return isinstance(trait, str) and len(trait) <= 255 and (
        re.match(TRAIT_PATTERN, trait) is not None or trait in standard
    )


def _standard_traits() -> frozenset[str]:
    import os_traits

    return frozenset(os_traits.get_traits())


def traits_schema() -> dict[str, Any]:
    """The traits body schema with upstream's list of standard traits."""
    schema = {**TRAITS}
    items = {"anyOf": [{"type": "string", "maxLength": 255, "pattern": TRAIT_PATTERN},
                       {"type": "string", "enum": sorted(_standard_traits())}]}
    schema["properties"] = {"traits": {"type": "array", "items": items}}
    return schema
