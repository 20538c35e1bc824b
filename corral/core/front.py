"""An event-loop front for gunicorn: no thread waits on a slow client.

gunicorn's threaded worker hands a connection to a thread as soon as it is
accepted (or as soon as its first byte arrives), and that thread then
blocks until the whole request has been read.  A few clients sending a
request a byte at a time, or half a request line and nothing more, hold
every thread and stop the server for everybody.

:class:`BufferingWorker` is a gunicorn worker class that reads requests on
an asyncio event loop (parsed by h11) and buffers each one whole, body
included, before a thread from the pool runs the WSGI application on it.
The answer is written back by the event loop too.  Waiting clients cost a
socket and a few kilobytes, not a thread, and every phase has a deadline:

* the request head (request line and headers) must arrive within
  ``header_timeout`` of the connection opening, or of its first byte on a
  kept-alive connection;
* the body must arrive within ``body_timeout`` of the head;
* a kept-alive connection may stay idle ``keepalive`` seconds;
* the client must take the answer within ``send_timeout``.

A process holds at most ``worker_connections`` connections; beyond that a
new connection is answered ``503`` with ``Retry-After`` and closed.  Bodies
larger than ``max_body_size`` are not read: the application sees the
declared length (and answers 413 in its own error format) and the
connection is closed afterwards.

Everything else (processes, restarts of dead workers, signals, the listening
sockets) is gunicorn's.
"""

from __future__ import annotations

import asyncio
import io
import logging
import os
import sys
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote_to_bytes

import h11
from gunicorn.workers import base

LOG = logging.getLogger(__name__)

# Largest request head (request line plus headers) accepted; larger is 431.
MAX_HEAD_SIZE = 64 * 1024
# How long a refused or timed-out connection is kept to let the client read
# the answer before the socket is closed (closing with unread input would
# reset the connection and could lose the answer).
LINGER = 1.0


@dataclass(frozen=True)
class Limits:
    header_timeout: float = 10.0
    body_timeout: float = 30.0
    keepalive: float = 5.0
    send_timeout: float = 60.0
    max_connections: int = 1000
    max_body_size: int = 114688


def _json(message: str) -> bytes:
    import orjson

    return orjson.dumps({"message": message})


def _canned(status: int, reason: str, message: str, extra: Iterable[tuple[str, str]] = ()) -> bytes:
    """A complete answer that closes the connection, written without h11."""
    body = _json(message)
    lines = [
        f"HTTP/1.1 {status} {reason}",
        "Content-Type: application/json",
        f"Content-Length: {len(body)}",
        "Connection: close",
        *(f"{name}: {value}" for name, value in extra),
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


REFUSED = _canned(
    503, "Service Unavailable", "Too many connections to this server process; try again later.",
    [("Retry-After", "1")],
)


# ------------------------------------------------------------------ WSGI


def build_environ(
    request: h11.Request,
    body: bytes,
    content_length: int | None,
    peer: tuple[str, int],
    local: tuple[str, int],
    url_scheme: str,
    multiprocess: bool,
) -> dict[str, Any]:
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
        "SERVER_PROTOCOL": "HTTP/" + request.http_version.decode("ascii"),
        "SERVER_NAME": str(local[0]),
        "SERVER_PORT": str(local[1]),
        "REMOTE_ADDR": str(peer[0]),
        "REMOTE_PORT": str(peer[1]),
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": url_scheme,
        "wsgi.input": io.BytesIO(body),
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": True,
        "wsgi.multiprocess": multiprocess,
        "wsgi.run_once": False,
    }
    if content_length is not None:
        environ["CONTENT_LENGTH"] = str(content_length)
    for raw_name, raw_value in request.headers:
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


def call_app(app: Callable[..., Iterable[bytes]], environ: dict[str, Any]) -> tuple[str, list[tuple[str, str]], list[bytes]]:
    """Run a WSGI application to completion in the calling thread."""
    started: list[Any] = []
    chunks: list[bytes] = []

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Callable[[bytes], None]:
        if exc_info is not None and started and chunks:
            raise exc_info[1].with_traceback(exc_info[2])
        started[:] = [status, headers]
        return chunks.append

    result = app(environ, start_response)
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


