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
