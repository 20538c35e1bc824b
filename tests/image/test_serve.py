"""Image data through ``corral serve``: streamed both ways, never held whole, and recovered after a crash."""

from __future__ import annotations

import hashlib
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.support.databases import DatabaseFactory
from tests.support.ports import free_port
from tests.support.process import CorralProcess, write_config

pytestmark = pytest.mark.slow

HEADERS = {"X-Auth-Token": "alice:project-alice", "X-Roles": "member,reader", "Accept": "application/json"}
MIB = 1024 * 1024


class Served:
    def __init__(self, base: Path, db_url: str) -> None:
        self.data_dir = base / "state"
        self.data_dir.mkdir(exist_ok=True)
        self.config = write_config(base / "corral.conf", {
            "api": {"auth_strategy": "noauth2"},
            "image_database": {"connection": db_url},
            "corral_image": {"lease_duration": 3, "recovery_interval": 0.5},
        })
        self.port = free_port()
        self.process: CorralProcess | None = None

    def start(self) -> Served:
        self.process = CorralProcess(self.config, self.data_dir, port=self.port, extra_args=["--migrate"]).start(
            wait_path="/image/versions")
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/image"

    def files(self) -> list[str]:
        directory = self.data_dir / "images"
        return sorted(p.name for p in directory.iterdir()) if directory.exists() else []

    def image(self, image_id: str) -> dict[str, Any]:
        return requests.get(f"{self.url}/v2/images/{image_id}", headers=HEADERS, timeout=30).json()  # type: ignore[no-any-return]

    def create(self) -> str:
        response = requests.post(f"{self.url}/v2/images", headers=HEADERS, timeout=30,
                                 json={"disk_format": "raw", "container_format": "bare"})
        assert response.status_code == 201, response.text
        return str(response.json()["id"])

    def worker_peak_rss(self) -> int:
        """The largest VmHWM among the server's processes, in bytes."""
        assert self.process is not None and self.process.process is not None
        peak = 0
        for pid in [self.process.process.pid, *_children(self.process.process.pid)]:
            try:
                status = Path(f"/proc/{pid}/status").read_text()
            except OSError:
                continue
            for line in status.splitlines():
                if line.startswith("VmHWM:"):
                    peak = max(peak, int(line.split()[1]) * 1024)
        return peak


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        children = (task / "children").read_text().split()
        for child in children:
            found += [int(child), *_children(int(child))]
    return found


@pytest.fixture
def served(database_factory: DatabaseFactory, tmp_path: Path) -> Iterator[Served]:
    server = Served(tmp_path, database_factory.new_url("image")).start()
    yield server
    if server.process is not None:
        server.process.stop()


def _chunks(total: int, seed: bytes) -> Iterator[bytes]:
    block = hashlib.sha512(seed).digest() * (MIB // 64)
    for _ in range(total // MIB):
        yield block


@pytest.mark.backends("first")
def test_a_large_upload_streams_through_and_back(served: Served) -> None:
    size = 96 * MIB
    expected = hashlib.sha512()
    for chunk in _chunks(size, b"large"):
        expected.update(chunk)
    image_id = served.create()
    before = served.worker_peak_rss()
    # (A generator body goes chunked: the size is not known in advance.)
    response = requests.put(f"{served.url}/v2/images/{image_id}/file", data=_chunks(size, b"large"), timeout=600,
                            headers={**HEADERS, "Content-Type": "application/octet-stream"})
    assert response.status_code == 204, response.text
    image = served.image(image_id)
    assert (image["status"], image["size"], image["os_hash_value"]) == ("active", size, expected.hexdigest())
    # The data was never held whole: the server grew by a small part of the image.
    assert served.worker_peak_rss() - before < size // 3
    got = hashlib.sha512()
    with requests.get(f"{served.url}/v2/images/{image_id}/file", headers=HEADERS, stream=True, timeout=600) as answer:
        assert int(answer.headers["Content-Length"]) == size
        for chunk in answer.iter_content(MIB):
            got.update(chunk)
    assert got.hexdigest() == expected.hexdigest()


def _start_upload(url: str, image_id: str, declared: int, sent: int) -> socket.socket:
    host, port = url.removeprefix("http://").split("/")[0].split(":")
    sock = socket.create_connection((host, int(port)))
    head = (f"PUT /image/v2/images/{image_id}/file HTTP/1.1\r\nHost: {host}\r\nX-Auth-Token: {HEADERS['X-Auth-Token']}"
            f"\r\nX-Roles: member,reader\r\nContent-Type: application/octet-stream\r\nContent-Length: {declared}"
            "\r\n\r\n")
    sock.sendall(head.encode() + b"x" * sent)
    return sock


def _wait(condition: Any, timeout: float = 60) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return bool(condition())


@pytest.mark.backends("first")
def test_a_client_that_goes_away_mid_upload_leaves_the_image_queued(served: Served) -> None:
    image_id = served.create()
    sock = _start_upload(served.url, image_id, 64 * MIB, 8 * MIB)
    assert _wait(lambda: served.image(image_id)["status"] == "saving")
    sock.close()
    assert _wait(lambda: served.image(image_id)["status"] == "queued")
    assert _wait(lambda: served.files() == [])
    assert served.process is not None
    assert "Traceback" not in served.process.log()
    again = requests.put(f"{served.url}/v2/images/{image_id}/file", data=b"y" * 1000, timeout=60,
                         headers={**HEADERS, "Content-Type": "application/octet-stream"})
    assert again.status_code == 204


def test_a_server_killed_mid_upload_is_cleaned_up_after_restart(served: Served) -> None:
    image_id = served.create()
    sock = _start_upload(served.url, image_id, 64 * MIB, 4 * MIB)
    assert _wait(lambda: served.image(image_id)["status"] == "saving")
    assert _wait(lambda: served.files() == [image_id])
    assert served.process is not None
    served.process.kill()
    sock.close()
    # The half-written data is still there: nobody had a chance to remove it.
    assert served.files() == [image_id]
    served.start()
    # Once the dead writer's lease expires, the next API process to look removes it.
    assert _wait(lambda: served.image(image_id)["status"] == "queued")
    assert _wait(lambda: served.files() == [])
    upload = requests.put(f"{served.url}/v2/images/{image_id}/file", data=os.urandom(4096), timeout=60,
                          headers={**HEADERS, "Content-Type": "application/octet-stream"})
    assert upload.status_code == 204
    assert served.image(image_id)["status"] == "active"
