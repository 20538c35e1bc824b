"""Request schemas for /resource_classes and /traits."""

from __future__ import annotations

from corral.placement.api.schemas.common import CUSTOM_RESOURCE_CLASS, GENERATION, TRAIT_NAME

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
                "traits": {"type": "array", "items": TRAIT_NAME, "uniqueItems": True},
                "resource_provider_generation": GENERATION,
            },
            "required": ["traits", "resource_provider_generation"],
            "additionalProperties": False,
        },
    )
]
