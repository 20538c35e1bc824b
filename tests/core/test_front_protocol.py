"""HTTP/1.1 framing of the event-loop front, spoken over raw sockets to ``corral serve``.

The answers' order on a connection, when a connection closes, and what a
malformed or oversized request head gets.
"""

from __future__ import annotations

import re
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from corral.core.front import MAX_HEAD_SIZE
from tests.support.process import CorralProcess, write_config

HEAD = b"Host: x\r\nX-Auth-Token: admin\r\n"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CorralProcess]:
    root = tmp_path_factory.mktemp("front")
    (root / "state").mkdir()
    config = write_config(root / "corral.conf", {"api": {"auth_strategy": "noauth2"}})
    process = CorralProcess(config, root / "state", extra_args=["--threads", "4"]).start()
    yield process
    process.stop()


def _connect(server: CorralProcess) -> socket.socket:
    return socket.create_connection(("127.0.0.1", server.port), timeout=30)


def _read_until_closed(sock: socket.socket) -> bytes:
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def _statuses(answer: bytes) -> list[int]:
    # (an answer's status line follows the previous answer's body directly)
    return [int(code) for code in re.findall(rb"HTTP/1\.1 (\d{3}) ", answer)]


def test_pipelined_requests_are_answered_in_order(server: CorralProcess) -> None:
    with _connect(server) as sock:
        sock.sendall(
            b"GET /placement/ HTTP/1.1\r\n" + HEAD + b"\r\n"
            b"GET /placement/no-such-thing HTTP/1.1\r\n" + HEAD + b"\r\n"
            b"POST /placement/resource_providers HTTP/1.1\r\n" + HEAD
            + b"Content-Type: application/json\r\nContent-Length: 19\r\n\r\n{\"name\": \"piped\"}  "
            b"GET /placement/resource_providers?name=piped HTTP/1.1\r\n" + HEAD + b"Connection: close\r\n\r\n"
        )
        answer = _read_until_closed(sock)
    assert _statuses(answer) == [200, 404, 201, 200]
    assert answer.endswith(b"}") and b'"name":"piped"' in answer.rsplit(b"\r\n\r\n", 1)[1]


def test_http_1_0_requests_are_answered_and_the_connection_closed(server: CorralProcess) -> None:
    with _connect(server) as sock:
        sock.sendall(b"GET /placement/ HTTP/1.0\r\n" + HEAD + b"Connection: keep-alive\r\n\r\n")
        answer = _read_until_closed(sock)
    assert _statuses(answer) == [200]
    assert b"\r\nConnection: close\r\n" in answer


def test_a_head_over_the_limit_is_431(server: CorralProcess) -> None:
    with _connect(server) as sock:
        sock.sendall(b"GET /placement/ HTTP/1.1\r\n" + HEAD + b"X-Big: " + b"a" * MAX_HEAD_SIZE + b"\r\n\r\n")
        answer = _read_until_closed(sock)
    assert _statuses(answer) == [431]


def test_a_header_that_never_ends_is_431_once_over_the_limit(server: CorralProcess) -> None:
    piece = b"a" * 8192
    with _connect(server) as sock:
        sock.sendall(b"GET /placement/ HTTP/1.1\r\n" + HEAD + b"X-Endless: ")
        answer = b""
        for _ in range(4 * MAX_HEAD_SIZE // len(piece)):
            try:
                sock.sendall(piece)
            except OSError:  # closed by the server after its answer
                break
            time.sleep(0.01)
        answer = _read_until_closed(sock)
    assert _statuses(answer) == [431]


def test_a_connection_closed_mid_request_is_answered_400(server: CorralProcess) -> None:
    with _connect(server) as sock:
        sock.sendall(b"GET /placement/ HTTP/1.1\r\n" + HEAD)
        sock.shutdown(socket.SHUT_WR)
        answer = _read_until_closed(sock)
    assert _statuses(answer) == [400]


def test_an_upgrade_request_is_answered_as_http_and_the_connection_closed(server: CorralProcess) -> None:
    with _connect(server) as sock:
        sock.sendall(b"GET /placement/ HTTP/1.1\r\n" + HEAD + b"Upgrade: websocket\r\nConnection: Upgrade\r\n\r\n"
                     b"not http at all")
        answer = _read_until_closed(sock)
    assert _statuses(answer) == [200]


def test_a_head_request_gets_headers_only(server: CorralProcess) -> None:
    with _connect(server) as sock:
        sock.sendall(b"HEAD /placement/resource_providers HTTP/1.1\r\n" + HEAD + b"\r\n"
                     b"GET /placement/ HTTP/1.1\r\n" + HEAD + b"Connection: close\r\n\r\n")
        answer = _read_until_closed(sock)
    # The HEAD answer has no body: the next answer's status line follows
    # its blank line at once.
    first, rest = answer.split(b"\r\n\r\n", 1)
    assert first.startswith(b"HTTP/1.1 ") and rest.startswith(b"HTTP/1.1 200 ")
