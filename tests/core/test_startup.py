"""Start-up mistakes: one clear line, a non-zero exit, and nothing changed."""

from __future__ import annotations

import importlib.metadata
import os
import socket
import subprocess
import sys
from pathlib import Path

import requests

from tests.support.ports import free_port
from tests.support.process import CorralProcess, write_config


def _corral(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "corral", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})


def _refused(result: subprocess.CompletedProcess[str], *words: str) -> str:
    """The command failed with one line naming ``words``; nothing was started."""
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert "Traceback" not in output
    assert "Listening at" not in output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, output
    assert lines[0].startswith("Error: ")
    for word in words:
        assert word in lines[0]
    return lines[0]


def _nothing_migrated(data_dir: Path) -> None:
    assert not list(data_dir.glob("*.sqlite")) if data_dir.is_dir() else True


def test_version() -> None:
    result = _corral("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"corral {importlib.metadata.version('corral')}"


def test_a_port_out_of_range_is_one_line(data_dir: Path) -> None:
    _refused(_corral("serve", "--port", "99999", "--data-dir", str(data_dir)), "--port", "99999")
    _nothing_migrated(data_dir)


def test_a_port_in_use_is_one_line_before_migrating(data_dir: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        _refused(_corral("serve", "--port", str(port), "--data-dir", str(data_dir)), str(port), "listening")
    _nothing_migrated(data_dir)


def test_an_unusable_data_dir_is_one_line(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    _refused(_corral("serve", "--port", str(free_port()), "--data-dir", str(blocker / "state")),
             "data directory", str(blocker / "state"))


def test_a_missing_data_dir_is_created(tmp_path: Path) -> None:
    config = write_config(tmp_path / "corral.conf", {"api": {"auth_strategy": "noauth2"}})
    data_dir = tmp_path / "new" / "state"
    process = CorralProcess(config, data_dir, log_path=tmp_path / "corral.log").start()
    try:
        assert requests.get(process.url + "/placement/", timeout=30).status_code == 200
        assert (data_dir / "placement.sqlite").exists()
    finally:
        process.stop()


def test_a_bad_configuration_value_is_one_line(data_dir: Path, tmp_path: Path) -> None:
    config = write_config(tmp_path / "corral.conf", {"api": {"max_limit": "-3"}})
    _refused(_corral("serve", "--port", str(free_port()), "--config-file", str(config), "--data-dir", str(data_dir)),
             "[api] max_limit", str(config))
    _nothing_migrated(data_dir)
    from_env = _corral("db", "upgrade", "--data-dir", str(data_dir), env={"OS_API__AUTH_STRATEGY": "bogus"})
    _refused(from_env, "[api] auth_strategy", "OS_API__AUTH_STRATEGY", "bogus")
    _nothing_migrated(data_dir)


def test_a_bad_database_url_is_one_line_without_the_url(data_dir: Path) -> None:
    secret_url = "postgresql+nosuchdriver://user:hunter2@db/placement"
    line = _refused(_corral("serve", "--port", str(free_port()), "--data-dir", str(data_dir),
                            env={"OS_PLACEMENT_DATABASE__CONNECTION": secret_url}), "database URL", "placement")
    assert "hunter2" not in line
    _nothing_migrated(data_dir)


def test_an_unreachable_database_is_one_line(data_dir: Path) -> None:
    _refused(_corral("serve", "--port", str(free_port()), "--migrate", "--data-dir", str(data_dir),
                     env={"OS_PLACEMENT_DATABASE__CONNECTION": "postgresql://postgres@127.0.0.1:1/placement"}),
             "database upgrade failed")


def test_http_basic_without_a_user_file_is_one_line(data_dir: Path, tmp_path: Path) -> None:
    config = write_config(tmp_path / "corral.conf", {"api": {
        "auth_strategy": "http_basic", "http_basic_auth_user_file": str(tmp_path / "missing-htpasswd")}})
    _refused(_corral("serve", "--port", str(free_port()), "--config-file", str(config), "--data-dir", str(data_dir)),
             "http_basic", "missing-htpasswd")
    _nothing_migrated(data_dir)


# ------------------------------------------------- noauth on the network


def test_noauth_strategies_refuse_a_non_loopback_address(data_dir: Path, tmp_path: Path) -> None:
    for strategy in ("noauth", "noauth2"):
        config = write_config(tmp_path / f"{strategy}.conf", {"api": {"auth_strategy": strategy}})
        _refused(_corral("serve", "--host", "0.0.0.0", "--port", str(free_port()), "--config-file", str(config),
                         "--data-dir", str(data_dir)), strategy, "0.0.0.0", "allow_noauth_on_network")
    _nothing_migrated(data_dir)


def test_noauth_on_the_network_starts_when_explicitly_allowed(data_dir: Path, tmp_path: Path) -> None:
    config = write_config(tmp_path / "corral.conf", {"api": {"auth_strategy": "noauth2",
                                                             "allow_noauth_on_network": "true"}})
    process = CorralProcess(config, data_dir, extra_args=["--host", "0.0.0.0"]).start()
    try:
        assert requests.get(process.url + "/placement/", timeout=30).status_code == 200
    finally:
        process.stop()


def test_the_documented_production_example_does_not_use_noauth_on_the_network() -> None:
    operations = (Path(__file__).resolve().parents[2] / "docs" / "operations.md").read_text()
    production = operations.split("## Production", 1)[1].split("\n## ", 1)[0]
    assert "--host 0.0.0.0" in production
    assert "auth_strategy = http_basic" in production or "auth_strategy = keystone" in production
