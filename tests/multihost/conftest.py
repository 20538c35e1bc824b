"""The multi-host lab, set up once for every test here and torn down at the end.

The lab (tools/multihost-lab) needs root and Debian's HAProxy, PostgreSQL
15 and MariaDB with Galera (``tools/multihost-lab setup`` installs them).
Without them the tests skip with the reason, or fail under
``CORRAL_TEST_REQUIRE_BACKENDS=1`` as CI runs them.  Each test leaves the
lab as it found it (every host reachable, both API hosts up behind the
load balancer), so that faults do not pile up.

``CORRAL_MULTIHOST_KEEP=1`` leaves the lab running after the tests (to
look at it, or to run them again without setting it up anew);
``tools/multihost-lab teardown`` removes it.

Measured recovery times are printed at the end of the run (section
"multi-host lab") and written to <lab dir>/logs/measurements.json, which
``teardown`` keeps.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.multihost.lab import SCRIPT, Lab, run_lab, wait_healthy

MEASUREMENTS = pytest.StashKey[dict[str, Any]]()


def _unavailable() -> str | None:
    if sys.platform != "linux":
        return "the multi-host lab needs Linux network namespaces"
    if os.geteuid() != 0:
        return "the multi-host lab needs root (network namespaces, iptables)"
    result = subprocess.run([sys.executable, str(SCRIPT), "check"], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        return f"the multi-host lab is not installed ({result.stdout.strip()}): run tools/multihost-lab setup"
    return None


@pytest.fixture(scope="session")
def measurements(request: pytest.FixtureRequest) -> dict[str, Any]:
    return request.config.stash.setdefault(MEASUREMENTS, {})


# Started for the first test of this directory and torn down after its last
# one: its hosts' heartbeats and health checks need not run beside the rest of
# the suite (the lab's tests run together, on one worker: tests/conftest.py).
@pytest.fixture(scope="package")
def lab(measurements: dict[str, Any]) -> Iterator[Lab]:
    reason = _unavailable()
    if reason is not None:
        if os.environ.get("CORRAL_TEST_REQUIRE_BACKENDS") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    started = time.monotonic()
    if os.environ.get("CORRAL_MULTIHOST_KEEP") != "1":
        # A lab left by an earlier run (perhaps of another checkout) is not reused.
        run_lab("teardown")
    try:
        run_lab("start")
    except BaseException:
        run_lab("teardown")
        raise
    measurements["lab start (s)"] = round(time.monotonic() - started, 1)
    lab = Lab()
    try:
        yield lab
    finally:
        began = time.monotonic()
        logs = Path(lab.info["logs"])
        if os.environ.get("CORRAL_MULTIHOST_KEEP") != "1":
            run_lab("teardown")
            measurements["lab teardown (s)"] = round(time.monotonic() - began, 1)
        (logs / "measurements.json").write_text(json.dumps(measurements, indent=2))


@pytest.fixture
def healthy_lab(lab: Lab) -> Iterator[Lab]:
    """The lab with every API host up; checked again after the test."""
    wait_healthy(lab)
    yield lab
    wait_healthy(lab)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    found = config.stash.get(MEASUREMENTS, {})
    if found:
        terminalreporter.section("multi-host lab")
        for name, value in found.items():
            terminalreporter.write_line(f"{name}: {value}")
