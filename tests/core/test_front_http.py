"""Requests and answers of the event-loop front, without sockets."""

from __future__ import annotations

import io
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from corral.core.front_http import (
    ClientDisconnected,
    FileWrapper,
    PendingAnswer,
    Request,
    build_environ,
    call_app,
    render,
)
from corral.core.front_stream import (
    CHUNKED,
    LENGTH,
    NO_BODY,
    STREAM_BUFFER,
    UNTIL_CLOSE,
    BodyStream,
    Outlet,
    send_answer,
    stream_head,
)


def _request(method: bytes = b"GET", version: str = "1.1", headers: list[tuple[bytes, bytes]] | None = None,
             target: bytes = b"/placement/x?y=1") -> Request:
    request = Request()
    request.target = target
    request.raw_headers = headers or []
    request.head_done(method, version, keep_alive=True)
    return request


def test_the_body_length_is_the_body_sent_whatever_the_application_said() -> None:
    answer = ("200 OK", [("Content-Type", "application/json"), ("Content-Length", "999")], [b"{}", b""])
    data, keep_open = render(_request(), answer, keep_open=True)
    assert keep_open
    assert data == b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"


def test_a_head_answer_keeps_the_declared_length_and_sends_no_body() -> None:
    answer = ("200 OK", [("Content-Length", "42")], [b"x" * 42])
    data, _ = render(_request(b"HEAD"), answer, keep_open=True)
    assert data == b"HTTP/1.1 200 OK\r\nContent-Length: 42\r\n\r\n"


def test_no_content_answers_have_no_body_and_no_length() -> None:
    data, _ = render(_request(b"DELETE"), ("204 No Content", [], [b"ignored"]), keep_open=True)
    assert data == b"HTTP/1.1 204 No Content\r\n\r\n"


def test_an_application_asking_to_close_closes() -> None:
    data, keep_open = render(_request(), ("200 OK", [("Connection", "close")], [b""]), keep_open=True)
    assert not keep_open
    assert data.endswith(b"Content-Length: 0\r\nConnection: close\r\n\r\n")


@pytest.mark.parametrize("headers", [
    [("X-Bad", "one\r\nSet-Cookie: forged")],
    [("X-Bad\r\nX-Forged", "value")],
    [("X Bad", "value")],
    [("X-Nul", "a\0b")],
    [("X-Wide", "\u20ac")],
])
def test_headers_that_would_break_the_message_are_refused(headers: list[tuple[str, str]]) -> None:
    with pytest.raises(ValueError):
        render(_request(), ("200 OK", headers, [b""]), keep_open=True)


def test_http_1_0_is_not_kept_alive_and_expect_needs_1_1() -> None:
    old = _request(version="1.0", headers=[(b"expect", b"100-continue"), (b"content-length", b"5")])
    assert not old.keep_alive and not old.expects_continue
    new = _request(version="1.1", headers=[(b"expect", b"100-Continue"), (b"content-length", b"5")])
    assert new.keep_alive and new.expects_continue
    empty = _request(version="1.1", headers=[(b"expect", b"100-continue"), (b"content-length", b"0")])
    assert not empty.expects_continue


def test_the_environ_takes_the_path_of_an_absolute_target_and_drops_ambiguous_headers() -> None:
    request = _request(b"POST", target=b"http://example.com/placement/a%20b?q=1",
                       headers=[(b"x-auth-token", b"t"), (b"x-auth_token", b"forged"), (b"content-type", b"text/plain"),
                                (b"content-length", b"2"), (b"x-many", b"a"), (b"x-many", b"b")])
    request.body += b"{}"
    environ = build_environ(request, ("10.0.0.1", 5), ("127.0.0.1", 80), "http", False)
    assert environ["PATH_INFO"] == "/placement/a b"
    assert environ["QUERY_STRING"] == "q=1"
    assert environ["HTTP_X_AUTH_TOKEN"] == "t"
    assert environ["CONTENT_TYPE"] == "text/plain"
    assert environ["CONTENT_LENGTH"] == "2"
    assert environ["HTTP_X_MANY"] == "a,b"
    assert environ["wsgi.input"].read() == b"{}"