# ------------------------------------------------------------ connections


class _Front:
    """What every connection of one worker process shares."""

    def __init__(self, app: Any, executor: ThreadPoolExecutor, limits: Limits, *,
                 multiprocess: bool, forwarded_allow_ips: list[str], secure_scheme_headers: dict[str, str]) -> None:
        self.app = app
        self.executor = executor
        self.limits = limits
        self.multiprocess = multiprocess
        self.connections: set[_Connection] = set()
        self._trusted_any = "*" in forwarded_allow_ips
        self._trusted = set(forwarded_allow_ips)
        self._secure_headers = {name.lower().encode(): value.encode() for name, value in secure_scheme_headers.items()}

    def url_scheme(self, peer: str, request: h11.Request) -> str:
        if not self._secure_headers or not (self._trusted_any or peer in self._trusted):
            return "http"
        for name, value in request.headers:
            if self._secure_headers.get(name) == value.lower():
                return "https"
        return "http"

    def busy(self) -> int:
        return sum(1 for connection in self.connections if connection.phase in ("body", "app"))


class _Connection(asyncio.Protocol):
    """One client connection: read a request, run it on the pool, answer, repeat."""

    def __init__(self, front: _Front) -> None:
        self.front = front
        self.limits = front.limits
        self.h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD_SIZE)
        self.transport: asyncio.Transport | None = None
        self.peer: tuple[str, int] = ("", 0)
        self.local: tuple[str, int] = ("", 0)
        # head -> body -> app -> (idle -> head ...) | closing
        self.phase = "head"
        self._timer: asyncio.TimerHandle | None = None
        self._request: h11.Request | None = None
        self._body = bytearray()
        self._declared: int | None = None
        self._can_write = asyncio.Event()
        self._can_write.set()
        self._eof = False

    # -- asyncio callbacks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.peer = _address(transport.get_extra_info("peername"))
        self.local = _address(transport.get_extra_info("sockname"))
        self.front.connections.add(self)
        if len(self.front.connections) > self.limits.max_connections:
            LOG.warning("refusing a connection from %s: %d connections open", self.peer[0],
                        len(self.front.connections) - 1)
            self._finish(REFUSED)
            return
        self._arm(self.limits.header_timeout, self._head_timed_out)

    def data_received(self, data: bytes) -> None:
        if self.phase == "closing":
            return  # discarded while the last answer is read
        if self.phase == "idle":
            self.phase = "head"
            self._arm(self.limits.header_timeout, self._head_timed_out)
        self.h11.receive_data(data)
        self._advance()

    def eof_received(self) -> bool:
        self._eof = True
        if self.phase not in ("closing", "app"):
            self.h11.receive_data(b"")
            self._advance()
        return True  # keep our side open to finish an answer in progress

    def connection_lost(self, exc: Exception | None) -> None:
        self.phase = "closing"
        self._cancel_timer()
        self._can_write.set()
        self.front.connections.discard(self)

    def pause_writing(self) -> None:
        self._can_write.clear()

    def resume_writing(self) -> None:
        self._can_write.set()

    # -- reading

    def _advance(self) -> None:
        while self.phase in ("head", "body", "idle"):
            try:
                event = self.h11.next_event()
            except h11.RemoteProtocolError as error:
                self._protocol_error(error)
                return
            if event is h11.NEED_DATA or event is h11.PAUSED:
                return
            if isinstance(event, h11.Request):
                self._start_body(event)
            elif isinstance(event, h11.Data):
                self._body += event.data
                if len(self._body) > self.limits.max_body_size:
                    # More than the limit without a declared length
                    # (chunked): the application refuses it on its size.
                    self._dispatch(self._declared or len(self._body), whole=False)
                    return
            elif isinstance(event, h11.EndOfMessage):
                self._dispatch(len(self._body) if self._has_body() else None, whole=True)
                return
            elif isinstance(event, h11.ConnectionClosed):
                self._close()
                return

    def _start_body(self, request: h11.Request) -> None:
        self._request = request
        self._body = bytearray()
        self._declared = None
        for name, value in request.headers:
            if name == b"content-length":
                self._declared = int(value)
        self.phase = "body"
        self._arm(self.limits.body_timeout, self._body_timed_out)
        if self._declared is not None and self._declared > self.limits.max_body_size:
            # Not read at all: the application answers 413 from the length.
            self._dispatch(self._declared, whole=False)
            return
        if self.h11.they_are_waiting_for_100_continue:
            self._write(self.h11.send(h11.InformationalResponse(status_code=100, headers=[])))

    def _has_body(self) -> bool:
        assert self._request is not None
        return any(name in (b"content-length", b"transfer-encoding") for name, _ in self._request.headers)

    # -- running the application

    def _dispatch(self, content_length: int | None, *, whole: bool) -> None:
        request = self._request
        assert request is not None and self.transport is not None
        self.phase = "app"
        self._cancel_timer()
        self.transport.pause_reading()
        environ = build_environ(
            request,
            bytes(self._body) if whole else b"",
            content_length,
            self.peer,
            self.local,
            self.front.url_scheme(self.peer[0], request),
            self.front.multiprocess,
        )
        self._body = bytearray()
        asyncio.ensure_future(self._serve(request, environ, keep_open=whole))

    async def _serve(self, request: h11.Request, environ: dict[str, Any], *, keep_open: bool) -> None:
        loop = asyncio.get_running_loop()
        try:
            status, headers, chunks = await loop.run_in_executor(
                self.front.executor, call_app, self.front.app, environ
            )
        except Exception:
            LOG.exception("%s %s failed", environ["REQUEST_METHOD"], environ["PATH_INFO"])
            status, headers, chunks = "500 Internal Server Error", [("Content-Type", "application/json")], [
                _json("An unexpected error occurred while processing the request.")
            ]
        if self.phase == "closing" or self.transport is None:
            return
        try:
            self._write(self._render(request, status, headers, chunks, keep_open=keep_open))
        except h11.LocalProtocolError:
            LOG.exception("invalid answer to %s %s", environ["REQUEST_METHOD"], environ["PATH_INFO"])
            self.transport.abort()
            return
        try:
            if not self._can_write.is_set():
                # (only then: a wait_for costs a task and a timer per answer)
                await asyncio.wait_for(self._can_write.wait(), self.limits.send_timeout)
        except asyncio.TimeoutError:
            LOG.info("closing a connection from %s: the answer was not read in time", self.peer[0])
            self.transport.abort()
            return
        self._next_request()

    def _render(self, request: h11.Request, status: str, headers: list[tuple[str, str]],
                chunks: list[bytes], *, keep_open: bool) -> bytes:
        code, _, reason = status.partition(" ")
        out_headers = [(name.encode("latin-1"), value.encode("latin-1")) for name, value in headers]
        if not keep_open:
            out_headers.append((b"connection", b"close"))
        parts = [self.h11.send(h11.Response(status_code=int(code), headers=out_headers, reason=reason.encode("latin-1")))]
        if request.method != b"HEAD" and int(code) not in (204, 304):
            parts.extend(self.h11.send(h11.Data(data=chunk)) for chunk in chunks)
        parts.append(self.h11.send(h11.EndOfMessage()))
        return b"".join(part for part in parts if part)

    def _next_request(self) -> None:
        if self.transport is None or self.phase == "closing":
            return
        if self._eof or self.h11.our_state is not h11.DONE or self.h11.their_state is not h11.DONE:
            # The body was left unread, or the answer said "close".
            self._linger()
            self.transport.resume_reading()
            return
        self.h11.start_next_cycle()
        self._request = None
        buffered, _closed = self.h11.trailing_data
        if buffered:
            # A pipelined request is already here: its head deadline runs.
            self.phase = "head"
            self._arm(self.limits.header_timeout, self._head_timed_out)
        else:
            self.phase = "idle"
            self._arm(self.limits.keepalive, self._close)
        self.transport.resume_reading()
        self._advance()

    # -- errors, deadlines and closing

    def _protocol_error(self, error: h11.RemoteProtocolError) -> None:
        status = error.error_status_hint or 400
        reasons = {400: "Bad Request", 414: "URI Too Long", 431: "Request Header Fields Too Large"}
        self._finish(_canned(status, reasons.get(status, "Bad Request"), f"Malformed request: {error}"))

    def _head_timed_out(self) -> None:
        if self.h11.their_state is h11.IDLE and not self.h11.trailing_data[0]:
            self._close()  # nothing was sent: just an unused connection
            return
        LOG.info("closing a connection from %s: request headers not received in %gs", self.peer[0],
                 self.limits.header_timeout)
        self._finish(_canned(408, "Request Timeout", "The request headers did not arrive in time."))

    def _body_timed_out(self) -> None:
        LOG.info("closing a connection from %s: request body not received in %gs", self.peer[0],
                 self.limits.body_timeout)
        self._finish(_canned(408, "Request Timeout", "The request body did not arrive in time."))

    def _finish(self, answer: bytes) -> None:
        """Write a last answer and close soon."""
        assert self.transport is not None
        self.transport.write(answer)
        self._linger()

    def _linger(self) -> None:
        """Stop answering, discard what comes in, close after :data:`LINGER`."""
        assert self.transport is not None
        self.phase = "closing"
        if self.transport.can_write_eof() and not self.transport.is_closing():
            self.transport.write_eof()
        self._arm(LINGER, self._close)

    def _write(self, data: bytes) -> None:
        if data and self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)

    def _close(self) -> None:
        self.phase = "closing"
        self._cancel_timer()
        if self.transport is not None:
            self.transport.close()

    def _arm(self, delay: float, callback: Callable[[], None]) -> None:
        self._cancel_timer()
        self._timer = asyncio.get_running_loop().call_later(delay, callback)

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


