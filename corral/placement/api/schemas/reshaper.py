"""Request schema for POST /reshaper (1.30)."""

from __future__ import annotations

from typing import Any

from corral.placement.api.schemas.allocations import consumer_section
from corral.placement.api.schemas.common import GENERATION
from corral.placement.api.schemas.inventories import RECORD

_UUID_KEY = "^[0-9a-fA-F-]{36}$"


def body(version: tuple[int, int]) -> dict[str, Any]:
    section = consumer_section(version)
    return {
        "type": "object",
        "properties": {
            "inventories": {
                "type": "object",
                "patternProperties": {
                    _UUID_KEY: {
                        "type": "object",
                        "properties": {
                            "resource_provider_generation": GENERATION,
                            "inventories": {
                                "type": "object",
                                "patternProperties": {"^[A-Z0-9_]+$": RECORD},
                                "additionalProperties": False,
                            },
                        },
                        "required": ["resource_provider_generation", "inventories"],
                        "additionalProperties": False,
                    }
                },
                "additionalProperties": False,
            },
            "allocations": {
                "type": "object",
                "patternProperties": {_UUID_KEY: section},
                "additionalProperties": False,
            },
        },
        "required": ["inventories", "allocations"],
        "additionalProperties": False,
    }


POST = [((1, 30), (1, 33), body((1, 30))), ((1, 34), (1, 37), body((1, 34))), ((1, 38), None, body((1, 38)))]
