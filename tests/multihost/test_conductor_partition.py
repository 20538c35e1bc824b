"""A partial partition: a conductor the database sees but the API hosts do not.

Every packet between the API hosts and cond3 is dropped; cond3 keeps
heartbeating to the database (default settings: every 10 s), so it stays
alive for everyone.  Calls for its nodes are made to each API host directly
for longer than two of its heartbeats: each API process may spend one
connect timeout on it, once in all; every call succeeds (another conductor
serves it).  When the partition heals, cond3 is called again.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
import requests

from tests.multihost.lab import Lab, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

VICTIM = "cond3"
API_HOSTS = ("api1", "api2")
PARTITION = 22.0  # seconds: more than two heartbeats of the victim
SLOW = 2.0  # a call taking longer waited for a connect timeout (5 s)


def _session(lab: Lab) -> requests.Session:
    session = requests.Session()
    session.headers.update({"X-Auth-Token": lab.token(), "X-OpenStack-Ironic-API-Version": "latest"})
    return session


def _victims_nodes(session: requests.Session, base: str, prefix: str, wanted: int) -> tuple[list[str], list[str]]:
    """Create nodes until ``wanted`` of them belong to the victim (by the hash ring): theirs, and all."""
    names, theirs = [], []
    while len(theirs) < wanted:
        name = f"{prefix}-{len(names)}"
        created = session.post(f"{base}/nodes", json={"name": name, "driver": "fake-hardware"}, timeout=30)
        assert created.status_code == 201, created.text
        names.append(name)
        if created.json()["conductor"] == VICTIM:
            theirs.append(name)
        assert len(names) < 40, "the hash ring never picks the victim"
    return theirs, names


def test_partial_partition_costs_one_timeout(healthy_lab: Lab, measurements: dict[str, Any]) -> None:
    lab = healthy_lab
    session = _session(lab)
    bases = {host: f"{lab.api_url(host)}/baremetal/v1" for host in API_HOSTS}
    through_lb = f"{lab.url}/baremetal/v1"
    wait_for("every conductor to be alive", lambda: sorted(
        c["hostname"] for c in session.get(f"{through_lb}/conductors", timeout=30).json()["conductors"]
        if c["alive"]) == ["cond1", "cond2", "cond3"], timeout=90)
    prefix = f"part-{uuid.uuid4().hex[:6]}"
    victims, created = _victims_nodes(session, through_lb, prefix, 2)
    before = session.get(f"{through_lb}/conductors/{VICTIM}", timeout=30).json()["updated_at"]

    took: dict[str, list[float]] = {host: [] for host in API_HOSTS}
    for host in API_HOSTS:
        lab.loss(host, VICTIM, 100)
    try:
        began = time.monotonic()
        round_number = 0
        while time.monotonic() - began < PARTITION:
            for host, base in bases.items():
                # A change on each host (an unchanged node is answered without its conductor).
                for name in victims:
                    started = time.monotonic()
                    answer = session.patch(f"{base}/nodes/{name}", timeout=60,
                                           json=[{"op": "add", "path": f"/extra/{host}", "value": round_number}])
                    took[host].append(time.monotonic() - started)
                    assert answer.status_code == 200, (host, answer.text)
            round_number += 1
            time.sleep(0.5)
        victim = session.get(f"{through_lb}/conductors/{VICTIM}", timeout=30).json()
    finally:
        for host in API_HOSTS:
            lab.clear(host)
    healed_at = time.monotonic()

    # The database saw the victim all along: it heartbeated during the partition.
    assert victim["alive"] and victim["updated_at"] != before
    for host in API_HOSTS:
        slow = [seconds for seconds in took[host] if seconds > SLOW]
        assert len(slow) <= 1, (host, slow)
    # Healed: the victim serves its nodes again once a probe reaches it.
    wait_for(f"{VICTIM} to be called again", lambda: all(
        session.get(f"{base}/nodes/{victims[0]}", timeout=30).json()["conductor"] == VICTIM
        for base in bases.values()), timeout=70, interval=0.5)
    back_at = time.monotonic()

    measurements["partial partition: calls per API host during it"] = len(took["api1"])
    measurements["partial partition: slowest call per API host (s)"] = " / ".join(
        f"{max(took[host]):.1f}" for host in API_HOSTS)
    measurements["partial partition: calls slower than 2 s per API host"] = " / ".join(
        str(sum(1 for seconds in took[host] if seconds > SLOW)) for host in API_HOSTS)
    measurements["partial partition: healed -> conductor called again (s)"] = round(back_at - healed_at, 1)
    for name in created:
        assert session.delete(f"{through_lb}/nodes/{name}", timeout=30).status_code == 204
