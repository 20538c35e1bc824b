"""Request schemas for inventories."""

from __future__ import annotations

from typing import Any

from corral.placement.api.schemas.common import GENERATION
from corral.placement.domain.inventory import MAX_INT

_FLOAT_MAX = 3.40282e38
# Upstream's properties in upstream's order: every record may carry a generation.
_RECORD_PROPERTIES: dict[str, Any] = {
    "resource_provider_generation": GENERATION,
    "total": {"type": "integer", "maximum": MAX_INT, "minimum": 1},
    "reserved": {"type": "integer", "maximum": MAX_INT, "minimum": 0},
    "min_unit": {"type": "integer", "maximum": MAX_INT, "minimum": 1},
    "max_unit": {"type": "integer", "maximum": MAX_INT, "minimum": 1},
    "step_size": {"type": "integer", "maximum": MAX_INT, "minimum": 1},
    "allocation_ratio": {"type": "number", "maximum": _FLOAT_MAX},
}
_CLASS_PATTERN = "^[A-Z0-9_]+$"

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
            "properties": {**_RECORD_PROPERTIES, "resource_class": {"type": "string", "pattern": _CLASS_PATTERN}},
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
            "properties": _RECORD_PROPERTIES,
            "required": ["total", "resource_provider_generation"],
            "additionalProperties": False,
        },
    )
]

# Records under other names are not validated, as upstream's: they fail as unknown classes.
PUT_ALL_BODY = {
    "type": "object",
    "properties": {
        "resource_provider_generation": GENERATION,
        "inventories": {"type": "object", "patternProperties": {_CLASS_PATTERN: RECORD}},
    },
    "required": ["resource_provider_generation", "inventories"],
    "additionalProperties": False,
}

PUT_ALL = [(None, None, PUT_ALL_BODY)]
