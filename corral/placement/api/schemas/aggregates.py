"""Request schemas for provider aggregates."""

from __future__ import annotations

from corral.placement.api.schemas.common import GENERATION, UUID

_LIST = {"type": "array", "items": UUID, "uniqueItems": True}

PUT = [
    (None, (1, 18), _LIST),
    (
        (1, 19),
        None,
        {
            "type": "object",
            "properties": {"aggregates": _LIST, "resource_provider_generation": GENERATION},
            "required": ["aggregates", "resource_provider_generation"],
            "additionalProperties": False,
        },
    ),
]
