"""Upstream's JSON-schema formats and query-parameter validation.

Formats (``nova/api/validation/validators.py``):

``name``
    Printable characters of the Basic Multilingual Plane, not starting or
    ending with whitespace.  Failing it gives upstream's whole message:
    "An invalid 'name' value was provided. The name must be: printable
    characters. Can not start or end with whitespace."
``uuid``
    What ``oslo_utils.uuidutils.is_uuid_like`` accepts (dashes optional,
    braces and a ``urn:uuid:`` prefix allowed, any case).
``base64``
    What ``base64.b64decode`` decodes (characters outside the alphabet are
    skipped, padding must be right).

Query parameters are validated as upstream does, as a dict of lists (each
parameter with all its values): unknown parameters are ignored, and the
first error reads "Invalid input for query parameters <name>. Value:
<value>. <reason>".
"""

from __future__ import annotations

import base64
import binascii
import functools
import re
import unicodedata
import uuid
from typing import Any

import falcon
import jsonschema

from corral.core import errors


class InvalidName(Exception):
    """A value failing the 'name' format (its message is the whole API message)."""


def _is_printable(char: str) -> bool:
    category = unicodedata.category(char)
    return not category.startswith("C") and (not category.startswith("Z") or category == "Zs")


@functools.cache
def _range(ws: bool, invert: bool) -> str:
    """A regex character range of the printable characters below U+FFFF (upstream's construction)."""
    regex = ""
    in_range = False
    last = None
    last_added = None
    char = ""
    for code in range(0xFFFF):
        char = chr(code)
        valid = _is_printable(char) if ws else _is_printable(char) and unicodedata.category(char) != "Zs"
        if invert:
            valid = not valid
        if valid:
            if not in_range:
                regex += re.escape(char)
                last_added = char
            in_range = True
        else:
            if in_range and last != last_added:
                regex += "-" + re.escape(last or "")
            in_range = False
        last = char
    if in_range:
        regex += "-" + re.escape(char)
    return regex


@functools.cache
def _name_regex() -> re.Pattern[str]:
    outer = _range(ws=False, invert=True)
    return re.compile(f"^(?![{outer}])[{_range(ws=True, invert=False)}]*(?<![{outer}])$")


NAME_REASON = "printable characters. Can not start or end with whitespace."

FORMATS = jsonschema.FormatChecker()


@FORMATS.checks("name", raises=InvalidName)
def _valid_name(instance: object) -> bool:
    if isinstance(instance, str) and _name_regex().search(instance):
        return True
    raise InvalidName(f"An invalid 'name' value was provided. The name must be: {NAME_REASON}")


def is_uuid_like(value: object) -> bool:
    if not isinstance(value, str):
        return False
    cleaned = value.replace("urn:", "").replace("uuid:", "").strip("{}").replace("-", "").lower()
    try:
        return str(uuid.UUID(value)).replace("-", "") == cleaned
    except (TypeError, ValueError, AttributeError):
        return False


@FORMATS.checks("uuid")
def _valid_uuid(instance: object) -> bool:
    return not isinstance(instance, str) or is_uuid_like(instance)


@FORMATS.checks("base64")
def _valid_base64(instance: object) -> bool:
    if not isinstance(instance, str):
        return True
    try:
        base64.b64decode(instance.encode("ascii"))
    except (binascii.Error, UnicodeEncodeError, ValueError):
        return False
    return True


def body_message(error: jsonschema.ValidationError, fallback: str) -> str:
    """The 'name' format's own message, or ``fallback``."""
    if isinstance(error.cause, InvalidName):
        return str(error.cause)
    return fallback


# Upstream's query parameter types.
NON_NEGATIVE_INTEGER = {"type": ["integer", "string"], "pattern": "^[0-9]*$", "minimum": 0, "minLength": 1}
BOOLEAN = {
    "type": ["boolean", "string"],
    "enum": [True, "True", "TRUE", "true", "1", "ON", "On", "on", "YES", "Yes", "yes",
             False, "False", "FALSE", "false", "0", "OFF", "Off", "off", "NO", "No", "no"],
}
TRUE_STRINGS = frozenset({"1", "t", "true", "on", "y", "yes"})


def multi(schema: dict[str, Any]) -> dict[str, Any]:
    return {"type": "array", "items": schema}


def single(schema: dict[str, Any]) -> dict[str, Any]:
    return {"type": "array", "items": schema, "maxItems": 1}


PAGINATION = {"limit": multi(NON_NEGATIVE_INTEGER), "marker": multi({"type": "string"})}

# Beyond any page size or offset (and shorter than Python refuses to convert).
_HUGE = 10**18


def count(value: str | int) -> int:
    """A validated non-negative integer parameter, however many digits it has."""
    if isinstance(value, int):
        return value
    digits = value.strip().lstrip("0")
    return int(digits or "0") if len(digits) <= 18 else _HUGE


def _number_or_none(value: Any) -> float | int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        try:
            return float(value)
        except (TypeError, ValueError):
            return None


def _bound(check: Any) -> Any:
    # Upstream compares digit strings with minimum and maximum too.
    def validate(validator: Any, bound: Any, instance: Any, schema: Any) -> Any:
        number = _number_or_none(instance) if not isinstance(instance, bool) else None
        if number is None:
            return None
        return check(validator, bound, number, schema)

    return validate


_QueryValidator = jsonschema.validators.extend(
    jsonschema.Draft7Validator,
    {
        "minimum": _bound(jsonschema.Draft7Validator.VALIDATORS["minimum"]),
        "maximum": _bound(jsonschema.Draft7Validator.VALIDATORS["maximum"]),
    },
)


class QuerySchema:
    """Query parameters checked as upstream's ``query_schema`` does (first error reported)."""

    def __init__(self, properties: dict[str, dict[str, Any]]) -> None:
        schema = {"type": "object", "properties": properties}
        _QueryValidator.check_schema(schema)
        self._validator = _QueryValidator(schema, format_checker=FORMATS)

    def validate(self, req: falcon.Request) -> dict[str, list[str]]:
        values: dict[str, list[str]] = {}
        for name, value in req.params.items():
            values[name] = list(value) if isinstance(value, list) else [value]
        for error in self._validator.iter_errors(values):
            path = list(error.absolute_path)
            if path:
                raise errors.BadRequest(
                    f"Invalid input for query parameters {path[0]}. Value: {error.instance}. {error.message}"
                )
            raise errors.BadRequest(error.message)
        return values


def last(values: dict[str, list[str]], name: str) -> str | None:
    found = values.get(name)
    return found[-1] if found else None


def first(values: dict[str, list[str]], name: str) -> str | None:
    found = values.get(name)
    return found[0] if found else None


def strict_bool(value: str | bool, name: str) -> bool:
    """oslo's ``bool_from_string(strict=True)`` with upstream's wording on failure."""
    if isinstance(value, bool):
        return value
    lowered = value.strip().lower()
    if lowered in TRUE_STRINGS:
        return True
    if lowered in ("0", "f", "false", "off", "n", "no"):
        return False
    raise errors.BadRequest(
        f"Unrecognized value '{value}', acceptable values are: '0', '1', 'f', 'false', 'n', 'no', 'off', 'on', "
        "'t', 'true', 'y', 'yes'"
    )
