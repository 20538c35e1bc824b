"""The background process is kept alive or takes the server down; /healthcheck shows every part."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest
import requests

from corral.core.supervise import Supervised
from tests.support.process import CorralProcess, write_config


def _wait_for(condition, timeout: float = 60.0) -> bool:  # noqa: ANN001 - any predicate
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return False


def test_a_dead_child_is_started_again() -> None:
    child = Supervised("sleeper", [sys.executable, "-c", "import time; time.sleep(600)"],
                       on_give_up=lambda: None, first_pause=0.01).start()
    try:
        first = child.pid
        assert first is not None
        os.kill(first, signal.SIGKILL)
        assert _wait_for(lambda: child.pid != first)
        assert child.starts == 2 and not child.failed
    finally:
        child.stop()


def test_a_child_that_keeps_dying_is_given_up_loudly() -> None:
    gave_up = threading.Event()
    child = Supervised("crasher", [sys.executable, "-c", "raise SystemExit(3)"], on_give_up=gave_up.set,
                       max_restarts=3, first_pause=0.01).start()
    try:
        assert gave_up.wait(60)
        assert child.failed and child.starts == 4
    finally:
        child.stop()


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found.extend(int(child) for child in (task / "children").read_text().split())
    return found


def _background_helper(server: CorralProcess) -> int | None:
    assert server.process is not None
    for child in _children(server.process.pid):
        try:
            command = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"background" in command:
            return child
    return None


@pytest.mark.slow
def test_serve_restarts_its_background_process(data_dir: Path, tmp_path: Path) -> None:
    config = write_config(tmp_path / "corral.conf", {"api": {"auth_strategy": "noauth2"}})
    server = CorralProcess(config, data_dir, extra_args=["--workers", "2", "--threads", "2"]).start()
    try:
        assert _wait_for(lambda: _background_helper(server) is not None)
        first = _background_helper(server)
        assert first is not None
        os.kill(first, signal.SIGKILL)
        assert _wait_for(lambda: _background_helper(server) not in (None, first))
        assert "background process" in server.log() and "restarted" in server.log()
        assert requests.get(server.url + "/placement/", timeout=30).status_code == 200
        assert _wait_for(lambda: requests.get(server.url + "/healthcheck", timeout=30).status_code == 200)
    finally:
        server.stop()


@pytest.mark.slow
def test_serve_stops_with_an_error_when_its_background_process_keeps_dying(data_dir: Path,
                                                                             tmp_path: Path) -> None:
    # The conductor cannot bind its RPC address (TEST-NET, not on this
    # machine), so the background process dies at every start; the API
    # workers do not bind it and would keep serving without it.
    config = write_config(tmp_path / "corral.conf", {"api": {"auth_strategy": "noauth2"},
                                                     "json_rpc": {"host_ip": "192.0.2.1"}})
    server = CorralProcess(config, data_dir, extra_args=["--workers", "2", "--threads", "2"])
    server.start(wait_path=None)
    assert server.process is not None
    status = server.process.wait(timeout=240)
    assert status != 0
    assert "the background process kept dying" in server.log()


# ------------------------------------------------------------ /healthcheck


def test_healthcheck_reports_every_part(data_dir: Path, tmp_path: Path) -> None:
    config = write_config(tmp_path / "corral.conf", {"api": {"auth_strategy": "noauth2"}})
    server = CorralProcess(config, data_dir).start()
    try:
        response = requests.get(server.url + "/healthcheck", timeout=30)
        assert response.status_code == 200
        report = response.json()
        assert report["status"] == "ok"
        assert {part["name"] for part in report["parts"]} == {
            "placement.database", "compute.api_database", "compute.cell0", "compute.cell1",
            "baremetal.database", "baremetal.conductors", "identity.database", "image.database",
        }
        assert all(part["status"] == "ok" for part in report["parts"])
    finally:
        server.stop()


def test_healthcheck_says_degraded_when_no_conductor_runs(data_dir: Path, tmp_path: Path) -> None:
    """The API host still serves: a load balancer keeps it (200), the report tells what is missing."""
    config = write_config(tmp_path / "corral.conf", {"api": {"auth_strategy": "noauth2"}})
    server = CorralProcess(config, data_dir, role="api").start()
    try:
        response = requests.get(server.url + "/healthcheck", timeout=30)
        assert response.status_code == 200
        report = response.json()
        parts = {part["name"]: part for part in report["parts"]}
        assert report["status"] == "degraded"
        assert parts["baremetal.conductors"]["status"] == "degraded"
        assert parts["placement.database"]["status"] == "ok"
    finally:
        server.stop()


def test_healthcheck_says_down_when_a_database_is_unreachable(data_dir: Path, tmp_path: Path) -> None:
    from corral.core import config as corral_config
    from corral.core import health

    conf = corral_config.make_conf([], state_path=str(data_dir), overrides={
        "placement_database": {"connection": "postgresql://postgres:hunter2@127.0.0.1:1/placement"}})
    report = health.Health(health.checks_for(conf, ["placement"])).report()
    assert report == {"status": "down", "parts": [{"name": "placement.database", "status": "down",
                                                   "detail": "unreachable"}]}


def test_each_service_entry_point_answers_its_own_healthcheck(data_dir: Path) -> None:
    from falcon import testing

    from corral.core import config as corral_config
    from corral.core import wsgi

    conf = corral_config.make_conf([], state_path=str(data_dir),
                                   overrides={"api": {"auth_strategy": "noauth2"}})
    from corral.cli import upgrade_all

    upgrade_all(conf)
    client = testing.TestClient(wsgi.service_app(conf, "placement"))
    result = client.simulate_get("/healthcheck")
    assert result.status_code == 200
    assert [part["name"] for part in result.json["parts"]] == ["placement.database"]
