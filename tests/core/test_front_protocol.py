"""HTTP/1.1 framing of the event-loop front, spoken over raw sockets to ``corral serve``.

The answers' order on a connection, when a connection closes, what a
malformed or oversized request head gets, and clients that reset the
connection early.
"""

from __future__ import annotations

import asyncio
import errno
import re
import socket
import struct
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import requests

from corral.core.front import MAX_HEAD_SIZE, Limits, _Connection, _Front
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


# ------------------------------------------------ clients that go away early


def _reset(sock: socket.socket) -> None:
    """Close with a reset (RST), as load balancers' health checks often do."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def test_health_checks_that_reset_the_connection_leave_no_error_in_the_log(server: CorralProcess) -> None:
    logged = len(server.log_path.read_bytes())
    for number in range(600):
        sock = _connect(server)
        kind = number % 6
        if kind == 0:
            _reset(sock)  # right after connecting
            continue
        version = b"1.0" if kind in (1, 2, 3) else b"1.1"
        sock.sendall(b"GET /healthcheck HTTP/" + version + b"\r\nHost: x\r\n\r\n")
        if kind in (1, 4):
            sock.recv(65536)  # after reading (some of) the answer
        elif kind == 3:
            sock.shutdown(socket.SHUT_WR)
        _reset(sock)
    assert requests.get(server.url + "/healthcheck", timeout=30).status_code == 200
    log = server.log_path.read_bytes()[logged:].decode(errors="replace")
    assert " ERROR " not in log and "Traceback" not in log, log


class _ResetTransport(asyncio.Transport):
    """A socket whose client reset the connection once it had the answer: shutting down our side fails."""

    def __init__(self, loop: asyncio.AbstractEventLoop, protocol: asyncio.BaseProtocol) -> None:
        super().__init__()
        self._loop = loop
        self._protocol = protocol
        self.written = b""
        self.closing = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 1) if name in ("peername", "sockname") else default

    def write(self, data: Any) -> None:
        self.written += bytes(data)

    def can_write_eof(self) -> bool:
        return True

    def write_eof(self) -> None:
        raise OSError(errno.ENOTCONN, "Transport endpoint is not connected")

    def is_closing(self) -> bool:
        return self.closing

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def abort(self) -> None:
        self.close()

    def close(self) -> None:
        if not self.closing:
            self.closing = True
            self._loop.call_soon(self._protocol.connection_lost, None)


def test_an_answer_whose_client_has_reset_the_connection_ends_it_quietly() -> None:
    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        start_response("200 OK", [("Content-Length", "2")])
        return [b"ok"]

    loop = asyncio.new_event_loop()
    errors: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: errors.append(context))
    with ThreadPoolExecutor(max_workers=1) as executor:
        front = _Front(app, executor, Limits(), multiprocess=False, forwarded_allow_ips=[], secure_scheme_headers={})
        connection = _Connection(front, loop)
        transport = _ResetTransport(loop, connection)
        connection.connection_made(transport)
        connection.data_received(b"GET /healthcheck HTTP/1.0\r\n\r\n")

        async def until_ended() -> None:
            while not (errors or (transport.closing and not front.connections)):
                await asyncio.sleep(0.01)

        loop.run_until_complete(asyncio.wait_for(until_ended(), 30))
    loop.close()
    assert errors == []
    assert transport.written.startswith(b"HTTP/1.1 200 OK\r\n") and transport.written.endswith(b"\r\n\r\nok")
