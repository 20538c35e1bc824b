"""JSON schemas of request bodies and how their errors read (upstream's wording)."""

from __future__ import annotations

from typing import Any

import jsonschema

from corral.baremetal.drivers.base import CLEAN_STEP_INTERFACES, INTERFACE_TYPES
from corral.core.errors import BadRequest

NAME_PATTERN = r"^[a-zA-Z0-9-._~]+$"
UUID_PATTERN = r"^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$"
TRAIT_PATTERN = r"^CUSTOM_[A-Z0-9_]+$"

_STRING_OR_NULL = {"type": ["string", "null"], "maxLength": 255}
_OBJECT = {"type": ["object", "null"]}

NODE_PROPERTIES: dict[str, Any] = {
    "automated_clean": {"type": ["boolean", "null"]},
    "chassis_uuid": {"type": ["string", "null"], "pattern": UUID_PATTERN},
    "conductor_group": {"type": "string", "maxLength": 255, "pattern": r"^[a-zA-Z0-9_\-\.]*$"},
    "console_enabled": {"type": "boolean"},
    "description": {"type": ["string", "null"], "maxLength": 4096},
    "driver": {"type": "string", "minLength": 1, "maxLength": 255},
    "driver_info": _OBJECT,
    "extra": _OBJECT,
    "instance_info": _OBJECT,
    "instance_uuid": {"type": ["string", "null"], "pattern": UUID_PATTERN},
    "maintenance": {"type": "boolean"},
    "name": {"type": ["string", "null"], "maxLength": 255, "pattern": NAME_PATTERN},
    "owner": _STRING_OR_NULL,
    "properties": _OBJECT,
    "protected": {"type": "boolean"},
    "protected_reason": {"type": ["string", "null"]},
    "resource_class": {"type": ["string", "null"], "maxLength": 80},
    "uuid": {"type": "string", "pattern": UUID_PATTERN},
    **{f"{name}_interface": _STRING_OR_NULL for name in INTERFACE_TYPES if name != "firmware"},
}

NODE_CREATE = {
    "type": "object",
    "properties": NODE_PROPERTIES,
    "required": ["driver"],
    "additionalProperties": False,
}

# After a patch: the same types, nothing required beyond the driver.
NODE_PATCHED = {"type": "object", "properties": NODE_PROPERTIES, "required": ["driver"]}

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
        },
        "additionalProperties": False,
    },
}

PROVISION = {
    "type": "object",
    "properties": {
        "target": {"type": "string"},
        "clean_steps": {},
        "configdrive": {"type": ["string", "object", "null"]},
        "rescue_password": {"type": "string"},
    },
}


def validate(schema: dict[str, Any], value: Any, what: str) -> None:
    """400 "Schema error for <what>: <first error>" unless ``value`` matches."""
    error = jsonschema.exceptions.best_match(jsonschema.Draft4Validator(schema).iter_errors(value))
    if error is not None:
        raise BadRequest(f"Schema error for {what}: {error.message}")


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
