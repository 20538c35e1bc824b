"""Request schema for POST /reshaper (1.30)."""

from __future__ import annotations

from typing import Any

from corral.placement.api.schemas.allocations import post_body
from corral.placement.api.schemas.inventories import PUT_ALL_BODY

_UUID_KEY = "^[0-9a-fA-F-]{36}$"


def body(version: tuple[int, int]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "inventories": {
                "type": "object",
                "patternProperties": {_UUID_KEY: PUT_ALL_BODY},
                # At least one provider's inventories: otherwise there is nothing to reshape.
                "minProperties": 1,
                "additionalProperties": False,
            },
            # POST /allocations' body, which may be empty here.
            "allocations": post_body(version, min_properties=0),
        },
        "required": ["inventories", "allocations"],
        "additionalProperties": False,
    }


POST = [((1, 30), (1, 33), body((1, 30))), ((1, 34), (1, 37), body((1, 34))), ((1, 38), None, body((1, 38)))]
