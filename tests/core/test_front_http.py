"""Requests and answers of the event-loop front, without sockets."""

from __future__ import annotations

import pytest

from corral.core.front_http import Request, build_environ, render


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
