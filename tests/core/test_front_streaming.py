"""Streamed request bodies and answers through the event-loop front, served as ``corral serve`` serves.

The service is the test-only one of ``tests/support/stream_service.py``
(uploads under ``/stream/upload/`` stream; it hashes what it reads). Nothing
is timed: deadlines are generous or short on purpose, and each test checks
what happened, not how fast.
"""

from __future__ import annotations

import hashlib
import http.client
import re
import socket
import struct
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import requests

from corral.core import config, services, wsgi
from tests.support.stream_server import StreamServer
from tests.support.stream_service import BLOCK, block, content

MAX_STREAMED = 2


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StreamServer]:
    process = StreamServer(tmp_path_factory.mktemp("streams"), threads=4, max_streamed=MAX_STREAMED).start()
    yield process
    process.stop()


@pytest.fixture
def strict(tmp_path: Path) -> Iterator[StreamServer]:
    """One thread for ordinary requests, one for streamed ones, and one-second deadlines."""
    process = StreamServer(tmp_path, threads=1, max_streamed=1, body_timeout=1.0, send_timeout=1.0).start()
    yield process
    process.stop()


def _connect(server: StreamServer) -> socket.socket:
    return socket.create_connection(("127.0.0.1", server.port), timeout=30)


def _read_until_closed(sock: socket.socket) -> bytes:
    data = b""
    try:
        while chunk := sock.recv(1 << 20):
            data += chunk
    except ConnectionResetError:
        pass
    return data


def _reset(sock: socket.socket) -> None:
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def _events(server: StreamServer, event: str, name: str) -> list[dict[str, Any]]:
    answer = requests.get(server.url + "/stream/events", timeout=30).json()
    return [item for item in answer if item["event"] == event and item["name"] == name]


def _wait_for(check: Callable[[], Any], what: str) -> Any:
    """Poll until ``check()`` is true (the server acts on a closed connection in its own time)."""
    for _ in range(600):
        result = check()
        if result:
            return result
        time.sleep(0.1)
    raise AssertionError(f"never happened: {what}")


def _served(send: Callable[[], requests.Response]) -> requests.Response:
    """The answer to ``send()`` once it is not 503 (a streamed request's place is freed when its thread ends)."""
    for _ in range(600):
        response = send()
        if response.status_code != 503:
            return response
        time.sleep(0.1)
    raise AssertionError("no place for a streamed request")


def _peak_rss(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"^VmHWM:\s+(\d+) kB", status, re.M).group(1)) * 1024  # type: ignore[union-attr]


# ------------------------------------------------- which requests stream


