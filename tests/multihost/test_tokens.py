"""Tokens across API hosts: one key repository, one identity database, revocations everywhere."""

from __future__ import annotations

import time
from typing import Any

import pytest
import requests

from tests.multihost.lab import Lab

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

# docs/identity.md (Revocation reaches every process within a second): a process
# trusts what it read of the revocation events for at most
# [token] revocation_check_interval, 0.5 s by default.
REVOCATION_DELAY = 0.5


def placement_status(lab: Lab, host: str, token: str) -> int:
    answer = requests.get(f"{lab.api_url(host)}/placement/resource_providers", timeout=30,
                          headers={"X-Auth-Token": token, "OpenStack-API-Version": "placement 1.39"})
    return answer.status_code


def test_a_token_issued_by_one_api_host_is_accepted_by_the_other(healthy_lab: Lab) -> None:
    lab = healthy_lab
    token = lab.token(lab.api_url("api1"))
    assert placement_status(lab, "api2", token) == 200
    check = requests.get(f"{lab.api_url('api2')}/identity/v3/auth/tokens", timeout=30,
                         headers={"X-Auth-Token": token, "X-Subject-Token": token})
    assert check.status_code == 200
    assert check.json()["token"]["project"]["name"] == "admin"


def test_a_token_revoked_on_one_api_host_is_refused_by_the_other(healthy_lab: Lab,
                                                                 measurements: dict[str, Any]) -> None:
    lab = healthy_lab
    token = lab.token(lab.api_url("api1"))
    other = lab.token(lab.api_url("api1"))
    # api2 has checked (and cached) the token before it is revoked.
    assert placement_status(lab, "api2", token) == 200
    revoke = requests.delete(f"{lab.api_url('api1')}/identity/v3/auth/tokens", timeout=30,
                             headers={"X-Auth-Token": other, "X-Subject-Token": token})
    assert revoke.status_code == 204
    revoked_at = time.monotonic()
    # Polled until refused; measured from the revocation's answer.
    statuses = []
    while time.monotonic() - revoked_at < REVOCATION_DELAY:
        statuses.append((time.monotonic() - revoked_at, placement_status(lab, "api2", token)))
    refused = [elapsed for elapsed, status in statuses if status == 401]
    measurements["token revoked on api1, first refused by api2 (s)"] = (
        round(refused[0], 3) if refused else f"> {REVOCATION_DELAY}")
    # Every check that starts the documented delay after the revocation refuses it, on every API host.
    for host in ("api2", "api1", "api2"):
        assert placement_status(lab, host, token) == 401
    # Nothing else of the user's is affected.
    assert placement_status(lab, "api2", other) == 200
