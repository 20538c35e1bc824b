"""Run ``corral`` as a separate process (multi-process and real-client tests)."""

from __future__ import annotations

import configparser
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import requests

from tests.support.ports import free_port


def write_config(path: Path, sections: dict[str, dict[str, Any]]) -> Path:
    parser = configparser.ConfigParser(interpolation=None)
    for section, values in sections.items():
        parser[section] = {key: str(value) for key, value in values.items()}
    with open(path, "w", encoding="utf-8") as handle:
        parser.write(handle)
    return path


class CorralProcess:
    """``corral serve`` (or another role) in a child process."""

    def __init__(self, config_file: Path, data_dir: Path, *, role: str = "all", port: int | None = None,
                 extra_args: list[str] | None = None, env: dict[str, str] | None = None,
                 log_path: Path | None = None) -> None:
        self.port = port or free_port()
        self.role = role
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path or data_dir / f"corral-{role}-{self.port}.log"
        self._args = [
            sys.executable, "-m", "corral", "serve", "--role", role, "--port", str(self.port),
            "--config-file", str(config_file), "--data-dir", str(data_dir), *(extra_args or []),
        ]
        self._env = {**os.environ, **(env or {})}
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, wait_path: str | None = "/", timeout: float = 60) -> CorralProcess:
        log = open(self.log_path, "ab")
        self.process = subprocess.Popen(self._args, stdout=log, stderr=subprocess.STDOUT, env=self._env,
                                        start_new_session=True)
        log.close()
        if wait_path is not None and self.role in ("all", "api"):
            try:
                self.wait_ready(wait_path, timeout)
            except BaseException:
                self.kill()
                raise
        return self

    def wait_ready(self, path: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"corral exited with {self.process.returncode}:\n{self.log()}")
            try:
                requests.get(self.url + path, timeout=2)
                return
            except (requests.ConnectionError, requests.Timeout):
                # Not listening yet, or listening while the worker boots.
                time.sleep(0.1)
        raise TimeoutError(f"corral did not answer on {self.url}{path}:\n{self.log()}")

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-20000:]
        except OSError:
            return ""

    def kill(self) -> None:
        """SIGKILL the whole process group: a crash, not a shutdown."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.kill()
