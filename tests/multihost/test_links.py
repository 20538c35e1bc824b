"""The lab's slow and lossy links: what a request through them costs, and that it still succeeds."""

from __future__ import annotations

import time
from typing import Any

import pytest
import requests

from tests.multihost.lab import Lab

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

# A slow link inside a data centre.  (At 100 ms each way /healthcheck takes
# about 10 s, its checks running one after another, and HAProxy, whose
# check times out after 2 s, takes the host out.)
DELAY_MS = 20


def settle(lab: Lab, host: str, token: str) -> int:
    """After a link changed, the connections the lab closed are found closed by the first requests
    (one failed request per database engine of the process, whose pool then reconnects; the token
    revocations are read at most twice a second).  Returns how many failed before ten in a row,
    over two seconds, succeeded."""
    failed = succeeded = 0
    while succeeded < 10:
        time.sleep(0.2)
        answer = requests.get(f"{lab.api_url(host)}/placement/resource_providers", timeout=60,
                              headers={"X-Auth-Token": token, "OpenStack-API-Version": "placement 1.39"})
        if answer.status_code == 200:
            succeeded += 1
            continue
        failed, succeeded = failed + 1, 0
        assert failed < 50, f"{host} does not answer: {answer.status_code} {answer.text}"
    return failed


def timed_requests(lab: Lab, host: str, token: str, count: int) -> list[float]:
    """``count`` provider listings on one API host (each reads its database), each on a new connection."""
    durations = []
    for _ in range(count):
        began = time.monotonic()
        answer = requests.get(f"{lab.api_url(host)}/placement/resource_providers", timeout=60,
                              headers={"X-Auth-Token": token, "OpenStack-API-Version": "placement 1.39"})
        durations.append(time.monotonic() - began)
        assert answer.status_code == 200, answer.text
    return durations


def test_a_delayed_database_link(healthy_lab: Lab, measurements: dict[str, Any]) -> None:
    lab = healthy_lab
    token = lab.token(lab.api_url("api2"))
    settle(lab, "api1", token)
    before = timed_requests(lab, "api1", token, 10)
    lab.delay("api1", "pg-primary", 5432, DELAY_MS)
    try:
        failed = settle(lab, "api1", token)
        delayed = timed_requests(lab, "api1", token, 10)
    finally:
        lab.clear("api1")
    settle(lab, "api1", token)
    after = timed_requests(lab, "api1", token, 10)
    # A request makes at least one round trip to the database: both ways delayed.
    assert min(delayed) >= 2 * DELAY_MS / 1000
    measurements["delay added: requests failed on api1 before it reconnected"] = failed
    measurements[f"delay {DELAY_MS} ms each way api1 -> pg-primary: median request before / with / after (ms)"] = (
        " / ".join(f"{sorted(d)[len(d) // 2] * 1000:.0f}" for d in (before, delayed, after)))


def test_a_lossy_client_link(healthy_lab: Lab, measurements: dict[str, Any]) -> None:
    lab = healthy_lab
    token = lab.token(lab.api_url("api2"))
    settle(lab, "api1", token)
    lab.loss("api1", "workstation", 20)
    try:
        lossy = timed_requests(lab, "api1", token, 20)
    finally:
        lab.clear("api1")
    measurements["20 % loss workstation -> api1: 20 requests, slowest (s)"] = round(max(lossy), 2)
