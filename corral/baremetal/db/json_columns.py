"""Columns that hold JSON documents as text, as Ironic's tables do."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson


def encode(values: Mapping[str, Any], json_fields: Mapping[str, Any]) -> dict[str, Any]:
    """Column values ready for the database (the ``json_fields`` as text)."""
    encoded = {}
    for key, value in values.items():
        if key in json_fields:
            value = None if value is None else orjson.dumps(value).decode()
        encoded[key] = value
    return encoded


def decode(row: Any, json_fields: Mapping[str, Any]) -> dict[str, Any]:
    """A row as a dict, each JSON field parsed (an empty copy of its default when NULL)."""
    decoded = dict(row._mapping)
    for key, default in json_fields.items():
        text = decoded.get(key)
        decoded[key] = orjson.loads(text) if text else type(default)()
    return decoded
