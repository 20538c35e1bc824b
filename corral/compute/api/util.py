"""Helpers shared by Compute's handlers."""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

import falcon
import jsonschema

from corral.core import errors
from corral.core.http import parse_json, read_body
from corral.core.schema import best_error
from corral.compute.api import validation
from corral.compute.api.state import ComputeState


def authorize(state: ComputeState, req: falcon.Request, rule: str, target: Mapping[str, Any] | None = None) -> None:
    state.policy.authorize(req.context, rule, target)


def allows(state: ComputeState, req: falcon.Request, rule: str, target: Mapping[str, Any] | None = None) -> bool:
    return state.policy.allows(req.context, rule, target)


def nova_message(error: jsonschema.ValidationError) -> str:
    """Upstream's wording: 'Invalid input for field/attribute X. Value: V. <reason>'."""
    path = list(error.absolute_path)
    if error.validator == "required" or not path:
        field = path[-1] if path else None
        if field is None:
            # The top-level object: upstream names the missing member.
            return f"Invalid input for field/attribute {error.instance!r}. Value: {error.instance}. {error.message}"
    else:
        field = path[-1]
    return f"Invalid input for field/attribute {field}. Value: {error.instance}. {error.message}"


# The largest value of the INT columns counts and sizes are stored in, as
# upstream's schemas and checks bound them (its db constant MAX_INT).
MAX_INT = 0x7FFFFFFF

# Upstream validates with draft 4, where 1.0 and 1e308 are not integers;
# later drafts would let them through to an INT column.
_Validator = jsonschema.validators.extend(
    jsonschema.Draft7Validator,
    type_checker=jsonschema.Draft7Validator.TYPE_CHECKER.redefine(
        "integer", lambda _checker, value: isinstance(value, int) and not isinstance(value, bool)
    ),
)


class Schema:
    """One compiled request-body schema with upstream's error wording."""

    def __init__(self, schema: dict[str, Any]) -> None:
        _Validator.check_schema(schema)
        self._validator = _Validator(schema, format_checker=validation.FORMATS)

    def validate(self, body: Any) -> None:
        problem = best_error(self._validator, body)
        if problem is not None:
            raise errors.BadRequest(validation.body_message(problem, nova_message(problem)))


def json_body(state: ComputeState, req: falcon.Request, schema: Schema | None = None) -> Any:
    data = read_body(req, state.conf.api.max_request_body_size)
    if not data:
        raise errors.BadRequest("The request body is empty.")
    body = parse_json(data)
    if schema is not None:
        schema.validate(body)
    return body


def query_values(req: falcon.Request) -> dict[str, list[str]]:
    """Every query parameter with all its values, in order."""
    values: dict[str, list[str]] = {}
    for name, value in req.params.items():
        values[name] = list(value) if isinstance(value, list) else [value]
    return values


def last_value(req: falcon.Request, name: str) -> str | None:
    value = req.params.get(name)
    if isinstance(value, list):
        return value[-1]
    return value


def iso(value: datetime.datetime | None) -> str | None:
    """'2024-01-02T03:04:05Z' (upstream's timestamp format in server records)."""
    if value is None:
        return None
    return value.strftime("%Y-%m-%dT%H:%M:%SZ")


def iso_micro(value: datetime.datetime | None) -> str | None:
    """'2024-01-02T03:04:05.000000' (os-services' updated_at format)."""
    if value is None:
        return None
    return value.strftime("%Y-%m-%dT%H:%M:%S.%f")


def parse_int(value: str | None, name: str, *, minimum: int = 0) -> int | None:
    if value is None:
        return None
    try:
        number = int(value)
    except ValueError:
        raise errors.BadRequest(f"{name} param must be an integer") from None
    if number < minimum:
        raise errors.BadRequest(f"{name} param must be positive" if minimum == 0 else f"{name} param is too small")
    return number


def bounded_int(value: Any, field: str, *, minimum: int, maximum: int = MAX_INT) -> int:
    """A schema-checked integer (or digit string) as an int within upstream's bounds.

    Schemas cannot bound digit strings, which upstream also accepts.
    """
    text = str(value).strip()
    if len(text.lstrip("+-").lstrip("0")) <= 20:
        number = int(value)
    else:
        # Beyond any bound (and longer than Python converts from a string).
        number = minimum - 1 if text.startswith("-") else maximum + 1
    if number > maximum:
        raise errors.BadRequest(
            f"Invalid input for field/attribute {field}. Value: {value}. "
            f"{value} is greater than the maximum of {maximum}"
        )
    if number < minimum:
        raise errors.BadRequest(
            f"Invalid input for field/attribute {field}. Value: {value}. {value} is less than the minimum of {minimum}"
        )
    return number


def parse_bool(value: str, name: str) -> bool:
    lowered = value.strip().lower()
    if lowered in ("1", "true", "t", "yes", "y", "on"):
        return True
    if lowered in ("0", "false", "f", "no", "n", "off"):
        return False
    raise errors.BadRequest(f"Invalid value '{value}' for {name}")
