"""An API host cut off while clients write through the load balancer."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from tests.multihost.lab import Lab
from tests.multihost.workload import Client, ProviderResult, Record, join, provider_writer, start_writers

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

WRITERS = 4


def test_api_host_cut_off(healthy_lab: Lab, measurements: dict[str, Any]) -> None:
    lab = healthy_lab
    token = lab.token()
    record = Record()
    result = ProviderResult()
    prefix = f"cut-{uuid.uuid4().hex[:8]}"
    clients = [Client(lab.url, token, record) for _ in range(WRITERS)]
    threads, stop = start_writers(provider_writer, clients, prefix, result)
    try:
        time.sleep(2)
        cut_at = lab.cut("api1")
        try:
            removed_at = lab.wait_server("corral_api/api1", "DOWN", timeout=60)
            # Clients go on for a while against the remaining host.
            time.sleep(5)
        finally:
            stop.set()
            join(threads)
            restored_at = lab.restore("api1")
        back_at = lab.wait_server("corral_api/api1", "UP", timeout=120)
    finally:
        stop.set()
        for client in clients:
            client.close()

    # After the health check removed api1, no client saw a 5xx, nor needed to retry.
    after = record.server_errors(sent_after=removed_at)
    assert not after, [(a.method, a.path, a.status) for a in after[:5]]
    assert not record.connection_errors(sent_after=removed_at)
    acknowledged_after = [when for when in result.acknowledged_providers.values() if when > removed_at]
    assert acknowledged_after, "no write was acknowledged once api1 was removed"

    # Every acknowledged write is there exactly once.
    checker = Client(lab.url, token, Record())
    answer, _ = checker.call("GET", "/resource_providers")
    assert answer is not None and answer.status_code == 200
    names = [rp["name"] for rp in answer.json()["resource_providers"] if rp["name"].startswith(prefix)]
    uuids = [rp["uuid"] for rp in answer.json()["resource_providers"] if rp["name"].startswith(prefix)]
    assert len(names) == len(set(names)) and len(uuids) == len(set(uuids))
    assert set(result.acknowledged_providers) <= set(uuids)
    assert set(uuids) <= result.attempted_providers
    for consumer, rp in result.acknowledged_allocations.items():
        answer, _ = checker.call("GET", f"/allocations/{consumer}")
        assert answer is not None and answer.json()["allocations"] == {
            rp: {"generation": answer.json()["allocations"][rp]["generation"], "resources": {"VCPU": 2}}}
        answer, _ = checker.call("GET", f"/resource_providers/{rp}/usages")
        assert answer is not None and answer.json()["usages"] == {"VCPU": 2}
    checker.close()

    before = record.server_errors()
    measurements["API host cut: cut -> HAProxy removed it (s)"] = round(removed_at - cut_at, 2)
    measurements["API host cut: restored -> back in HAProxy (s)"] = round(back_at - restored_at, 2)
    measurements["API host cut: 5xx / connection errors before removal"] = (
        f"{len(before)} / {len(record.connection_errors())}")
    slowest = max((a.answered - a.sent for a in record.attempts if a.sent < removed_at), default=0.0)
    measurements["API host cut: slowest request around the cut (s)"] = round(slowest, 2)
    measurements["API host cut: providers / allocations acknowledged"] = (
        f"{len(result.acknowledged_providers)} / {len(result.acknowledged_allocations)}")
