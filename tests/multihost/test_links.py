"""The lab's slow and lossy links: what a request through them costs, and that it still succeeds."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pytest
import requests

from tests.multihost.lab import Lab

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

# A slow link: 100 ms each way (a 200 ms round trip) and 1 % of the packets
# lost each way, between api1 and the PostgreSQL primary.
DELAY_MS = 100
LOSS_PERCENT = 1
PLACEMENT = {"OpenStack-API-Version": "placement 1.39"}
BAREMETAL = {"X-OpenStack-Ironic-API-Version": "1.95"}


def settle(lab: Lab, host: str, token: str, paths: dict[str, tuple[str, dict[str, str]]] | None = None) -> int:
    """After a link changed, connections the lab closed may be found closed only by a request
    (one failed request per database engine of the process, whose pool then reconnects; the token
    revocations are read at most twice a second).  Returns how many failed before ten rounds of
    ``paths`` (a provider list by default) in a row, over two seconds at least, succeeded."""
    paths = paths or {"provider list": ("/placement/resource_providers", PLACEMENT)}
    failed = succeeded = 0
    while succeeded < 10:
        time.sleep(0.2)
        answers = [requests.get(f"{lab.api_url(host)}{path}", timeout=60, headers={"X-Auth-Token": token, **headers})
                   for path, headers in paths.values()]
        if all(answer.status_code == 200 for answer in answers):
            succeeded += 1
            continue
        failed, succeeded = failed + sum(answer.status_code != 200 for answer in answers), 0
        assert failed < 50, f"{host} does not answer: {[(a.status_code, a.text) for a in answers]}"
    return failed


def timed(lab: Lab, host: str, token: str, paths: dict[str, tuple[str, dict[str, str]]],
          count: int) -> dict[str, list[float]]:
    """``count`` GETs of each path on one API host, taking turns, each on a new connection; their durations.
    Each must succeed (a 5xx or a request that times out fails the test)."""
    durations: dict[str, list[float]] = {name: [] for name in paths}
    for _ in range(count):
        for name, (path, headers) in paths.items():
            began = time.monotonic()
            answer = requests.get(f"{lab.api_url(host)}{path}", timeout=30, headers={"X-Auth-Token": token, **headers})
            durations[name].append(time.monotonic() - began)
            assert answer.status_code == 200, f"{name}: {answer.status_code} {answer.text}"
    return durations


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def ms(value: float) -> str:
    return f"{value * 1000:.0f}"


class HealthPoller:
    """``GET /healthcheck`` on one host every half second, as a second load balancer would; what it got."""

    def __init__(self, lab: Lab, host: str) -> None:
        self._url = f"{lab.api_url(host)}/healthcheck"
        self._stop = threading.Event()
        self.answers: list[tuple[float, int]] = []  # (seconds, status; 0: no answer within 10 s)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            began = time.monotonic()
            try:
                status = requests.get(self._url, timeout=10).status_code
            except requests.RequestException:
                status = 0
            self.answers.append((time.monotonic() - began, status))

    def stop(self) -> list[tuple[float, int]]:
        self._stop.set()
        self._thread.join(15)
        return self.answers


def round_trips(lab: Lab, token: str, paths: dict[str, tuple[str, dict[str, str]]]) -> dict[str, list[int]]:
    """The round trips through api1's delayed database link that each GET costs, five times each.
    HAProxy's checks of api1 (a /healthcheck reads every database) are paused meanwhile."""
    trips: dict[str, list[int]] = {name: [] for name in paths}
    lab.haproxy("disable health corral_api/api1")
    try:
        for _ in range(5):
            for name, (path, headers) in paths.items():
                before = lab.round_trips("api1", "pg-primary", 5432)
                answer = requests.get(f"{lab.api_url('api1')}{path}", timeout=30,
                                      headers={"X-Auth-Token": token, **headers})
                assert answer.status_code == 200, f"{name}: {answer.status_code} {answer.text}"
                trips[name].append(lab.round_trips("api1", "pg-primary", 5432) - before)
    finally:
        lab.haproxy("enable health corral_api/api1")
    return trips


