"""Clients writing to Placement through the load balancer while faults happen.

Every request is recorded (when it was sent, when it was answered, the
status or the connection error), so that a test can ask what clients saw
after a given moment.  Writes are made safe to repeat the way Placement's
clients make them: providers get client-chosen UUIDs, allocations carry a
consumer generation (``null`` for a new consumer), so a write repeated
after an answer was lost cannot apply twice; a repeat that conflicts is
resolved by reading.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import requests

PLACEMENT_VERSION = "placement 1.39"
PROJECT = "5f0bb4c0a93b4bd7b1a6cbd1d1e4f1a0"
USER = "f3b42e38e2f04b9c9b6c5e6a8d1c2b7e"
# Connection errors are retried after this pause (clients' usual back-off, kept short).
RETRY_PAUSE = 0.1


@dataclass
class Attempt:
    method: str
    path: str
    sent: float
    answered: float
    status: int | None          # None: a connection error (then ``error`` says which)
    error: str = ""


@dataclass
class Record:
    """What every client of one workload saw."""

    attempts: list[Attempt] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, attempt: Attempt) -> None:
        with self.lock:
            self.attempts.append(attempt)

    def server_errors(self, sent_after: float = 0.0) -> list[Attempt]:
        return [a for a in self.attempts if a.sent >= sent_after and a.status is not None and a.status >= 500]

    def connection_errors(self, sent_after: float = 0.0) -> list[Attempt]:
        return [a for a in self.attempts if a.sent >= sent_after and a.status is None]


class Client:
    """One client's HTTP session to the load balancer, retrying connection errors."""

    def __init__(self, base_url: str, token: str, record: Record, *, request_timeout: float = 30,
                 give_up_after: float = 120) -> None:
        self.base = base_url.rstrip("/") + "/placement"
        self.record = record
        self.request_timeout = request_timeout
        self.give_up_after = give_up_after
        self.session = requests.Session()
        self.session.headers.update({"X-Auth-Token": token, "OpenStack-API-Version": PLACEMENT_VERSION})

    def call(self, method: str, path: str, body: Any = None, *, retry_statuses: tuple[int, ...] = ()
             ) -> tuple[requests.Response | None, int]:
        """The answer (None when every try failed to connect) and the number of tries.

        Connection errors are retried; so are ``retry_statuses`` (for
        writes that are safe to repeat)."""
        started = time.monotonic()
        tries = 0
        while True:
            tries += 1
            sent = time.monotonic()
            try:
                answer = self.session.request(method, self.base + path, json=body, timeout=self.request_timeout)
            except requests.RequestException as error:
                self.record.add(Attempt(method, path, sent, time.monotonic(), None, type(error).__name__))
                self.session.close()
                if time.monotonic() - started > self.give_up_after:
                    return None, tries
                time.sleep(RETRY_PAUSE)
                continue
            self.record.add(Attempt(method, path, sent, time.monotonic(), answer.status_code))
            if answer.status_code in retry_statuses and time.monotonic() - started <= self.give_up_after:
                time.sleep(RETRY_PAUSE)
                continue
            return answer, tries

    def close(self) -> None:
        self.session.close()


def error_code(answer: requests.Response) -> str:
    try:
        return answer.json()["errors"][0].get("code", "")
    except (ValueError, KeyError, IndexError, TypeError):
        return ""


# ---------------------------------------------------------------- providers


@dataclass
class ProviderResult:
    acknowledged_providers: dict[str, float] = field(default_factory=dict)   # uuid -> when acknowledged
    acknowledged_allocations: dict[str, str] = field(default_factory=dict)   # consumer -> provider
    attempted_providers: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)


def provider_writer(client: Client, prefix: str, result: ProviderResult, stop: threading.Event) -> None:
    """Create a provider, give it an inventory, allocate from it; again and again.

    Connection errors are retried; a 409 after a retry means the earlier
    try was applied, which a read confirms."""
    while not stop.is_set():
        rp = str(uuid.uuid4())
        with result.lock:
            result.attempted_providers.add(rp)
        answer, tries = client.call("POST", "/resource_providers", {"uuid": rp, "name": f"{prefix}-{rp}"})
        if answer is None:
            continue
        if answer.status_code == 409 and tries > 1:
            check, _ = client.call("GET", f"/resource_providers/{rp}")
            if check is None or check.status_code != 200:
                continue
        elif answer.status_code != 200:
            continue
        with result.lock:
            result.acknowledged_providers[rp] = time.monotonic()
        answer, tries = client.call("PUT", f"/resource_providers/{rp}/inventories", {
            "resource_provider_generation": 0, "inventories": {"VCPU": {"total": 8}}})
        if answer is None or answer.status_code not in (200, 409):
            continue
        if answer.status_code == 409:
            check, _ = client.call("GET", f"/resource_providers/{rp}/inventories")
            if check is None or check.status_code != 200 or "VCPU" not in check.json()["inventories"]:
                continue
        consumer = str(uuid.uuid4())
        answer, tries = client.call("PUT", f"/allocations/{consumer}", {
            "allocations": {rp: {"resources": {"VCPU": 2}}}, "consumer_generation": None,
            "project_id": PROJECT, "user_id": USER, "consumer_type": "INSTANCE"})
        if answer is None:
            continue
        if answer.status_code == 409 and tries > 1:
            check, _ = client.call("GET", f"/allocations/{consumer}")
            if check is None or rp not in check.json().get("allocations", {}):
                continue
        elif answer.status_code != 204:
            continue
        with result.lock:
            result.acknowledged_allocations[consumer] = rp