# ------------------------------------------------ streamed bodies and answers


def test_only_lists_and_tuples_are_collected() -> None:
    def generator_app(environ: dict[str, Any], start_response: Any) -> Iterator[bytes]:
        start_response("200 OK", [])
        yield b"a"

    def list_app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        start_response("200 OK", [])
        return [b"a", b"b"]

    pending = call_app(generator_app, {})
    assert isinstance(pending, PendingAnswer) and pending.started == [] and list(pending.result) == [b"a"]
    assert call_app(list_app, {}) == ("200 OK", [], [b"a", b"b"])


def test_the_file_wrapper_reads_blocks_and_closes_the_file() -> None:
    handle = io.BytesIO(b"x" * 10)
    wrapper = FileWrapper(handle, 4)
    assert list(wrapper) == [b"xxxx", b"xxxx", b"xx"]
    wrapper.close()
    assert handle.closed


@pytest.mark.parametrize(("method", "version", "status", "headers", "framing", "tail"), [
    (b"GET", "1.1", "200 OK", [("Content-Length", "5")], LENGTH, "Content-Length: 5\r\n"),
    (b"GET", "1.1", "200 OK", [("Transfer-Encoding", "gzip")], CHUNKED, "Transfer-Encoding: chunked\r\n"),
    (b"GET", "1.0", "200 OK", [], UNTIL_CLOSE, "200 OK\r\n"),
    (b"HEAD", "1.1", "200 OK", [("Content-Length", "5")], NO_BODY, "Content-Length: 5\r\n"),
    (b"HEAD", "1.1", "200 OK", [], NO_BODY, "200 OK\r\n"),
    (b"GET", "1.1", "204 No Content", [("Content-Length", "5")], NO_BODY, "204 No Content\r\n"),
    (b"GET", "1.1", "304 Not Modified", [], NO_BODY, "304 Not Modified\r\n"),
])
def test_a_streamed_answer_is_framed_by_its_length_chunks_or_the_connection(
        method: bytes, version: str, status: str, headers: list[tuple[str, str]], framing: str, tail: str) -> None:
    head, found, length, close = stream_head(_request(method, version), status, headers)
    assert found == framing and head.endswith(tail.encode())
    assert head.count(b"Content-Length") + head.count(b"Transfer-Encoding") <= 1
    assert close == (framing == UNTIL_CLOSE)
    assert length == (5 if ("Content-Length", "5") in headers else None)


@pytest.mark.parametrize("headers", [[("Content-Length", "five")], [("X-Bad", "a\r\nb")], [("X Bad", "b")]])
def test_a_streamed_answer_head_is_checked_as_a_whole_one(headers: list[tuple[str, str]]) -> None:
    with pytest.raises(ValueError):
        stream_head(_request(), "200 OK", headers)


def test_an_application_asking_to_close_after_a_streamed_answer_closes() -> None:
    head, _, _, close = stream_head(_request(), "200 OK", [("Connection", "close")])
    assert close and b"Connection" not in head  # the front adds it


def _body(*chunks: bytes, end: bool = True) -> tuple[BodyStream, list[BodyStream]]:
    rooms: list[BodyStream] = []
    stream = BodyStream(rooms.append, wait_limit=60)
    for chunk in chunks:
        stream.feed(chunk)
    if end:
        stream.finish()
    return stream, rooms


def test_a_streamed_body_reads_as_a_file() -> None:
    stream, _ = _body(b"ab", b"cd\nef", b"g\nh")
    assert stream.read(3) == b"abc"
    assert stream.readline() == b"d\n"
    assert stream.readline(2) == b"ef"
    assert list(stream) == [b"g\n", b"h"]
    assert stream.read() == b"" and stream.read(10) == b""


