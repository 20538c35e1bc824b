"""Slow, silent and greedy clients cannot stop ``corral serve`` answering others.

Every test runs a real ``corral serve`` with few threads (4) and opens more
hostile connections than that before making ordinary requests: a server
that gives a thread to a connection before its request has fully arrived
never answers them.  Deadlines here are generous; nothing is timed.
"""

from __future__ import annotations

import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from tests.support.process import CorralProcess, write_config

THREADS = 4
HOSTILE = 24
TOKEN = {"X-Auth-Token": "admin"}


@pytest.fixture
def server(data_dir: Path, tmp_path: Path) -> Iterator[CorralProcess]:
    config = write_config(tmp_path / "corral.conf", {"api": {"auth_strategy": "noauth2"}})
    process = CorralProcess(config, data_dir, extra_args=["--threads", str(THREADS)]).start()
    yield process
    process.stop()


def _server_with(data_dir: Path, tmp_path: Path, **server_opts: object) -> CorralProcess:
    config = write_config(tmp_path / "corral.conf", {"api": {"auth_strategy": "noauth2"},
                                                     "corral_server": server_opts})
    return CorralProcess(config, data_dir, extra_args=["--threads", str(THREADS)]).start()


class Hostile:
    """Connections that misbehave until closed, some sending a byte now and then."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.sockets: list[socket.socket] = []
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def connect(self, first: bytes = b"") -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=30)
        if first:
            sock.sendall(first)
        self.sockets.append(sock)
        return sock

    def trickle(self, data: bytes, head: bytes = b"") -> None:
        """Send ``head`` at once, then ``data`` one byte every 0.2 s."""
        sock = self.connect(head)

        def run() -> None:
            for byte in data:
                if self._stop.wait(0.2):
                    return
                try:
                    sock.sendall(bytes([byte]))
                except OSError:
                    return

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        self._threads.append(thread)

    def close(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=5)
        for sock in self.sockets:
            sock.close()


@pytest.fixture
def hostile(server: CorralProcess) -> Iterator[Hostile]:
    attack = Hostile(server.port)
    yield attack
    attack.close()


def _ordinary_requests_succeed(server: CorralProcess) -> None:
    for _ in range(THREADS + 2):
        response = requests.get(server.url + "/placement/resource_providers", headers=TOKEN, timeout=30)
        assert response.status_code == 200
    created = requests.post(server.url + "/placement/resource_providers", headers=TOKEN,
                            json={"name": "during-attack"}, timeout=30)
    assert created.status_code in (200, 201)


def test_stalled_request_lines_do_not_block_others(server: CorralProcess, hostile: Hostile) -> None:
    for _ in range(HOSTILE):
        hostile.connect(b"GET /placement/resource_pro")
    _ordinary_requests_succeed(server)


def test_idle_connections_do_not_block_others(server: CorralProcess, hostile: Hostile) -> None:
    for _ in range(HOSTILE):
        hostile.connect()
    _ordinary_requests_succeed(server)


def test_headers_sent_a_byte_at_a_time_do_not_block_others(server: CorralProcess, hostile: Hostile) -> None:
    # 300 bytes at 0.2 s each: a minute, longer than an ordinary request waits.
    request = (b"GET /placement/resource_providers HTTP/1.1\r\nHost: x\r\nX-Auth-Token: admin\r\n"
               b"X-Padding: %s\r\n\r\n" % (b"p" * 200))
    for _ in range(HOSTILE):
        hostile.trickle(request[5:], head=request[:5])
    _ordinary_requests_succeed(server)


def test_bodies_sent_a_byte_at_a_time_do_not_block_others(server: CorralProcess, hostile: Hostile) -> None:
    body = b'{"name": "slow-provider", "padding": "%s"}' % (b"p" * 250)
    head = (b"POST /placement/resource_providers HTTP/1.1\r\nHost: x\r\nX-Auth-Token: admin\r\n"
            b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body))
    for _ in range(HOSTILE):
        hostile.trickle(body, head=head)
    _ordinary_requests_succeed(server)


# ------------------------------------------------------------ deadlines


def _read_until_closed(sock: socket.socket) -> bytes:
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def test_an_incomplete_request_head_is_answered_408_and_closed(data_dir: Path, tmp_path: Path) -> None:
    server = _server_with(data_dir, tmp_path, header_timeout=1)
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
            sock.sendall(b"GET /placement/resource_pro")
            answer = _read_until_closed(sock)
        assert answer.startswith(b"HTTP/1.1 408 ")
        with socket.create_connection(("127.0.0.1", server.port), timeout=30) as silent:
            assert _read_until_closed(silent) == b""  # closed without a word: nothing was asked
    finally:
        server.stop()


def test_a_body_too_slow_is_answered_408_and_closed(data_dir: Path, tmp_path: Path) -> None:
    server = _server_with(data_dir, tmp_path, body_timeout=1)
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
            sock.sendall(b"POST /placement/resource_providers HTTP/1.1\r\nHost: x\r\n"
                         b"Content-Length: 100\r\n\r\n{")
            answer = _read_until_closed(sock)
        assert answer.startswith(b"HTTP/1.1 408 ")
    finally:
        server.stop()


def test_an_idle_kept_alive_connection_is_closed(data_dir: Path, tmp_path: Path) -> None:
    server = _server_with(data_dir, tmp_path, keepalive_timeout=1)
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
            sock.sendall(b"GET /placement/ HTTP/1.1\r\nHost: x\r\n\r\n")
            answer = _read_until_closed(sock)
        assert answer.startswith(b"HTTP/1.1 200 ")
        assert answer.count(b"HTTP/1.1") == 1
    finally:
        server.stop()


def test_connections_beyond_the_cap_are_refused_with_503(data_dir: Path, tmp_path: Path) -> None:
    server = _server_with(data_dir, tmp_path, max_connections=8)
    attack = Hostile(server.port)
    try:
        for _ in range(8):
            attack.connect(b"GET /placement/")
        with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
            sock.sendall(b"GET /placement/ HTTP/1.1\r\nHost: x\r\n\r\n")
            answer = _read_until_closed(sock)
        assert answer.startswith(b"HTTP/1.1 503 ")
        assert b"\r\nretry-after: 1\r\n" in answer.lower()
        attack.close()
        for _ in range(300):  # the server sees the closes in its own time
            response = requests.get(server.url + "/placement/", timeout=30)
            if response.status_code != 503:
                break
        assert response.status_code == 200
    finally:
        attack.close()
        server.stop()


# -------------------------------------------------- bodies and keep-alive


def test_a_body_over_the_limit_is_refused_unread_in_the_service_format(server: CorralProcess) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(b"POST /placement/resource_providers HTTP/1.1\r\nHost: x\r\nX-Auth-Token: admin\r\n"
                     b"Content-Type: application/json\r\nContent-Length: 100000000\r\n\r\n")
        answer = _read_until_closed(sock)
    assert answer.startswith(b"HTTP/1.1 413 ")
    assert b'"errors"' in answer  # Placement's error body


def test_chunked_bodies_and_kept_alive_connections_work(server: CorralProcess) -> None:
    with requests.Session() as session:
        def chunks() -> Iterator[bytes]:
            yield b'{"name": '
            yield b'"chunked"}'

        created = session.post(server.url + "/placement/resource_providers", data=chunks(), timeout=30,
                               headers={**TOKEN, "Content-Type": "application/json"})
        assert created.status_code in (200, 201), created.text
        listed = session.get(server.url + "/placement/resource_providers?name=chunked", headers=TOKEN, timeout=30)
        assert [rp["name"] for rp in listed.json()["resource_providers"]] == ["chunked"]


def test_expect_100_continue_is_honoured(server: CorralProcess) -> None:
    body = b'{"name": "continued"}'
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(b"POST /placement/resource_providers HTTP/1.1\r\nHost: x\r\nX-Auth-Token: admin\r\n"
                     b"Content-Type: application/json\r\nExpect: 100-continue\r\nConnection: close\r\n"
                     b"Content-Length: %d\r\n\r\n" % len(body))
        assert sock.recv(65536).startswith(b"HTTP/1.1 100 ")
        sock.sendall(body)
        answer = _read_until_closed(sock)
    assert answer.split(b" ", 2)[1] in (b"200", b"201")


def test_malformed_requests_get_400(server: CorralProcess) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(b"GET /placement/ HTTP/1.1\r\nBad Header Line\r\n\r\n")
        assert _read_until_closed(sock).startswith(b"HTTP/1.1 400 ")


@pytest.mark.slow
def test_several_worker_processes_serve(data_dir: Path, tmp_path: Path) -> None:
    config = write_config(tmp_path / "corral.conf", {"api": {"auth_strategy": "noauth2"}})
    server = CorralProcess(config, data_dir, extra_args=["--workers", "2", "--threads", "2"]).start()
    try:
        for _ in range(10):
            assert requests.get(server.url + "/placement/resource_providers", headers=TOKEN,
                                timeout=30).status_code == 200
    finally:
        server.stop()


@pytest.mark.slow
def test_the_worker_class_serves_a_wsgi_entry_point_under_gunicorn(data_dir: Path, tmp_path: Path) -> None:
    import os
    import subprocess

    from tests.support.ports import free_port

    config = write_config(tmp_path / "corral.conf", {"api": {"auth_strategy": "noauth2"}})
    assert subprocess.run([sys.executable, "-m", "corral", "db", "upgrade", "--config-file", str(config),
                           "--data-dir", str(data_dir)], capture_output=True, timeout=120).returncode == 0
    port = free_port()
    env = {**os.environ, "CORRAL_CONFIG_FILE": str(config), "CORRAL_DATA_DIR": str(data_dir)}
    log = open(tmp_path / "gunicorn.log", "wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "-k", "corral.core.front.BufferingWorker", "--threads", "2",
         "-b", f"127.0.0.1:{port}", "corral.wsgi:placement()"],
        env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    log.close()
    try:
        hostile = Hostile(port)
        ready = CorralProcess(config, data_dir, port=port)
        ready.process = process
        ready.log_path = tmp_path / "gunicorn.log"
        ready.wait_ready("/", 60)
        for _ in range(HOSTILE):
            hostile.connect(b"GET /resource_pro")
        response = requests.get(f"http://127.0.0.1:{port}/resource_providers", headers=TOKEN, timeout=30)
        assert response.status_code == 200
        hostile.close()
    finally:
        process.terminate()
        process.wait(timeout=30)
