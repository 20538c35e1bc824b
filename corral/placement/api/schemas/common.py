"""JSON-schema fragments shared by Placement's request schemas."""

from __future__ import annotations

UUID = {"type": "string", "format": "uuid"}
NULLABLE_UUID = {"anyOf": [UUID, {"type": "null"}]}
GENERATION = {"type": "integer"}
RESOURCE_CLASS_NAME = {"type": "string", "pattern": "^[A-Z0-9_]+$", "maxLength": 255}
CUSTOM_RESOURCE_CLASS = {"type": "string", "pattern": "^CUSTOM_[A-Z0-9_]+$", "maxLength": 255}
TRAIT_NAME = {"type": "string", "pattern": "^[A-Z0-9_]+$", "maxLength": 255}
PROVIDER_NAME = {"type": "string", "maxLength": 200, "minLength": 1}
