"""JSON-schema fragments shared by Placement's request schemas."""

from __future__ import annotations

import uuid

import jsonschema

UUID = {"type": "string", "format": "uuid"}
NULLABLE_UUID = {"anyOf": [UUID, {"type": "null"}]}
GENERATION = {"type": "integer"}
RESOURCE_CLASS_NAME = {"type": "string", "pattern": "^[A-Z0-9_]+$", "maxLength": 255}
CUSTOM_RESOURCE_CLASS = {"type": "string", "pattern": "^CUSTOM_[A-Z0-9_]+$", "maxLength": 255}
TRAIT_NAME = {"type": "string", "pattern": "^[A-Z0-9_]+$", "maxLength": 255}
# No minimum length: upstream refuses an empty name only when creating.
PROVIDER_NAME = {"type": "string", "maxLength": 200}


def _is_uuid_like(instance: object) -> bool:
    # Upstream accepts any spelling uuid.UUID understands that normalises back
    # to the same hex digits: with or without dashes, either case, braces.
    if not isinstance(instance, str):
        return True
    try:
        parsed = uuid.UUID(instance)
    except (TypeError, ValueError, AttributeError):
        return False
    stripped = instance.lower().replace("urn:", "").replace("uuid:", "").strip("{}").replace("-", "")
    return parsed.hex == stripped


FORMAT_CHECKER = jsonschema.FormatChecker()
FORMAT_CHECKER.checks("uuid")(_is_uuid_like)


def validation_message(error: jsonschema.ValidationError) -> str:
    """Upstream's wording: the whole validation error, schema path included."""
    return f"JSON does not validate: {error}"
