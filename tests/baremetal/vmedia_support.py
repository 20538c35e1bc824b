"""Helpers for the virtual media tests: an image web server and sushy-tools emulators."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from typing import Any

import pytest
import requests

from corral.core.server import ThreadedServer
from tests.support.ports import free_port


class ImageServer:
    """Serves ``files`` (path -> bytes) over HTTP; any other path answers 404."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.requests: list[str] = []
        self.server = ThreadedServer(self._app).start()
        self.url = self.server.url

    def _app(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        self.requests.append(path)
        body = self.files.get(path)
        if body is None:
            start_response("404 Not Found", [("Content-Length", "0")])
            return [b""]
        start_response("200 OK", [("Content-Type", "application/octet-stream"), ("Content-Length", str(len(body)))])
        return [body]

    def add(self, path: str, body: bytes) -> str:
        self.files[path] = body
        return self.url + path

    def stop(self) -> None:
        self.server.stop()


def sushy_emulator_command() -> list[str]:
    command = shutil.which("sushy-emulator")
    if command is not None:
        return [command]
    return [sys.executable, "-m", "sushy_tools.emulator.main"]


class Emulator:
    """A sushy-tools Redfish emulator with its own configuration file and state directory."""

    def __init__(self, directory: str, config: str) -> None:
        os.makedirs(directory, exist_ok=True)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        path = os.path.join(directory, "emulator.conf")
        with open(path, "w") as handle:
            handle.write(
                f"SUSHY_EMULATOR_LISTEN_IP = '127.0.0.1'\nSUSHY_EMULATOR_LISTEN_PORT = {self.port}\n"
                # A private state directory: emulators share /tmp/sushy-emulator otherwise.
                f"SUSHY_EMULATOR_STATE_DIR = {os.path.join(directory, 'state')!r}\n{config}"
            )
        self.log_path = os.path.join(directory, "emulator.log")
        self._log = open(self.log_path, "wb")
        self.process = subprocess.Popen([*sushy_emulator_command(), "--config", path],
                                        stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while True:
            try:
                if requests.get(f"{self.url}/redfish/v1/Systems", timeout=2).status_code == 200:
                    break
            except requests.ConnectionError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"sushy-emulator did not start: {self.log()[-800:]}")
            time.sleep(0.2)

    def log(self) -> str:
        with open(self.log_path, errors="replace") as handle:
            return handle.read()

    def get(self, path: str) -> dict[str, Any]:
        response = requests.get(f"{self.url}{path}", timeout=10)
        assert response.status_code == 200, response.text
        return response.json()  # type: ignore[no-any-return]

    def system(self, system_id: str) -> dict[str, Any]:
        return self.get(f"/redfish/v1/Systems/{system_id}")

    def cd(self, system_id: str) -> dict[str, Any]:
        return self.get(f"/redfish/v1/Systems/{system_id}/VirtualMedia/Cd")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._log.close()


def sushy_tools_available() -> bool:
    try:
        import sushy_tools  # noqa: F401
    except ImportError:
        return False
    return True


def require(condition: bool, reason: str) -> None:
    """Skip when ``condition`` fails, unless CI requires every backend: then fail."""
    if condition:
        return
    if os.environ.get("CORRAL_TEST_REQUIRE_BACKENDS") == "1":
        pytest.fail(f"{reason} (CORRAL_TEST_REQUIRE_BACKENDS=1: run tools/baremetal-lab first)")
    pytest.skip(reason)
