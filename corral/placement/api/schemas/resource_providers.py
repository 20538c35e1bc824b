"""Request schemas for /resource_providers, by microversion."""

from __future__ import annotations

from typing import Any

from corral.placement.api.schemas.common import NULLABLE_UUID, PROVIDER_NAME, UUID

_POST_1_0: dict[str, Any] = {
    "type": "object",
    "properties": {"name": PROVIDER_NAME, "uuid": UUID},
    "required": ["name"],
    "additionalProperties": False,
}
_POST_1_14 = {**_POST_1_0, "properties": {**_POST_1_0["properties"], "parent_provider_uuid": NULLABLE_UUID}}

POST = [(None, (1, 13), _POST_1_0), ((1, 14), None, _POST_1_14)]

_PUT_1_0: dict[str, Any] = {
    "type": "object",
    "properties": {"name": PROVIDER_NAME},
    "required": ["name"],
    "additionalProperties": False,
}
_PUT_1_14 = {**_PUT_1_0, "properties": {**_PUT_1_0["properties"], "parent_provider_uuid": NULLABLE_UUID}}

PUT = [(None, (1, 13), _PUT_1_0), ((1, 14), None, _PUT_1_14)]


def list_query(version: tuple[int, int]) -> dict[str, Any]:
    """The query-string schema of GET /resource_providers at ``version``."""
    properties: dict[str, Any] = {"name": {"type": "string", "maxLength": 200}, "uuid": UUID}
    if version >= (1, 3):
        properties["member_of"] = {"type": "string"}
    if version >= (1, 4):
        properties["resources"] = {"type": "string"}
    if version >= (1, 14):
        properties["in_tree"] = UUID
    if version >= (1, 18):
        properties["required"] = {"type": "string"}
    return {"type": "object", "properties": properties, "additionalProperties": False}


# Versions where the query schema changes.
LIST_QUERY_VERSIONS = [(1, 0), (1, 3), (1, 4), (1, 14), (1, 18)]
