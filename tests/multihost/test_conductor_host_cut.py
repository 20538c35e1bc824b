"""A conductor host cut off while it runs a clean step, and its return.

The conductors run with short heartbeat settings (an extra configuration
file, so that the test takes seconds rather than minutes).  A node is
cleaned with the fake BIOS step that takes ``BIOS_DELAY`` seconds and then
writes the node's BIOS settings; the conductor running it has its link cut.
The others must take the node over (``clean failed``, the takeover in the
node's history) and, once the link is back, the cut-off conductor, whose
step then ends, must write nothing: no BIOS settings, no change to the node.
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


def test_conductor_host_cut_while_cleaning(fast_conductors: Lab, measurements: dict[str, Any]) -> None:
    lab = fast_conductors
    api = Baremetal(lab)
    name = f"fence-{uuid.uuid4().hex[:8]}"
    wait_for("every conductor to be alive", lambda: sorted(
        c["hostname"] for c in api.call("GET", "/conductors").json()["conductors"] if c["alive"]) == list(CONDUCTORS),
        timeout=90)
    created = api.call("POST", "/nodes", json={"name": name, "driver": "fake-hardware"})
    assert created.status_code == 201, created.text
    assert api.call("PUT", f"/nodes/{name}/states/provision", json={"target": "manage"}).status_code == 202
    wait_for("manageable", lambda: api.node(name)["provision_state"] == "manageable", timeout=30)
    step = {"interface": "bios", "step": "apply_configuration",
            "args": {"settings": [{"name": "ProcTurboMode", "value": "Disabled"}]}}
    answer = api.call("PUT", f"/nodes/{name}/states/provision", json={"target": "clean", "clean_steps": [step]})
    assert answer.status_code == 202, answer.text
    holder = wait_for("the clean step to start", lambda: api.node(name)["reservation"], timeout=30)
    started = time.monotonic()

    cut_at = lab.cut(holder)
    failed = wait_for("the takeover", lambda: (node := api.node(name))["provision_state"] == "clean failed"
                      and node, timeout=60, interval=0.2)
    taken_at = time.monotonic()
    log_offset = lab.log_size(holder)
    restored_at = lab.restore(holder)
    assert restored_at - started < BIOS_DELAY, "the step ended before the link came back: nothing was fenced"
    assert f"conductor {holder} stopped" in failed["last_error"]

    # The step ends on the returning conductor; it finds its lock gone and writes nothing.
    wait_for(f"{holder} to find its lock gone",
             lambda: "no longer holds lock" in lab.log_since(holder, log_offset), timeout=BIOS_DELAY + 30)
    time.sleep(2)
    after = api.node(name)
    assert after["provision_state"] == "clean failed"
    assert after["updated_at"] == failed["updated_at"]
    assert api.call("GET", f"/nodes/{name}/bios").json()["bios"] == []
    history = api.call("GET", f"/nodes/{name}/history").json()["history"]
    takeovers = [event for event in history if "took over the node from conductor " + holder in event["event"]]
    assert len(takeovers) == 1, history
    assert all(holder not in event["event"].split(" took over")[0] for event in history)

    measurements["conductor host cut: cut -> node taken over (s)"] = round(taken_at - cut_at, 1)
    measurements["conductor host cut: heartbeat interval / timeout (s)"] = f"{HEARTBEAT_INTERVAL} / {HEARTBEAT_TIMEOUT}"
    assert api.call("DELETE", f"/nodes/{name}").status_code in (202, 204)