def _address(value: Any) -> tuple[str, int]:
    if isinstance(value, tuple) and len(value) >= 2:
        return str(value[0]), int(value[1])
    return (str(value or ""), 0)


# ------------------------------------------------------------------ worker


class BufferingWorker(base.Worker):
    """A gunicorn worker serving a WSGI application behind an asyncio front.

    ``threads`` sets the application's thread pool.  Run by gunicorn itself
    (``gunicorn -k corral.core.front.BufferingWorker``), ``worker_connections``
    is the connection cap and ``keepalive`` the idle timeout, as for
    gunicorn's own workers, and the other limits are :class:`Limits`'
    defaults; :func:`worker_class` makes a subclass with given limits.
    """

    # Set by worker_class(); None takes gunicorn's settings where it has them.
    limits: Limits | None = None

    def run(self) -> None:
        limits = self.limits or Limits(
            keepalive=float(self.cfg.keepalive), max_connections=self.cfg.worker_connections
        )
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        executor = ThreadPoolExecutor(max_workers=self.cfg.threads, thread_name_prefix="wsgi")
        try:
            loop.run_until_complete(self._serve(limits, executor))
        finally:
            executor.shutdown(wait=False)
            loop.close()

    async def _serve(self, limits: Limits, executor: ThreadPoolExecutor) -> None:
        loop = asyncio.get_running_loop()
        front = _Front(
            self.wsgi, executor, limits,
            multiprocess=self.cfg.workers > 1,
            forwarded_allow_ips=_as_list(self.cfg.forwarded_allow_ips),
            secure_scheme_headers=dict(self.cfg.secure_scheme_headers or {}),
        )
        servers = []
        for listener in self.sockets:
            sock = getattr(listener, "sock", listener)
            servers.append(await loop.create_server(lambda: _Connection(front), sock=sock,
                                                    backlog=self.cfg.backlog))
        while self.alive and self.ppid == os.getppid():
            self.notify()
            await asyncio.sleep(0.5)
        for server in servers:
            server.close()
        deadline = time.monotonic() + self.cfg.graceful_timeout
        while front.busy() and time.monotonic() < deadline:
            self.notify()
            await asyncio.sleep(0.1)
        for connection in list(front.connections):
            connection._close()
        await asyncio.sleep(0)


def _as_list(value: Any) -> list[str]:
    if isinstance(value, str):
        return [item.strip() for item in value.split(",") if item.strip()]
    return [str(item) for item in value or ()]


def worker_class(limits: Limits) -> type[BufferingWorker]:
    """A :class:`BufferingWorker` subclass with these limits."""
    return type("BufferingWorker", (BufferingWorker,), {"limits": limits, "__module__": __name__})

