"""Request schemas for /resource_classes and /traits."""

from __future__ import annotations

from corral.placement.api.schemas.common import CUSTOM_RESOURCE_CLASS, GENERATION

RESOURCE_CLASS = [
    (
        None,
        None,
        {
            "type": "object",
            "properties": {"name": CUSTOM_RESOURCE_CLASS},
            "required": ["name"],
            "additionalProperties": False,
        },
    )
]

PROVIDER_TRAITS = [
    (
        None,
        None,
        {
            "type": "object",
            "properties": {
                # Upstream checks only the length here; unknown names are a 400 later.
                "traits": {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 255}},
                "resource_provider_generation": GENERATION,
            },
            "required": ["traits", "resource_provider_generation"],
            "additionalProperties": False,
        },
    )
]
