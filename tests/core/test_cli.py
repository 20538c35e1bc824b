"""The corral command: db upgrade/check and serve, as child processes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import requests

from tests.support.process import CorralProcess, write_config


def _corral(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run([sys.executable, "-m", "corral", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})


def test_db_check_fails_before_upgrade_and_passes_after(data_dir: Path) -> None:
    before = _corral("db", "check", "--data-dir", str(data_dir))
    assert before.returncode == 1
    assert "run 'corral db upgrade'" in before.stderr
    upgraded = _corral("db", "upgrade", "--data-dir", str(data_dir))
    assert upgraded.returncode == 0, upgraded.stderr
    assert (data_dir / "placement.sqlite").exists()
    after = _corral("db", "check", "--data-dir", str(data_dir))
    assert after.returncode == 0, after.stderr


def test_missing_config_file_is_a_clear_error(data_dir: Path) -> None:
    result = _corral("db", "check", "--data-dir", str(data_dir), "--config-file", str(data_dir / "nope.conf"))
    assert result.returncode != 0
    assert "configuration file not found" in result.stderr


def test_serve_migrates_sqlite_and_announces_urls(data_dir: Path, tmp_path: Path) -> None:
    config = write_config(tmp_path / "corral.conf", {"api": {"auth_strategy": "noauth2"}})
    process = CorralProcess(config, data_dir).start()
    try:
        assert requests.get(process.url + "/placement/", timeout=10).status_code == 200
        index = requests.get(process.url + "/", timeout=10).json()
        assert {"name": "placement", "path": "/placement"} in index["services"]
        assert f"placement: http://127.0.0.1:{process.port}/placement" in process.log()
        # noauth2 is in force: a protected path needs a token
        assert requests.get(process.url + "/placement/resource_providers", timeout=10).status_code == 401
    finally:
        process.stop()


def test_environment_overrides_config_options(data_dir: Path, tmp_path: Path) -> None:
    config = write_config(tmp_path / "corral.conf", {"api": {"auth_strategy": "noauth2"}})
    process = CorralProcess(config, data_dir, env={"OS_API__AUTH_STRATEGY": "noauth"}).start()
    try:
        response = requests.get(process.url + "/placement/resource_providers", timeout=10)
        assert response.status_code != 401
    finally:
        process.stop()
