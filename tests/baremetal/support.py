"""Helpers for Bare Metal tests."""

from __future__ import annotations

import json
from typing import Any

import requests


def fault(response: requests.Response) -> dict[str, Any]:
    """The decoded inner document of an Ironic error body."""
    body = response.json()
    assert set(body) == {"error_message"}, body
    inner = json.loads(body["error_message"])
    assert isinstance(inner, dict)
    return inner


def faultstring(response: requests.Response) -> str:
    inner = fault(response)
    return str(inner.get("faultstring", inner.get("description")))