def test_services_declare_the_requests_whose_body_streams(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(services.SERVICE_MODULES, "streamtest", "tests.support.stream_service")
    conf = config.make_conf([], overrides={"api": {"auth_strategy": "noauth"}}, services=["streamtest"])
    mounted = wsgi.all_in_one(conf, ["streamtest"]).streams_body  # type: ignore[attr-defined]
    assert mounted("PUT", "/stream/upload/x")
    assert not mounted("POST", "/stream/upload/x") and not mounted("PUT", "/stream/upload/x/y")
    assert not mounted("PUT", "/upload/x") and not mounted("PUT", "/other/stream/upload/x")
    alone = wsgi.service_app(conf, "streamtest").streams_body  # type: ignore[attr-defined]
    assert alone("PUT", "/upload/x") and not alone("PUT", "/stream/upload/x")
    assert wsgi.streamed_bodies([("/placement", SimpleNamespace())]) is None


# ------------------------------------------------------------------ uploads


def test_a_large_upload_streams_through_a_small_buffer(server: StreamServer) -> None:
    size = 128 * BLOCK
    requests.get(server.url + "/stream/ping", timeout=30)
    worker = server.worker_pid()
    before = _peak_rss(worker)
    expected = hashlib.sha256()
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    connection.putrequest("PUT", "/stream/upload/large")
    connection.putheader("Content-Length", str(size))
    connection.endheaders()
    for index in range(size // BLOCK):
        data = block("large", index)
        expected.update(data)
        connection.send(data)
    response = connection.getresponse()
    answer = response.read()
    connection.close()
    assert response.status == 200, answer
    result = requests.get(server.url + "/stream/events", timeout=30).json()
    upload = [item for item in result if item["event"] == "upload" and item["name"] == "large"][0]
    assert upload["size"] == size and upload["sha256"] == expected.hexdigest()
    assert upload["content_length"] == str(size) and upload["streamed"]
    # The body is far above max_body_size and was never held whole.
    assert _peak_rss(worker) - before < size // 8


@pytest.mark.slow
def test_the_worker_class_streams_under_gunicorn_s_own_command(tmp_path: Path) -> None:
    process = StreamServer(tmp_path, threads=2, gunicorn_command=True).start()
    try:
        body = b"".join(content("operator", 4 * BLOCK))  # far above the default max_body_size
        response = requests.put(process.url + "/stream/upload/operator", data=body, timeout=60)
        assert response.status_code == 200, response.text
        assert response.json()["streamed"] and response.json()["sha256"] == hashlib.sha256(body).hexdigest()
    finally:
        process.stop()


def test_a_chunked_upload_streams_without_a_length(server: StreamServer) -> None:
    size = 8 * BLOCK + 12345
    response = requests.put(server.url + "/stream/upload/chunked?read=100000", data=content("chunked", size),
                            timeout=60)
    assert response.status_code == 200, response.text
    expected = hashlib.sha256(b"".join(content("chunked", size))).hexdigest()
    assert response.json()["sha256"] == expected and response.json()["size"] == size
    assert response.json()["content_length"] is None and response.json()["terminated"]


def test_a_streamed_body_can_be_read_line_by_line_and_continue_is_honoured(server: StreamServer) -> None:
    body = b"".join(b"line %d\n" % number for number in range(100000)) + b"no newline at the end"
    with _connect(server) as sock:
        sock.sendall(b"PUT /stream/upload/lines?readline=1 HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
                     b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body))
        assert sock.recv(65536).startswith(b"HTTP/1.1 100 Continue\r\n\r\n")
        sock.sendall(body)
        answer = _read_until_closed(sock)
    assert answer.startswith(b"HTTP/1.1 200 ")
    assert hashlib.sha256(body).hexdigest().encode() in answer


def test_a_request_pipelined_after_a_streamed_upload_is_answered_after_it(server: StreamServer) -> None:
    body = b"".join(content("piped", 3 * BLOCK))
    with _connect(server) as sock:
        sock.sendall(b"PUT /stream/upload/piped HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body)
                     + body + b"GET /stream/ping HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        answer = _read_until_closed(sock)
    assert re.findall(rb"HTTP/1\.1 (\d{3}) ", answer) == [b"200", b"200"]
    assert hashlib.sha256(body).hexdigest().encode() in answer and answer.endswith(b'{"pong":true}')


def test_routes_not_declared_streamed_keep_the_body_size_limit(server: StreamServer) -> None:
    response = requests.put(server.url + "/stream/whole/small", data=b"x" * 1000, timeout=30)
    assert response.status_code == 200 and not response.json()["streamed"]
    with _connect(server) as sock:
        sock.sendall(b"PUT /stream/whole/big HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\n")
        answer = _read_until_closed(sock)
    # Not read: the test service hashes the nothing it was given.
    assert answer.startswith(b"HTTP/1.1 200 ") and b'"size":0' in answer


def test_a_client_that_stops_sending_is_cut_off_and_the_application_told(strict: StreamServer) -> None:
    with _connect(strict) as sock:
        sock.sendall(b"PUT /stream/upload/stalled HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % (10 * BLOCK)
                     + b"x" * 100000)
        assert _read_until_closed(sock) == b""  # closed without an answer
    failed = _wait_for(lambda: _events(strict, "upload-failed", "stalled"), "the application's read raising")
    assert failed[0]["size"] == 100000 and "stalled" in failed[0]["error"]
    # The one streams' thread is free again once the application has returned.
    response = _served(lambda: requests.put(strict.url + "/stream/upload/after", data=b"y" * BLOCK, timeout=30))
    assert response.status_code == 200 and response.json()["size"] == BLOCK


def test_a_client_that_goes_away_mid_body_is_an_error_for_the_application(server: StreamServer) -> None:
    sock = _connect(server)
    sock.sendall(b"PUT /stream/upload/gone HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                 b"10000\r\n" + b"z" * 0x10000 + b"\r\n")
    _wait_for(lambda: _events(server, "upload-started", "gone"), "the upload starting")
    _reset(sock)
    failed = _wait_for(lambda: _events(server, "upload-failed", "gone"), "the application's read raising")
    assert failed[0]["size"] == 0x10000
    assert requests.get(server.url + "/stream/ping", timeout=30).status_code == 200


def test_streamed_requests_beyond_the_cap_are_refused_and_ordinary_ones_answered(server: StreamServer) -> None:
    held = []
    try:
        for number in range(MAX_STREAMED):
            sock = _connect(server)
            sock.sendall(b"PUT /stream/upload/held-%d HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nab" % number)
            held.append(sock)
        for number in range(MAX_STREAMED):
            _wait_for(lambda: _events(server, "upload-started", f"held-{number}"), "the held uploads running")
        with _connect(server) as sock:
            sock.sendall(b"PUT /stream/upload/refused HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n")
            answer = _read_until_closed(sock)
        assert answer.startswith(b"HTTP/1.1 503 ")
        assert b"\r\nRetry-After: 1\r\n" in answer and answer.endswith(b"}")
        download = requests.get(server.url + "/stream/download/refused", timeout=30)
        assert download.status_code == 503 and download.headers["Retry-After"] == "1"
        assert "try again later" in download.json()["message"]
        assert requests.get(server.url + "/stream/ping", timeout=30).status_code == 200
    finally:
        for sock in held:
            sock.close()
    assert _served(lambda: requests.get(server.url + "/stream/download/after?size=10", timeout=30)).ok


# ---------------------------------------------------------------- downloads


def _sha256(chunks: Iterator[bytes]) -> str:
    digest = hashlib.sha256()
    for chunk in chunks:
        digest.update(chunk)
    return digest.hexdigest()


def test_a_large_download_streams_with_its_length(server: StreamServer) -> None:
    size = 64 * BLOCK + 7
    with requests.get(server.url + f"/stream/download/big?size={size}", stream=True, timeout=60) as response:
        assert response.status_code == 200
        assert response.headers["Content-Length"] == str(size)
        assert "Transfer-Encoding" not in response.headers
        assert _sha256(response.iter_content(BLOCK)) == _sha256(content("big", size))
    closed = _wait_for(lambda: _events(server, "download-closed", "big"), "the answer closed")
    assert closed[0]["sent"] == size


def test_a_file_wrapper_answer_streams_the_file(server: StreamServer, tmp_path: Path) -> None:
    path = tmp_path / "image"
    path.write_bytes(b"".join(content("file", 3 * BLOCK + 1)))
    response = requests.get(server.url + "/stream/file", params={"path": str(path)}, timeout=60)
    assert response.status_code == 200 and response.headers["Content-Length"] == str(3 * BLOCK + 1)
    assert response.content == path.read_bytes()


def test_a_download_without_a_length_is_chunked_and_the_connection_kept(server: StreamServer) -> None:
    size = 5 * BLOCK + 3
    with requests.Session() as session:
        response = session.get(server.url + f"/stream/download/chunks?size={size}&length=0", timeout=60)
        assert response.headers["Transfer-Encoding"] == "chunked" and "Content-Length" not in response.headers
        assert _sha256(iter([response.content])) == _sha256(content("chunks", size))
        assert session.get(server.url + "/stream/ping", timeout=30).json() == {"pong": True}


def test_an_http_1_0_download_without_a_length_ends_with_the_connection(server: StreamServer) -> None:
    with _connect(server) as sock:
        sock.sendall(b"GET /stream/download/old?size=100000&length=0 HTTP/1.0\r\n\r\n")
        answer = _read_until_closed(sock)
    head, body = answer.split(b"\r\n\r\n", 1)
    assert b"Transfer-Encoding" not in head and b"Connection: close" in head
    assert body == b"".join(content("old", 100000))


def test_head_and_no_content_answers_have_no_body(server: StreamServer) -> None:
    with _connect(server) as sock:
        sock.sendall(b"HEAD /stream/download/head?size=5000000 HTTP/1.1\r\nHost: x\r\n\r\n"
                     b"GET /stream/empty HTTP/1.1\r\nHost: x\r\n\r\n"
                     b"GET /stream/ping HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        answer = _read_until_closed(sock)
    first, second, third = re.split(rb"(?=HTTP/1\.1 )", answer)[1:]
    assert first.startswith(b"HTTP/1.1 200 ") and first.endswith(b"Content-Length: 5000000\r\n\r\n")
    assert second.startswith(b"HTTP/1.1 204 ") and second.endswith(b"\r\n\r\n")
    assert b"Content-Length" not in second and b"Transfer-Encoding" not in second
    assert third.endswith(b'{"pong":true}')


@pytest.mark.parametrize("how", ["short", "fail"])
def test_a_download_that_ends_early_aborts_the_connection(server: StreamServer, how: str) -> None:
    with _connect(server) as sock:
        sock.sendall(b"GET /stream/download/%s?size=4000000&%s=1 HTTP/1.1\r\nHost: x\r\n\r\n" % (how.encode(),
                                                                                                  how.encode()))
        answer = _read_until_closed(sock)
    head, body = answer.split(b"\r\n\r\n", 1)
    assert b"Content-Length: 4000000" in head
    assert len(body) < 4000000 and b"HTTP/1.1" not in body[-100:]
    _wait_for(lambda: _events(server, "download-closed", how), "the answer closed")
    assert requests.get(server.url + "/stream/ping", timeout=30).status_code == 200


def test_downloads_beyond_the_cap_are_refused_and_ordinary_requests_answered(server: StreamServer) -> None:
    held = []
    try:
        for number in range(MAX_STREAMED):
            sock = _connect(server)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.sendall(b"GET /stream/download/unread-%d?size=%d HTTP/1.1\r\nHost: x\r\n\r\n"
                         % (number, 512 * BLOCK))
            assert sock.recv(100).startswith(b"HTTP/1.1 200 ")  # under way, and then not read
            held.append(sock)
        refused = requests.get(server.url + "/stream/download/refused-too", timeout=30)
        assert refused.status_code == 503 and refused.headers["Retry-After"] == "1"
        assert requests.get(server.url + "/stream/ping", timeout=30).json() == {"pong": True}
    finally:
        for sock in held:
            _reset(sock)
    assert _served(lambda: requests.get(server.url + "/stream/download/after-too?size=10", timeout=30)).ok


def test_a_client_that_goes_away_mid_download_has_the_answer_closed(server: StreamServer) -> None:
    sock = _connect(server)
    sock.sendall(b"GET /stream/download/abandoned?size=%d HTTP/1.1\r\nHost: x\r\n\r\n" % (256 * BLOCK))
    received = 0
    while received < 2 * BLOCK:
        received += len(sock.recv(1 << 20))
    _reset(sock)
    closed = _wait_for(lambda: _events(server, "download-closed", "abandoned"), "the answer closed")
    assert closed[0]["sent"] < 256 * BLOCK


def test_a_client_that_stops_reading_frees_the_thread_after_send_timeout(strict: StreamServer) -> None:
    sock = _connect(strict)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.sendall(b"GET /stream/download/unread?size=%d HTTP/1.1\r\nHost: x\r\n\r\n" % (512 * BLOCK))
        # The one ordinary thread is free while the download waits on its reader.
        assert requests.get(strict.url + "/stream/ping", timeout=30).status_code == 200
        closed = _wait_for(lambda: _events(strict, "download-closed", "unread"), "the answer closed")
        assert closed[0]["sent"] < 512 * BLOCK
        # The one streams' thread is free again.
        response = _served(lambda: requests.get(strict.url + "/stream/download/next?size=1000", timeout=30))
        assert response.status_code == 200 and response.content == b"".join(content("next", 1000))
    finally:
        sock.close()
