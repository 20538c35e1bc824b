"""HTTP/1.1 pieces of the event-loop front: requests, WSGI environ, answers.

Nothing here does I/O on a socket: :mod:`corral.core.front` reads the bytes
(parsed by httptools) into a :class:`Request`, a pool thread runs the
application on :func:`build_environ`'s dictionary with :func:`call_app`,
and :func:`render` turns the answer back into bytes.

An application that returns a list or a tuple has its answer collected and
written in one piece.  Any other iterable (a generator, a file,
``wsgi.file_wrapper``) comes back from :func:`call_app` as a
:class:`PendingAnswer`, not iterated yet: :mod:`corral.core.front_stream`
sends it chunk by chunk.  A streamed request body (see
:mod:`corral.core.front_stream`) raises :class:`ClientDisconnected` when the
client goes away or stops sending before its end.
"""

from __future__ import annotations

import io
import re
import sys
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import unquote_to_bytes

import orjson

# (status line, headers, body chunks) as a WSGI application gives them.
Answer = tuple[str, list[tuple[str, str]], list[bytes]]

_REASONS = {
    400: "Bad Request",
    408: "Request Timeout",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    503: "Service Unavailable",
}
# RFC 9110 token characters: what a header name may be made of.
_TOKEN = re.compile(r"[-!#$%&'*+.^_`|~0-9A-Za-z]+")
# What no header value or reason phrase may hold: it would end the line.
_LINE_BREAKING = re.compile(r"[\r\n\0]")
# Bytes a wsgi.file_wrapper reads at a time.
FILE_BLOCK = 1024 * 1024


class ClientDisconnected(OSError):
    """A streamed request body cannot arrive whole: the client went away, stopped sending or broke its framing.

    Raised by ``wsgi.input.read()`` (and ``readline``) so that an application
    can tell an incomplete upload from a complete one.  The connection is
    closed after the application's answer, which the client will most
    likely never read.
    """


class FileWrapper:
    """``wsgi.file_wrapper``: a file's content in blocks, and the file closed with the answer."""

    def __init__(self, filelike: Any, block_size: int = FILE_BLOCK) -> None:
        self.filelike = filelike
        self.block_size = block_size

    def __iter__(self) -> FileWrapper:
        return self

    def __next__(self) -> bytes:
        data = self.filelike.read(self.block_size)
        if not data:
            raise StopIteration
        return bytes(data)

    def close(self) -> None:
        close = getattr(self.filelike, "close", None)
        if close is not None:
            close()


class PendingAnswer:
    """An answer that is neither a list nor a tuple: sent as it is iterated, not collected.

    ``started`` is ``[status, headers]`` once the application has called
    ``start_response`` (a generator may do so only when first iterated);
    ``written`` holds what it passed to the ``write`` callable.
    """

    __slots__ = ("started", "written", "result")

    def __init__(self, started: list[Any], written: list[bytes], result: Iterable[bytes]) -> None:
        self.started = started
        self.written = written
        self.result = result


class Request:
    """One request as read so far; ``method`` is set once its head is complete."""

    __slots__ = ("method", "target", "version", "raw_headers", "keep_alive", "declared", "has_body",
                 "expects_continue", "body", "whole", "skipped", "stream")

    def __init__(self) -> None:
        self.method: bytes | None = None
        self.target = b""
        self.version = "1.1"
        self.raw_headers: list[tuple[bytes, bytes]] = []  # names in lower case
        self.keep_alive = True
        self.declared: int | None = None  # Content-Length, when sent
        self.has_body = False
        self.expects_continue = False
        self.body = bytearray()
        # False when the body was not read (too large): the connection
        # closes after the answer.
        self.whole = True
        # True once the request is complete or given up: later body bytes
        # are not kept.
        self.skipped = False
        # The body as the application reads it, for a body it streams
        # (corral.core.front_stream.BodyStream); None when read whole.
        self.stream: Any = None

    def head_done(self, method: bytes, version: str, keep_alive: bool) -> None:
        self.method = method
        self.version = version
        # Like HTTP/1.0 servers before it, the front closes HTTP/1.0
        # connections after each answer.
        self.keep_alive = keep_alive and version != "1.0"
        for name, value in self.raw_headers:
            if name == b"content-length":
                self.declared = int(value)  # the parser has checked it is a number
                self.has_body = True
            elif name == b"transfer-encoding":
                self.has_body = True
            elif name == b"expect" and value.lower() == b"100-continue" and version == "1.1":
                self.expects_continue = True
        if not self.declared and self.declared is not None:
            self.expects_continue = False  # nothing to wait for

    def path_for_log(self) -> str:
        return self.target.partition(b"?")[0].decode("latin-1")[:200]


def path_info(target: bytes) -> str:
    """The request target's path as ``PATH_INFO`` has it (as :func:`build_environ` finds it)."""
    if not target.startswith(b"/"):
        after_scheme = target.partition(b"://")[2]
        target = b"/" + after_scheme.partition(b"/")[2] if after_scheme else b"/"
    return unquote_to_bytes(target.partition(b"?")[0]).decode("latin-1")