def test_a_slow_lossy_database_link(healthy_lab: Lab, measurements: dict[str, Any]) -> None:
    lab = healthy_lab
    token = lab.token(lab.api_url("api2"))
    created = requests.post(f"{lab.url}/baremetal/v1/nodes", timeout=30, json={
        "name": f"slow-link-{uuid.uuid4().hex[:8]}", "driver": "fake-hardware"},
        headers={"X-Auth-Token": token, **BAREMETAL})
    assert created.status_code == 201, created.text
    node = created.json()["uuid"]
    paths = {"node read": (f"/baremetal/v1/nodes/{node}", BAREMETAL),
             "provider list": ("/placement/resource_providers", PLACEMENT)}
    try:
        settle(lab, "api1", token, paths)
        before = timed(lab, "api1", token, paths, 10)
        checks_before = lab.server_stats()["corral_api/api1"]
        lab.delay("api1", "pg-primary", 5432, DELAY_MS)
        lab.loss("api1", "pg-primary", LOSS_PERCENT)
        try:
            failed = settle(lab, "api1", token, paths)
            # Once the pools reconnected, /healthcheck is polled all along (HAProxy checks it every second).
            poller = HealthPoller(lab, "api1")
            slow = timed(lab, "api1", token, paths, 25)
            health = poller.stop()
            checks_during = lab.server_stats()["corral_api/api1"]
            trips = round_trips(lab, token, paths)
        finally:
            lab.clear("api1")
        failed_after = settle(lab, "api1", token, paths)
        after = timed(lab, "api1", token, paths, 10)
    finally:
        requests.delete(f"{lab.url}/baremetal/v1/nodes/{node}", timeout=30,
                        headers={"X-Auth-Token": token, **BAREMETAL})
    # HAProxy kept api1 in: not one transition to DOWN, and every check of ours answered 200.
    assert checks_during["status"] == "UP"
    assert checks_during["chkdown"] == checks_before["chkdown"], (checks_before, checks_during)
    assert [status for _, status in health] == [200] * len(health), health
    # Every request paid at least one round trip, both ways delayed.
    assert min(min(durations) for durations in slow.values()) >= 2 * DELAY_MS / 1000
    # The node and the live conductors; the providers; each with, at most, the token check's read
    # of the revocation events (at most twice a second).  The fewest seen: another client's request
    # (the compute hosts poll the nodes) may add its own.
    assert min(trips["node read"]) <= 3, trips
    assert min(trips["provider list"]) <= 2, trips

    link = f"{DELAY_MS} ms each way + {LOSS_PERCENT} % loss api1 <-> pg-primary"
    measurements[f"{link}: requests failed on api1 before it reconnected, delay added / removed"] = (
        f"{failed} / {failed_after}")
    for name in paths:
        measurements[f"{link}: {name} p50 / p95 / max (ms)"] = " / ".join(
            ms(percentile(slow[name], fraction)) for fraction in (0.5, 0.95, 1.0))
        measurements[f"{link}: {name} median before / after (ms)"] = (
            f"{ms(percentile(before[name], 0.5))} / {ms(percentile(after[name], 0.5))}")
    for name in paths:
        measurements[f"{link}: {name} round trips to the database (5 requests)"] = trips[name]
    durations = [seconds for seconds, _ in health]
    measurements[f"{link}: /healthcheck on api1, {len(health)} polls, p50 / max (ms)"] = (
        f"{ms(percentile(durations, 0.5))} / {ms(max(durations))}")
    measurements[f"{link}: HAProxy failed checks of api1 (DOWN transitions)"] = (
        f"{int(checks_during['chkfail']) - int(checks_before['chkfail'])} "
        f"({int(checks_during['chkdown']) - int(checks_before['chkdown'])})")


def test_a_lossy_client_link(healthy_lab: Lab, measurements: dict[str, Any]) -> None:
    lab = healthy_lab
    token = lab.token(lab.api_url("api2"))
    settle(lab, "api1", token)
    lab.loss("api1", "workstation", 20)
    try:
        lossy = timed(lab, "api1", token, {"provider list": ("/placement/resource_providers", PLACEMENT)}, 20)
    finally:
        lab.clear("api1")
    measurements["20 % loss workstation -> api1: 20 requests, slowest (s)"] = round(max(lossy["provider list"]), 2)