# ---------------------------------------------------------------- claims


@dataclass
class ClaimResult:
    acknowledged: dict[str, tuple[str, float]] = field(default_factory=dict)  # consumer -> (provider, answered)
    unresolved: set[str] = field(default_factory=set)   # consumers whose claim's outcome no client learned
    full: set[str] = field(default_factory=set)         # providers found at capacity
    lock: threading.Lock = field(default_factory=threading.Lock)

    def acknowledged_after(self, moment: float) -> list[float]:
        with self.lock:
            return sorted(when for _, when in self.acknowledged.values() if when >= moment)


def make_providers(client: Client, prefix: str, count: int, capacity: int) -> list[str]:
    providers = []
    for index in range(count):
        rp = str(uuid.uuid4())
        answer, _ = client.call("POST", "/resource_providers", {"uuid": rp, "name": f"{prefix}-{index}"},
                                retry_statuses=(502, 503, 504))
        assert answer is not None and answer.status_code == 200, answer.text if answer is not None else None
        answer, _ = client.call("PUT", f"/resource_providers/{rp}/inventories", {
            "resource_provider_generation": 0, "inventories": {"VCPU": {"total": capacity}}})
        assert answer is not None and answer.status_code == 200, answer.text
        providers.append(rp)
    return providers


def claim_writer(client: Client, providers: list[str], result: ClaimResult, stop: threading.Event) -> None:
    """Claim one VCPU for a new consumer on a random provider, again and again, until every
    provider is full or ``stop`` is set.

    A claim whose answer is lost or a 5xx is repeated, with the same
    consumer and generation ``null``: at most one of the tries can apply,
    and a repeat that conflicts is resolved by reading the consumer."""
    while not stop.is_set():
        with result.lock:
            open_providers = [rp for rp in providers if rp not in result.full]
        if not open_providers:
            return
        rp = random.choice(open_providers)
        consumer = str(uuid.uuid4())
        with result.lock:
            result.unresolved.add(consumer)
        body = {"allocations": {rp: {"resources": {"VCPU": 1}}}, "consumer_generation": None,
                "project_id": PROJECT, "user_id": USER, "consumer_type": "INSTANCE"}
        while not stop.is_set():
            answer, _ = client.call("PUT", f"/allocations/{consumer}", body)
            if answer is None:
                break
            if answer.status_code == 204:
                with result.lock:
                    result.acknowledged[consumer] = (rp, time.monotonic())
                    result.unresolved.discard(consumer)
                break
            if answer.status_code == 409 and "consumer generation conflict" in answer.text:
                # An earlier try of this very claim was applied (its answer was lost).
                check, _ = client.call("GET", f"/allocations/{consumer}")
                if check is not None and check.status_code == 200 and rp in check.json()["allocations"]:
                    with result.lock:
                        result.acknowledged[consumer] = (rp, time.monotonic())
                        result.unresolved.discard(consumer)
                break
            if answer.status_code == 409 and error_code(answer) != "placement.concurrent_update":
                # Capacity exceeded: nothing was written.
                with result.lock:
                    result.full.add(rp)
                    result.unresolved.discard(consumer)
                break
            if answer.status_code == 409 or answer.status_code >= 500:
                # A provider generation conflict, or a server error: the claim is repeated as it is.
                time.sleep(RETRY_PAUSE)
                continue
            raise AssertionError(f"unexpected answer to a claim: {answer.status_code} {answer.text}")


def start_writers(target: Any, clients: list[Client], *args: Any) -> tuple[list[threading.Thread], threading.Event]:
    """One thread per client running ``target(client, *args, stop)``; set ``stop`` to end them."""
    stop = threading.Event()
    threads = [threading.Thread(target=target, args=(client, *args, stop), daemon=True, name=f"writer-{i}")
               for i, client in enumerate(clients)]
    for thread in threads:
        thread.start()
    return threads, stop


def join(threads: list[threading.Thread], timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    assert not any(thread.is_alive() for thread in threads), "writers did not finish"


def check_claims(client: Client, providers: list[str], capacity: int, result: ClaimResult) -> dict[str, int]:
    """Every acknowledged claim is there; no provider holds more than its capacity; usage matches
    the allocations.  Returns each provider's usage."""
    usages = {}
    consumers_on: dict[str, set[str]] = {}
    for rp in providers:
        answer, _ = client.call("GET", f"/resource_providers/{rp}/usages", retry_statuses=(502, 503, 504))
        assert answer is not None and answer.status_code == 200, answer
        usages[rp] = answer.json()["usages"].get("VCPU", 0)
        answer, _ = client.call("GET", f"/resource_providers/{rp}/allocations", retry_statuses=(502, 503, 504))
        assert answer is not None and answer.status_code == 200
        allocations = answer.json()["allocations"]
        consumers_on[rp] = set(allocations)
        assert sum(a["resources"]["VCPU"] for a in allocations.values()) == usages[rp]
        assert usages[rp] <= capacity, f"provider {rp} over capacity: {usages[rp]} > {capacity}"
    missing = [consumer for consumer, (rp, _) in result.acknowledged.items() if consumer not in consumers_on[rp]]
    assert not missing, f"{len(missing)} acknowledged claims are missing: {missing[:5]}"
    return usages
