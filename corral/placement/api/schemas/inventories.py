"""Request schemas for inventories."""

from __future__ import annotations

from typing import Any

from corral.placement.api.schemas.common import GENERATION, RESOURCE_CLASS_NAME
from corral.placement.domain.inventory import MAX_INT

_FLOAT_MAX = 3.40282e38
_RECORD_PROPERTIES: dict[str, Any] = {
    "total": {"type": "integer", "maximum": MAX_INT, "minimum": 1},
    "reserved": {"type": "integer", "maximum": MAX_INT, "minimum": 0},
    "min_unit": {"type": "integer", "maximum": MAX_INT, "minimum": 1},
    "max_unit": {"type": "integer", "maximum": MAX_INT, "minimum": 1},
    "step_size": {"type": "integer", "maximum": MAX_INT, "minimum": 1},
    "allocation_ratio": {"type": "number", "maximum": _FLOAT_MAX},
}

RECORD = {
    "type": "object",
    "properties": _RECORD_PROPERTIES,
    "required": ["total"],
    "additionalProperties": False,
}

POST = [
    (
        None,
        None,
        {
            "type": "object",
            "properties": {
                **_RECORD_PROPERTIES,
                "resource_class": RESOURCE_CLASS_NAME,
                "resource_provider_generation": GENERATION,
            },
            # The generation is optional here (not in PUT): upstream never required it.
            "required": ["total", "resource_class"],
            "additionalProperties": False,
        },
    )
]

PUT_ONE = [
    (
        None,
        None,
        {
            "type": "object",
            "properties": {**_RECORD_PROPERTIES, "resource_provider_generation": GENERATION},
            "required": ["total", "resource_provider_generation"],
            "additionalProperties": False,
        },
    )
]

PUT_ALL = [
    (
        None,
        None,
        {
            "type": "object",
            "properties": {
                "resource_provider_generation": GENERATION,
                "inventories": {
                    "type": "object",
                    "patternProperties": {"^[A-Z0-9_]+$": RECORD},
                    # Upstream lets other names through to fail later as unknown classes.
                    "additionalProperties": RECORD,
                },
            },
            "required": ["resource_provider_generation", "inventories"],
            "additionalProperties": False,
        },
    )
]
