"""A conductor host cut off while it runs a clean step and a deploy step, and its return.

The conductors run with short heartbeat settings (an extra configuration
file, so that the test takes seconds rather than minutes).  A node is
cleaned, and another deployed, each with the fake BIOS step that takes
``BIOS_DELAY`` seconds and then writes the node's BIOS settings; the
conductor running both has its link cut.  The others must take the nodes
over (``clean failed`` and ``deploy failed``, the takeover in each node's
history) and, once the link is back, the cut-off conductor, whose steps
then end, must write nothing: no BIOS settings, no change to either node.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.multihost.lab import Lab, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

CONDUCTORS = ("cond1", "cond2", "cond3")
HEARTBEAT_INTERVAL = 1
HEARTBEAT_TIMEOUT = 5
# Longer than the cut: the step ends after the link is back.
BIOS_DELAY = 16
FAST = f"""[conductor]
heartbeat_interval = {HEARTBEAT_INTERVAL}
heartbeat_timeout = {HEARTBEAT_TIMEOUT}
check_provision_state_interval = 1

[fake]
bios_delay = {BIOS_DELAY}
"""


class Baremetal:
    def __init__(self, lab: Lab) -> None:
        self.base = f"{lab.url}/baremetal/v1"
        self.session = requests.Session()
        self.session.headers.update({"X-Auth-Token": lab.token(), "X-OpenStack-Ironic-API-Version": "latest"})

    def call(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        return self.session.request(method, f"{self.base}{path}", timeout=30, **kwargs)

    def node(self, name: str) -> dict[str, Any]:
        answer = self.call("GET", f"/nodes/{name}")
        answer.raise_for_status()
        return answer.json()


@pytest.fixture
def fast_conductors(healthy_lab: Lab, tmp_path: Path) -> Iterator[Lab]:
    extra = tmp_path / "fast-conductor.conf"
    extra.write_text(FAST)
    extra.chmod(0o644)
    for host in CONDUCTORS:
        healthy_lab.restart(host, str(extra))
    try:
        yield healthy_lab
    finally:
        for host in CONDUCTORS:
            healthy_lab.restore(host)
            healthy_lab.restart(host)


BIOS_SETTINGS = [{"name": "ProcTurboMode", "value": "Disabled"}]


def _nodes_on_one_conductor(api: Baremetal) -> tuple[str, str, str]:
    """Two new nodes the hash ring gives the same conductor (of three, four nodes always have two)."""
    names: list[str] = []
    by_conductor: dict[str, list[str]] = {}
    for _ in range(len(CONDUCTORS) + 1):
        name = f"fence-{uuid.uuid4().hex[:8]}"
        created = api.call("POST", "/nodes", json={"name": name, "driver": "fake-hardware"})
        assert created.status_code == 201, created.text
        names.append(name)
        by_conductor.setdefault(created.json()["conductor"], []).append(name)
    owner, (first, second, *_) = next((c, on) for c, on in by_conductor.items() if len(on) >= 2)
    for name in names:
        if name not in (first, second):
            assert api.call("DELETE", f"/nodes/{name}").status_code in (202, 204)
    return owner, first, second


def _set_state(api: Baremetal, name: str, target: str, wanted: str, **body: Any) -> None:
    answer = api.call("PUT", f"/nodes/{name}/states/provision", json={"target": target, **body})
    assert answer.status_code == 202, answer.text
    wait_for(f"{name} {wanted}", lambda: api.node(name)["provision_state"] == wanted, timeout=60)


def test_conductor_host_cut_while_cleaning_and_deploying(fast_conductors: Lab,
                                                         measurements: dict[str, Any]) -> None:
    """One conductor runs a clean step on one node and a deploy step on another when its link is cut."""
    lab = fast_conductors
    api = Baremetal(lab)
    wait_for("every conductor to be alive", lambda: sorted(
        c["hostname"] for c in api.call("GET", "/conductors").json()["conductors"] if c["alive"]) == list(CONDUCTORS),
        timeout=90)
    owner, cleaned, deployed = _nodes_on_one_conductor(api)
    for name in (cleaned, deployed):
        _set_state(api, name, "manage", "manageable")
    # Automated cleaning runs no BIOS step: provide takes no longer than the other transitions.
    _set_state(api, deployed, "provide", "available")
    step = {"interface": "bios", "step": "apply_configuration", "args": {"settings": BIOS_SETTINGS}}
    answer = api.call("PUT", f"/nodes/{cleaned}/states/provision", json={"target": "clean", "clean_steps": [step]})
    assert answer.status_code == 202, answer.text
    answer = api.call("PUT", f"/nodes/{deployed}/states/provision",
                      json={"target": "active", "deploy_steps": [{**step, "priority": 150}]})
    assert answer.status_code == 202, answer.text
    wait_for("both steps to start", lambda: api.node(cleaned)["reservation"] == owner
             and (node := api.node(deployed))["provision_state"] == "deploying" and node["reservation"] == owner,
             timeout=30)
    started = time.monotonic()

    cut_at = lab.cut(owner)
    failed = {}
    for name, wanted in ((cleaned, "clean failed"), (deployed, "deploy failed")):
        failed[name] = wait_for(f"the takeover of {name}", lambda n=name, w=wanted: (
            node := api.node(n))["provision_state"] == w and node, timeout=60, interval=0.2)
    taken_at = time.monotonic()
    log_offset = lab.log_size(owner)
    restored_at = lab.restore(owner)
    assert restored_at - started < BIOS_DELAY, "the steps ended before the link came back: nothing was fenced"
    for node in failed.values():
        assert f"conductor {owner} stopped" in node["last_error"]

    # The steps end on the returning conductor; it finds its locks gone and writes nothing.
    wait_for(f"{owner} to find its locks gone",
             lambda: lab.log_since(owner, log_offset).count("no longer holds lock") >= 2, timeout=BIOS_DELAY + 30)
    time.sleep(2)
    for name, before in failed.items():
        after = api.node(name)
        assert after["provision_state"] == before["provision_state"]
        assert after["updated_at"] == before["updated_at"]
        assert after["power_state"] == before["power_state"]
        assert api.call("GET", f"/nodes/{name}/bios").json()["bios"] == []
        history = api.call("GET", f"/nodes/{name}/history").json()["history"]
        takeovers = [event for event in history if "took over the node from conductor " + owner in event["event"]]
        assert len(takeovers) == 1, history
        assert all(owner not in event["event"].split(" took over")[0] for event in history)

    measurements["conductor host cut: cut -> both nodes taken over (s)"] = round(taken_at - cut_at, 1)
    measurements["conductor host cut: heartbeat interval / timeout (s)"] = f"{HEARTBEAT_INTERVAL} / {HEARTBEAT_TIMEOUT}"
    for name in (cleaned, deployed):
        # A node in deploy failed is deleted in maintenance only, as upstream's.
        assert api.call("PUT", f"/nodes/{name}/maintenance", json={"reason": "test over"}).status_code == 202
        assert api.call("DELETE", f"/nodes/{name}").status_code in (202, 204)
