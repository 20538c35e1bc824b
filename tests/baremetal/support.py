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


def wait_for(check: Any, *, timeout: float = 20.0, interval: float = 0.05) -> Any:
    """Call ``check`` until it returns something truthy; fail after ``timeout`` seconds."""
    import time

    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s (last result: {result!r})")
        time.sleep(interval)


def wait_for_state(client: Any, ident: str, provision_state: str, *, timeout: float = 20.0,
                   changed_since: str | None = None) -> dict[str, Any]:
    """Wait until the node reaches ``provision_state``; return the node.

    With ``changed_since`` (a ``provision_updated_at`` value read before the
    request), the node must also have moved since then: for work that
    starts and ends in the same state.
    """

    def check() -> dict[str, Any] | None:
        node = client.get(f"/v1/nodes/{ident}").json()
        if changed_since is not None and node["provision_updated_at"] == changed_since:
            return None
        # Stable once the worker also gave the node's lock back.
        reached = node["provision_state"] == provision_state and node["reservation"] is None
        return node if reached else None

    try:
        return wait_for(check, timeout=timeout)
    except AssertionError:
        node = client.get(f"/v1/nodes/{ident}").json()
        shown = {key: node.get(key) for key in ("provision_state", "target_provision_state", "last_error",
                                                  "reservation", "clean_step")}
        raise AssertionError(f"node {ident} did not reach {provision_state!r}: {shown}") from None


def wait_for_power(client: Any, ident: str, power_state: str, *, timeout: float = 40.0) -> dict[str, Any]:
    """Wait until the node records ``power_state`` with no power change pending."""

    def check() -> dict[str, Any] | None:
        node = client.get(f"/v1/nodes/{ident}").json()
        done = node["power_state"] == power_state and node["target_power_state"] is None
        return node if done else None

    try:
        return wait_for(check, timeout=timeout)
    except AssertionError:
        node = client.get(f"/v1/nodes/{ident}").json()
        shown = {key: node.get(key) for key in ("power_state", "target_power_state", "last_error", "reservation")}
        raise AssertionError(f"node {ident} did not reach {power_state!r}: {shown}") from None


def split_uuids(hosts: tuple[str, ...], count: int) -> list[str]:
    """Node UUIDs the hash ring of ``hosts`` shares out in turn: random UUIDs
    would all land on one conductor now and then."""
    import uuid

    from corral.baremetal.conductor.hash_ring import ring_for

    ring = ring_for(hosts)
    chosen: list[str] = []
    while len(chosen) < count:
        candidate = str(uuid.uuid4())
        if ring.owner(candidate) == hosts[len(chosen) % len(hosts)]:
            chosen.append(candidate)
    return chosen
