"""Request schemas for allocations, by microversion.

1.0-1.11 send a list of {resource_provider: {uuid}, resources}; 1.12 turns
it into a dict keyed by provider; 1.8 requires project and user; 1.28 adds
the consumer generation (and allows an empty dict, the generation-safe
delete); 1.34 accepts request-group mappings; 1.38 requires a consumer type.
"""

from __future__ import annotations

from typing import Any

from corral.placement.api.schemas.common import GENERATION, UUID

_RESOURCES = {
    "type": "object",
    "minProperties": 1,
    "patternProperties": {"^[A-Z0-9_]+$": {"type": "integer", "minimum": 1}},
    "additionalProperties": False,
}
_EXTERNAL_ID = {"type": "string", "minLength": 1, "maxLength": 255}
_CONSUMER_TYPE = {"type": "string", "pattern": "^[A-Z0-9_]+$", "minLength": 1, "maxLength": 255}
# As upstream: the group-name pattern is unanchored and other keys are not refused.
_MAPPINGS = {
    "type": "object",
    "minProperties": 1,
    "patternProperties": {"[a-zA-Z0-9_-]{1,64}": {"type": "array", "minItems": 1, "items": UUID}},
}

_LIST_FORM = {
    "type": "array",
    "minItems": 1,
    "items": {
        "type": "object",
        "properties": {
            "resource_provider": {
                "type": "object",
                "properties": {"uuid": UUID},
                "additionalProperties": False,
                "required": ["uuid"],
            },
            "resources": _RESOURCES,
        },
        "required": ["resource_provider", "resources"],
        "additionalProperties": False,
    },
}


def _dict_form(min_properties: int) -> dict[str, Any]:
    return {
        "type": "object",
        "minProperties": min_properties,
        "patternProperties": {
            "^[0-9a-fA-F-]{36}$": {
                "type": "object",
                "properties": {"generation": GENERATION, "resources": _RESOURCES},
                "required": ["resources"],
                "additionalProperties": False,
            }
        },
        "additionalProperties": False,
    }


def consumer_section(version: tuple[int, int]) -> dict[str, Any]:
    """The body of PUT /allocations/{consumer} (and one consumer of POST) at ``version``."""
    required = ["allocations"]
    properties: dict[str, Any] = {
        "allocations": _LIST_FORM if version < (1, 12) else _dict_form(0 if version >= (1, 28) else 1)
    }
    # Before 1.8 the project and user are not part of the body at all.
    if version >= (1, 8):
        properties.update(project_id=_EXTERNAL_ID, user_id=_EXTERNAL_ID)
        required += ["project_id", "user_id"]
    if version >= (1, 28):
        # Upstream's (meaningless) additionalProperties shows in its error messages.
        properties["consumer_generation"] = {"type": ["integer", "null"], "additionalProperties": False}
        required.append("consumer_generation")
    if version >= (1, 34):
        properties["mappings"] = _MAPPINGS
    if version >= (1, 38):
        properties["consumer_type"] = _CONSUMER_TYPE
        required.append("consumer_type")
    if version < (1, 12):
        return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}
    # Upstream's key order, which its error messages show.
    return {"type": "object", "properties": properties, "additionalProperties": False, "required": required}


def post_body(version: tuple[int, int], min_properties: int = 1) -> dict[str, Any]:
    """POST /allocations (1.13+): consumer uuid -> consumer section (empty allocations allowed)."""
    section = consumer_section(version)
    section["properties"]["allocations"] = _dict_form(0)
    return {
        "type": "object",
        "minProperties": min_properties,
        "additionalProperties": False,
        "patternProperties": {"^[0-9a-fA-F-]{36}$": section},
    }


# Versions where a schema changes.
_PUT_CHANGES = [(1, 0), (1, 8), (1, 12), (1, 28), (1, 34), (1, 38)]
_POST_CHANGES = [(1, 13), (1, 28), (1, 34), (1, 38)]


def _bands(changes: list[tuple[int, int]], build) -> list:
    bands = []
    for index, start in enumerate(changes):
        end = None
        if index + 1 < len(changes):
            following = changes[index + 1]
            end = (following[0], following[1] - 1)
        bands.append((start, end, build(start)))
    return bands


PUT = _bands(_PUT_CHANGES, consumer_section)
POST = _bands(_POST_CHANGES, post_body)
