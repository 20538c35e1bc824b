"""Claims through several API processes on one database: no overcommit, refusals are 409s.

Two ``corral serve`` processes share one Placement database: the first runs
two gunicorn workers, the second one more API process, so concurrent
writers reach three processes with their own connection pools.
"""

from __future__ import annotations

import itertools
import threading
import uuid
from collections import Counter
from collections.abc import Iterator

import pytest
import requests

from tests.support.databases import DatabaseFactory
from tests.support.ports import free_port
from tests.support.process import CorralProcess, write_config

WRITERS = 8
PROVIDERS = 3
CAPACITY = 10  # VCPU per provider: (12 - 2 reserved) x 1.0
ROUNDS = 5  # each writer tries every provider this many times: more attempts than room
HEADERS = {"X-Auth-Token": "admin", "OpenStack-API-Version": "placement 1.39"}


@pytest.fixture(scope="module")
def urls(database_factory: DatabaseFactory, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[str]]:
    """Placement endpoints of two servers on one database (three API processes in all)."""
    tmp_path = tmp_path_factory.mktemp("claims-processes")
    data_dir = tmp_path / "state"
    data_dir.mkdir()
    port = free_port()
    config = write_config(tmp_path / "corral.conf", {
        "placement_database": {"connection": database_factory.new_url("placement")},
        "api": {"auth_strategy": "noauth2"},
        "placement": {"local_port": port},
    })
    first = CorralProcess(config, data_dir, port=port, extra_args=["--workers", "2", "--migrate"])
    started = [first.start(wait_path="/placement/")]
    try:
        started.append(CorralProcess(config, data_dir, role="api", extra_args=["--no-migrate"]).start(
            wait_path="/placement/"))
        yield [process.url + "/placement" for process in started]
    finally:
        for process in started:
            process.stop()


def _call(method: str, url: str, **kwargs) -> requests.Response:
    # A new connection per request, so that requests land on every worker.
    return requests.request(method, url, headers=HEADERS, timeout=60, **kwargs)


def _providers(base: str) -> list[str]:
    uuids = []
    for _index in range(PROVIDERS):
        rp = str(uuid.uuid4())
        _call("POST", f"{base}/resource_providers", json={"name": f"cn-{rp}", "uuid": rp}).raise_for_status()
        _call("PUT", f"{base}/resource_providers/{rp}/inventories",
              json={"resource_provider_generation": 0,
                    "inventories": {"VCPU": {"total": 12, "reserved": 2}}}).raise_for_status()
        uuids.append(rp)
    return uuids


def _error_code(response: requests.Response) -> str:
    return response.json()["errors"][0]["code"]


def test_claims_through_several_processes_never_overcommit(urls: list[str]) -> None:
    providers = _providers(urls[0])
    outcomes: Counter = Counter()
    accepted: list[str] = []
    lock = threading.Lock()
    start = threading.Barrier(WRITERS)

    def writer(number: int) -> None:
        # Each writer keeps trying every provider until all refuse it.
        endpoints = itertools.cycle(urls[number % len(urls):] + urls[:number % len(urls)])
        start.wait()
        for _round in range(ROUNDS):
            for rp in providers:
                consumer = str(uuid.uuid4())
                body = {"allocations": {rp: {"resources": {"VCPU": 1}}}, "project_id": "p", "user_id": "u",
                        "consumer_generation": None, "consumer_type": "INSTANCE"}
                response = _call("PUT", f"{next(endpoints)}/allocations/{consumer}", json=body)
                with lock:
                    if response.status_code == 204:
                        accepted.append(consumer)
                        outcomes["accepted"] += 1
                    else:
                        outcomes[(response.status_code, _error_code(response))] += 1

    threads = [threading.Thread(target=writer, args=(number,)) for number in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert outcomes["accepted"] == PROVIDERS * CAPACITY
    # Every refusal is a 409 for want of capacity (new consumers never
    # conflict: the providers are locked, not raced for).
    assert set(outcomes) == {"accepted", (409, "placement.undefined_code")}
    assert sum(outcomes.values()) == WRITERS * ROUNDS * PROVIDERS
    for base in urls:
        for rp in providers:
            assert _call("GET", f"{base}/resource_providers/{rp}/usages").json()["usages"] == {"VCPU": CAPACITY}
            stored = _call("GET", f"{base}/resource_providers/{rp}/allocations").json()["allocations"]
            assert len(stored) == CAPACITY
    stored = set()
    for rp in providers:
        stored.update(_call("GET", f"{urls[-1]}/resource_providers/{rp}/allocations").json()["allocations"])
    assert stored == set(accepted)


def test_one_consumer_raced_through_several_processes(urls: list[str]) -> None:
    """Writers in several processes race on one consumer's generation: one wins each round."""
    rp = _providers(urls[0])[0]
    consumer = str(uuid.uuid4())
    for generation in (None, 1, 2):
        results: list[tuple[int, str | None]] = []
        lock = threading.Lock()
        start = threading.Barrier(WRITERS)

        def writer(amount: int, generation: int | None = generation) -> None:
            body = {"allocations": {rp: {"resources": {"VCPU": amount}}}, "project_id": "p", "user_id": "u",
                    "consumer_generation": generation, "consumer_type": "INSTANCE"}
            start.wait()
            response = _call("PUT", f"{urls[amount % len(urls)]}/allocations/{consumer}", json=body)
            code = None if response.status_code == 204 else _error_code(response)
            with lock:
                results.append((response.status_code, code))

        threads = [threading.Thread(target=writer, args=(1 + amount % CAPACITY,)) for amount in range(WRITERS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert results.count((204, None)) == 1
        assert results.count((409, "placement.concurrent_update")) == WRITERS - 1
        shown = _call("GET", f"{urls[-1]}/allocations/{consumer}").json()
        assert shown["consumer_generation"] == (generation or 0) + 1
        used = shown["allocations"][rp]["resources"]["VCPU"]
        assert _call("GET", f"{urls[0]}/resource_providers/{rp}/usages").json()["usages"] == {"VCPU": used}
