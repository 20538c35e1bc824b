"""Concurrent writers claiming the same providers never overcommit them."""

from __future__ import annotations

import threading
import uuid
from collections import Counter

WRITERS = 8
CLAIMS_PER_WRITER = 6
CAPACITY = 10  # VCPU per provider: (12 - 2 reserved) x 1.0


def test_concurrent_claims_never_overcommit(placement) -> None:
    admin = placement.client("1.39")
    providers = []
    for index in range(2):
        rp = placement.client("1.20").post("/resource_providers", json={"name": f"cn{index}"}).json()["uuid"]
        admin.put(f"/resource_providers/{rp}/inventories",
                  json={"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 12, "reserved": 2}}})
        providers.append(rp)
    accepted: list[str] = []
    outcomes: Counter = Counter()
    lock = threading.Lock()
    start = threading.Barrier(WRITERS)

    def writer() -> None:
        client = placement.client("1.39")
        start.wait()
        for _ in range(CLAIMS_PER_WRITER):
            consumer = str(uuid.uuid4())
            body = {"allocations": {rp: {"resources": {"VCPU": 1}} for rp in providers},
                    "project_id": "p", "user_id": "u", "consumer_generation": None, "consumer_type": "INSTANCE"}
            response = client.put(f"/allocations/{consumer}", json=body)
            with lock:
                if response.status_code == 204:
                    accepted.append(consumer)
                    outcomes["accepted"] += 1
                else:
                    error = response.json()["errors"][0]
                    outcomes[(response.status_code, error["code"])] += 1

    threads = [threading.Thread(target=writer) for _ in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert outcomes["accepted"] == CAPACITY
    assert set(outcomes) <= {"accepted", (409, "placement.undefined_code")}
    assert sum(outcomes.values()) == WRITERS * CLAIMS_PER_WRITER
    for rp in providers:
        assert admin.get(f"/resource_providers/{rp}/usages").json()["usages"] == {"VCPU": CAPACITY}
    project = admin.get("/usages?project_id=p").json()["usages"]
    assert project == {"INSTANCE": {"consumer_count": CAPACITY, "VCPU": 2 * CAPACITY}}


def test_concurrent_updates_of_one_consumer(placement) -> None:
    """Writers racing on one consumer's generation: exactly one wins each round."""
    admin = placement.client("1.28")
    rp = placement.client("1.20").post("/resource_providers", json={"name": "cn"}).json()["uuid"]
    admin.put(f"/resource_providers/{rp}/inventories",
              json={"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 100}}})
    consumer = str(uuid.uuid4())
    results: list[tuple[int, str | None]] = []
    lock = threading.Lock()
    start = threading.Barrier(WRITERS)

    def writer(amount: int) -> None:
        client = placement.client("1.28")
        body = {"allocations": {rp: {"resources": {"VCPU": amount}}}, "project_id": "p", "user_id": "u",
                "consumer_generation": None}
        start.wait()
        response = client.put(f"/allocations/{consumer}", json=body)
        code = None if response.status_code == 204 else response.json()["errors"][0]["code"]
        with lock:
            results.append((response.status_code, code))

    threads = [threading.Thread(target=writer, args=(amount,)) for amount in range(1, WRITERS + 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results)[0] == (204, None)
    assert results.count((204, None)) == 1
    assert results.count((409, "placement.concurrent_update")) == WRITERS - 1
    shown = admin.get(f"/allocations/{consumer}").json()
    assert shown["consumer_generation"] == 1
    used = shown["allocations"][rp]["resources"]["VCPU"]
    assert admin.get(f"/resource_providers/{rp}/usages").json()["usages"] == {"VCPU": used}