def test_a_read_waits_for_what_it_asks_or_the_end() -> None:
    stream, _ = _body(b"abc", end=False)
    results: list[bytes] = []
    reader = threading.Thread(target=lambda: results.extend([stream.read(5), stream.read(5)]))
    reader.start()
    stream.feed(b"de")
    stream.feed(b"fg")
    stream.finish()
    reader.join(timeout=60)
    assert results == [b"abcde", b"fg"]


def test_a_body_that_will_not_arrive_whole_raises_after_what_did_arrive() -> None:
    stream, _ = _body(b"abc", end=False)
    stream.fail("the client went away")
    assert stream.read(10) == b"abc"
    with pytest.raises(ClientDisconnected, match="the client went away"):
        stream.read(10)
    with pytest.raises(OSError):
        stream.readline()


def test_a_full_body_buffer_asks_for_more_once_half_of_it_was_read() -> None:
    stream, rooms = _body(end=False)
    half = STREAM_BUFFER // 2
    assert not stream.feed(b"x" * half)
    assert stream.feed(b"x" * half)  # full: the loop stops reading
    assert len(stream.read(half - 1)) == half - 1 and rooms == []
    assert stream.read(1) == b"x" and rooms == [stream]
    assert not stream.feed(b"y")


class _Sink:
    """The event loop's side of a streamed answer, recording what it is given and taking each chunk at once."""

    def __init__(self) -> None:
        self.sent: list[bytes] = []
        self.ended = False
        self.aborted = False
        self.whole: list[Any] = []

    def stream_out(self, outlet: Outlet, request: Request, head: bytes | None, data: bytes, close: bool,
                   last: bool) -> None:
        self.sent.append((head + b"\r\n" if head is not None else b"") + data)
        self.ended = last
        outlet.accepted()

    def stream_abort(self, outlet: Outlet) -> None:
        self.aborted = True

    def whole_answer(self, request: Request, answer: Any) -> None:
        self.whole.append(answer)


class _Immediate:
    def call_soon_threadsafe(self, callback: Any, *args: Any) -> None:
        callback(*args)


def _streamed(chunks: list[bytes], headers: list[tuple[str, str]], method: bytes = b"GET") -> tuple[_Sink, list[str]]:
    events: list[str] = []

    class Body:
        def __iter__(self) -> Iterator[bytes]:
            events.append("iterated")
            return iter(chunks)

        def close(self) -> None:
            events.append("closed")

    def app(environ: dict[str, Any], start_response: Any) -> Body:
        start_response("200 OK", headers)
        return Body()

    sink = _Sink()
    pending = call_app(app, {})
    assert isinstance(pending, PendingAnswer)
    send_answer(_request(method), pending, Outlet(_Immediate(), sink, wait_limit=60))  # type: ignore[arg-type]
    return sink, events


def test_a_streamed_answer_without_a_length_is_sent_chunked() -> None:
    sink, events = _streamed([b"ab", b"", b"cde"], [("X-A", "1")])
    assert b"".join(sink.sent) == (b"HTTP/1.1 200 OK\r\nX-A: 1\r\nTransfer-Encoding: chunked\r\n\r\n"
                                   b"2\r\nab\r\n3\r\ncde\r\n0\r\n\r\n")
    assert sink.ended and not sink.aborted and events == ["iterated", "closed"]


def test_a_streamed_answer_shorter_than_its_length_is_cut_off() -> None:
    sink, events = _streamed([b"ab"], [("Content-Length", "3")])
    assert sink.aborted and not sink.ended and events == ["iterated", "closed"]


@pytest.mark.parametrize("chunks", [[], [b"abcd"]])
def test_a_wrong_length_found_before_anything_was_sent_is_a_500(chunks: list[bytes]) -> None:
    sink, events = _streamed(chunks, [("Content-Length", "3")])
    assert sink.sent == [] and [answer[0] for answer in sink.whole] == ["500 Internal Server Error"]
    assert events == ["iterated", "closed"]


def test_a_streamed_answer_to_head_is_not_iterated() -> None:
    sink, events = _streamed([b"never"], [("Content-Length", "5")], method=b"HEAD")
    assert sink.sent == [b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n"] and sink.ended
    assert events == ["closed"]