def build_environ(
    request: Request,
    peer: tuple[str, int],
    local: tuple[str, int],
    url_scheme: str,
    multiprocess: bool,
) -> dict[str, Any]:
    assert request.method is not None
    target = request.target
    if not target.startswith(b"/"):
        # absolute-form ("http://host/path?query"): keep the path part.
        after_scheme = target.partition(b"://")[2]
        target = b"/" + after_scheme.partition(b"/")[2] if after_scheme else b"/"
    path, _, query = target.partition(b"?")
    environ: dict[str, Any] = {
        "REQUEST_METHOD": request.method.decode("ascii"),
        "SCRIPT_NAME": "",
        "PATH_INFO": unquote_to_bytes(path).decode("latin-1"),
        "QUERY_STRING": query.decode("latin-1"),
        "RAW_URI": target.decode("latin-1"),
        "SERVER_PROTOCOL": "HTTP/" + request.version,
        "SERVER_NAME": str(local[0]),
        "SERVER_PORT": str(local[1]),
        "REMOTE_ADDR": str(peer[0]),
        "REMOTE_PORT": str(peer[1]),
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": url_scheme,
        "wsgi.input": io.BytesIO(bytes(request.body) if request.whole else b""),
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": True,
        "wsgi.multiprocess": multiprocess,
        "wsgi.run_once": False,
        "wsgi.file_wrapper": FileWrapper,
    }
    if not request.whole:
        environ["CONTENT_LENGTH"] = str(request.declared)
    elif request.has_body:
        environ["CONTENT_LENGTH"] = str(len(request.body))
    for raw_name, raw_value in request.raw_headers:
        if b"_" in raw_name:
            # X-Auth_Token and X-Auth-Token would both become
            # HTTP_X_AUTH_TOKEN: drop the ambiguous spelling.
            continue
        name = raw_name.decode("latin-1").upper().replace("-", "_")
        value = raw_value.decode("latin-1")
        if name == "CONTENT_LENGTH":
            continue  # the buffered body's length is set above
        if name == "CONTENT_TYPE":
            environ["CONTENT_TYPE"] = value
            continue
        key = "HTTP_" + name
        environ[key] = f"{environ[key]},{value}" if key in environ else value
    return environ


def call_app(app: Callable[..., Iterable[bytes]], environ: dict[str, Any]) -> Answer | PendingAnswer:
    """Run a WSGI application to completion in the calling thread; any iterable but a list or tuple is left pending."""
    started: list[Any] = []
    chunks: list[bytes] = []

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Callable[[bytes], None]:
        # (a streamed answer whose head is out has a third item in started)
        if exc_info is not None and started and (chunks or len(started) > 2):
            raise exc_info[1].with_traceback(exc_info[2])
        started[:] = [status, headers]
        return chunks.append

    result = app(environ, start_response)
    if not isinstance(result, (list, tuple)):
        return PendingAnswer(started, chunks, result)
    try:
        for chunk in result:
            if chunk:
                chunks.append(chunk)
    finally:
        close = getattr(result, "close", None)
        if close is not None:
            close()
    if not started:
        raise RuntimeError("the application did not call start_response")
    return started[0], started[1], chunks


def render(request: Request, answer: Answer, *, keep_open: bool) -> tuple[bytes, bool]:
    """The answer as bytes, and whether the connection stays open after it.

    The body's length is always sent (the whole body is at hand); a header
    that would break the message apart raises ValueError.
    """
    status, headers, chunks = answer
    code = status[:3]
    if len(status) < 5 or not code.isdigit() or status[3] != " " or _LINE_BREAKING.search(status):
        raise ValueError(f"invalid status line {status!r}")
    lines = ["HTTP/1.1 " + status]
    declared = None
    for name, value in headers:
        if not _TOKEN.fullmatch(name) or _LINE_BREAKING.search(value):
            raise ValueError(f"invalid header {name!r}")
        lower = name.lower()
        if lower == "content-length":
            declared = value
        elif lower == "connection":
            keep_open = keep_open and "close" not in value.lower()
        elif lower != "transfer-encoding":
            lines.append(f"{name}: {value}")
    body = b"".join(chunks)
    if request.method == b"HEAD":
        body = b""
        if declared is not None:
            lines.append(f"Content-Length: {declared}")
    elif code in ("204", "304") or code[0] == "1":
        body = b""
    else:
        lines.append(f"Content-Length: {len(body)}")
    if not keep_open:
        lines.append("Connection: close")
    lines.append("\r\n")
    return "\r\n".join(lines).encode("latin-1") + body, keep_open


def incomplete_body(reason: str) -> Answer:
    """The answer when a streamed body ended early and the application let the error through."""
    return ("400 Bad Request", [("Content-Type", "application/json")],
            [_json(f"The request body did not arrive whole: {reason}.")])


def failed_answer() -> Answer:
    return ("500 Internal Server Error", [("Content-Type", "application/json")],
            [_json("An unexpected error occurred while processing the request.")])


def _json(message: str) -> bytes:
    return orjson.dumps({"message": message})


def canned(status: int, message: str, extra: Iterable[tuple[str, str]] = ()) -> bytes:
    """A complete answer that closes the connection, for when no application runs."""
    body = _json(message)
    lines = [
        f"HTTP/1.1 {status} {_REASONS[status]}",
        "Content-Type: application/json",
        f"Content-Length: {len(body)}",
        "Connection: close",
        *(f"{name}: {value}" for name, value in extra),
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


REFUSED = canned(503, "Too many connections to this server process; try again later.", [("Retry-After", "1")])
STREAMS_BUSY = "Too many uploads and downloads in progress on this server process; try again later."
STREAMS_REFUSED = canned(503, STREAMS_BUSY, [("Retry-After", "1")])


def streams_busy() -> Answer:
    """The answer to a streamed request beyond ``max_streamed_requests``."""
    return ("503 Service Unavailable", [("Content-Type", "application/json"), ("Retry-After", "1")],
            [_json(STREAMS_BUSY)])
