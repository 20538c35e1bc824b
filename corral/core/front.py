"""An event-loop front for gunicorn: no thread waits on a slow client.

gunicorn's threaded worker hands a connection to a thread as soon as it is
accepted (or as soon as its first byte arrives), and that thread then
blocks until the whole request has been read.  A few clients sending a
request a byte at a time, or half a request line and nothing more, hold
every thread and stop the server for everybody.

:class:`BufferingWorker` is a gunicorn worker class that reads requests on
an asyncio event loop (parsed by httptools, the C parser of Node.js) and
buffers each one whole, body included, before a thread from the pool runs
the WSGI application on it.  The answer is written back by the event loop
too.  Waiting clients cost a socket and a few kilobytes, not a thread, and
every phase has a deadline:

* the request head (request line and headers) must arrive within
  ``header_timeout`` of the connection opening, or of its first byte on a
  kept-alive connection;
* the body must arrive within ``body_timeout`` of the head;
* a kept-alive connection may stay idle ``keepalive`` seconds;
* the client must take the answer within ``send_timeout``.

Deadlines are checked a few times a second by one sweep over the
connections, not by a timer per connection and phase: a request then costs
no timer at all.  A process holds at most ``worker_connections``
connections; beyond that a new connection is answered ``503`` with
``Retry-After`` and closed.  Bodies larger than ``max_body_size`` are not
read: the application sees the declared length (and answers 413 in its own
error format) and the connection is closed afterwards.

Image data is too large to hold, so two things stream instead
(:mod:`corral.core.front_stream`): the bodies of the requests the
application declares (its ``streams_body(method, path)``; the application
runs as soon as the head has arrived and reads the body as it arrives; the
client must send each mebibyte within ``body_timeout``), and answers given
as an iterable other than a list or tuple (written as the application
yields them, each chunk taken within ``send_timeout``).  Such requests run
on a pool of their own, at most ``max_streamed`` at once per process; one
more is answered 503 with ``Retry-After``.  Lists and tuples are written in
one piece, as before.

Everything else (processes, restarts of dead workers, signals, the listening
sockets) is gunicorn's.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import httptools
from gunicorn.workers import base

from corral.core import metrics
from corral.core.front_http import (
    REFUSED,
    Answer,
    PendingAnswer,
    Request,
    build_environ,
    call_app,
    canned,
    failed_answer,
    render,
)
from corral.core.front_stream import BodyStream, Outlet, StreamingConnection

LOG = logging.getLogger(__name__)

# Largest request head (request line plus headers) accepted; larger is 431.
MAX_HEAD_SIZE = 64 * 1024
# How long a refused or timed-out connection is kept to let the client read
# the answer before the socket is closed (closing with unread input would
# reset the connection and could lose the answer).
LINGER = 1.0
TOO_LARGE = "Request head too large"
# Bytes taken from the socket at a time.
RECEIVE_BUFFER = 16 * 1024


@dataclass(frozen=True)
class Limits:
    header_timeout: float = 10.0
    body_timeout: float = 30.0
    keepalive: float = 75.0
    send_timeout: float = 60.0
    max_connections: int = 1000
    max_body_size: int = 114688
    # Requests whose body or answer streams, at once per process.
    max_streamed: int = 16

    @property
    def sweep_interval(self) -> float:
        """How often deadlines are checked: a small fraction of the shortest."""
        return max(0.05, min(0.5, self.header_timeout, self.body_timeout, self.keepalive, self.send_timeout) / 4)


class _Front:
    """What every connection of one worker process shares."""

    def __init__(self, app: Any, executor: ThreadPoolExecutor, limits: Limits, *,
                 multiprocess: bool, forwarded_allow_ips: list[str], secure_scheme_headers: dict[str, str],
                 stream_executor: ThreadPoolExecutor | None = None) -> None:
        self.app = app
        self.executor = executor
        self.limits = limits
        # Streamed requests run on a pool of their own, so that slow uploads
        # and downloads never take the threads ordinary requests need.
        self.stream_executor = stream_executor or executor
        self.streams_body = getattr(app, "streams_body", None)
        self._stream_slots = threading.BoundedSemaphore(limits.max_streamed)
        self.multiprocess = multiprocess
        self.connections: set[_Connection] = set()
        self._trusted_any = "*" in forwarded_allow_ips
        self._trusted = set(forwarded_allow_ips)
        self._secure_headers = {name.lower().encode(): value.encode() for name, value in secure_scheme_headers.items()}

    def url_scheme(self, peer: str, headers: list[tuple[bytes, bytes]]) -> str:
        if not self._secure_headers or not (self._trusted_any or peer in self._trusted):
            return "http"
        for name, value in headers:
            if self._secure_headers.get(name) == value.lower():
                return "https"
        return "http"

    def take_stream(self) -> bool:
        """A place for one more streamed request (any thread), or False when all are taken."""
        if self._stream_slots.acquire(blocking=False):
            metrics.HTTP_STREAMED_IN_FLIGHT.inc()
            return True
        metrics.HTTP_STREAMED_REFUSED.inc()
        return False

    def release_stream(self) -> None:
        metrics.HTTP_STREAMED_IN_FLIGHT.dec()
        self._stream_slots.release()

    def busy(self) -> int:
        return sum(1 for connection in self.connections if connection.phase in ("body", "app"))

    def sweep(self) -> None:
        """Act on every deadline that has passed."""
        now = time.monotonic()
        for connection in [c for c in self.connections if c.deadline <= now]:
            connection.expired()


class _TooLarge(Exception):
    """The request head grew past :data:`MAX_HEAD_SIZE`."""


class _Connection(StreamingConnection, asyncio.BufferedProtocol):
    """One client connection: read requests, run each on the pool, answer, repeat.

    httptools calls the ``on_*`` methods while it parses; complete requests
    wait in ``_ready`` while an earlier one is answered.  Input is received
    into one buffer per connection (asyncio would otherwise allocate 256 KiB
    for every read).
    """

    def __init__(self, front: _Front, loop: asyncio.AbstractEventLoop) -> None:
        self.front = front
        self.limits = front.limits
        self.loop = loop
        self.parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None
        self.peer: tuple[str, int] = ("", 0)
        self.local: tuple[str, int] = ("", 0)
        # head -> body -> app -> (idle -> head ...) | closing
        self.phase = "head"
        # When the current phase runs out (time.monotonic()), and what then.
        self.deadline = float("inf")
        self._on_deadline = self._close
        self._request: Request | None = None  # being read
        self._head_parsed = 0  # bytes of the head the parser has handed over
        self._head_raw = 0  # bytes received since the head began (a bound)
        self._began_now = False
        self._ready: list[Request] = []  # read whole, waiting for their turn
        self._broken: str | None = None  # why the input cannot be parsed further
        self._no_more = False  # no request is taken after those already read
        self._sending = False  # the socket's buffer is full
        self._draining = False  # an answer waits for the socket's buffer to drain
        self._close_after = False  # the answer being sent is the last
        self._eof = False
        self._paused = False
        self._streaming: BodyStream | None = None  # a streamed body still arriving
        self._outlet: Outlet | None = None  # a streamed answer waiting for the socket to drain
        self._buffer = bytearray(RECEIVE_BUFFER)
        self._view = memoryview(self._buffer)

    # -- asyncio callbacks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.peer = _address(transport.get_extra_info("peername"))
        self.local = _address(transport.get_extra_info("sockname"))
        self.front.connections.add(self)
        if len(self.front.connections) > self.limits.max_connections:
            metrics.HTTP_CONNECTIONS_REFUSED.inc()
            LOG.warning("refusing a connection from %s: %d connections open", self.peer[0],
                        len(self.front.connections) - 1)
            self._finish(REFUSED)
            return
        self._expect(self.limits.header_timeout, self._head_timed_out)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._view

    def buffer_updated(self, nbytes: int) -> None:
        self.data_received(self._view[:nbytes])

    def data_received(self, data: bytes | memoryview) -> None:
        if self.phase == "app" and not self._paused and self._streaming is None:
            # More input while a request is answered (pipelining): taken,
            # but no more until the answer is out.  Reading is not paused
            # for every request: that costs two system calls each.  (A
            # streamed body goes on arriving while its request runs.)
            assert self.transport is not None
            self.transport.pause_reading()
            self._paused = True
        if self.phase == "closing" or self._broken is not None or self._no_more:
            return  # discarded while the last answer is read
        if self.phase == "idle":
            self.phase = "head"
            self._expect(self.limits.header_timeout, self._head_timed_out)
        self._began_now = False
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            # Nothing here switches protocols: the request is answered as
            # an ordinary one and the connection closed afterwards.
            self._no_more = True
        except httptools.HttpParserCallbackError as error:
            self._broken = TOO_LARGE if isinstance(error.__context__, _TooLarge) else f"Malformed request: {error}"
        except httptools.HttpParserError as error:
            self._broken = f"Malformed request: {error}"
        if self._broken is not None and self._streaming is not None:
            self._streaming.fail(self._broken)
            self._streaming = None
        if self._request is not None and self._request.method is None:
            # The parser keeps a header it has not finished in a buffer of
            # its own: count what arrives, so that buffer cannot grow
            # without bound.  (A head begun in this chunk has at most this
            # chunk's size so far.)
            self._head_raw = 0 if self._began_now else self._head_raw + len(data)
            if self._head_raw > MAX_HEAD_SIZE and self._broken is None:
                self._broken = TOO_LARGE
        if self.phase != "app":
            self._next()

    def eof_received(self) -> bool:
        self._eof = True
        if self._streaming is not None:
            self._streaming.fail("the client closed the connection before the end of the request body")
            self._streaming = None
        if self.phase in ("head", "body", "idle") and self._broken is None:
            if self._request is None and not self._ready:
                self._close()
                return True
            self._broken = "Malformed request: the connection was closed in the middle of a request"
            self._next()
        return True  # keep our side open to finish an answer in progress

    def connection_lost(self, exc: Exception | None) -> None:
        self.phase = "closing"
        self.deadline = float("inf")
        self.front.connections.discard(self)
        # Threads waiting on this connection stop waiting.
        if self._streaming is not None:
            self._streaming.fail("the connection was closed before the end of the request body")
            self._streaming = None
        if self._outlet is not None:
            self._outlet.lost()
            self._outlet = None

    def pause_writing(self) -> None:
        self._sending = True

    def resume_writing(self) -> None:
        self._sending = False
        if self._outlet is not None:
            # The streamed answer's thread may send its next chunk.
            self.deadline = float("inf")
            self._outlet.accepted()
            self._outlet = None
        if self._draining:
            self._draining = False
            self._next_request()

    # -- parser callbacks (httptools)

    def on_message_begin(self) -> None:
        self._request = Request()
        self._head_parsed = 0
        self._began_now = True

    def on_url(self, url: bytes) -> None:
        request = self._request
        assert request is not None
        request.target += url
        self._grow_head(len(url))

    def on_header(self, name: bytes, value: bytes) -> None:
        request = self._request
        assert request is not None
        request.raw_headers.append((name.lower(), value))
        self._grow_head(len(name) + len(value) + 4)

    def on_headers_complete(self) -> None:
        request = self._request
        assert request is not None
        parser = self.parser
        request.head_done(parser.get_method(), parser.get_http_version(), parser.should_keep_alive())
        if request.has_body and self.front.streams_body is not None and self._streams(request):
            self._begin_stream(request)
            return
        if not self._ready and self.phase != "app":
            self.phase = "body"
            self._expect(self.limits.body_timeout, self._body_timed_out)
        if request.declared is not None and request.declared > self.limits.max_body_size:
            # Not read at all: the application answers 413 from the length.
            self._complete(request, whole=False)
            return
        if request.expects_continue and not self._ready and self.phase != "app":
            self._write(b"HTTP/1.1 100 Continue\r\n\r\n")
            request.expects_continue = False

    def on_body(self, body: bytes) -> None:
        request = self._request
        if request is None or request.skipped:
            return
        if request.stream is not None:
            self._feed(request.stream, body)
            return
        request.body += body
        if len(request.body) > self.limits.max_body_size:
            # More than the limit without a declared length (chunked): the
            # application refuses it on its size.
            request.declared = request.declared or len(request.body)
            self._complete(request, whole=False)

    def on_message_complete(self) -> None:
        request = self._request
        if request is None or request.skipped:
            return
        if request.stream is not None:
            self._end_stream(request)
            return
        self._complete(request, whole=True)

    def _grow_head(self, size: int) -> None:
        self._head_parsed += size
        if self._head_parsed > MAX_HEAD_SIZE:
            raise _TooLarge()

    def _complete(self, request: Request, *, whole: bool) -> None:
        request.skipped = True  # anything more of it is not kept
        self._request = None
        if self._no_more:
            return
        request.whole = whole
        self._ready.append(request)
        if not whole:
            self._no_more = True

    # -- running the application

    def _next(self) -> None:
        """Start the next ready request, or wait for more input (not while answering)."""
        if self._ready:
            self._dispatch(self._ready.pop(0))
        elif self._broken is not None:
            self._finish(canned(431 if self._broken is TOO_LARGE else 400, self._broken))
        elif self._no_more or self._eof:
            self._linger()
        elif self._request is None:
            if self.phase != "idle":
                self.phase = "idle"
                self._expect(self.limits.keepalive, self._close)
        elif self._request.method is None:
            # (a deadline is set when its phase begins, not pushed back by
            # every byte that arrives)
            if self.phase != "head":
                self.phase = "head"
                self._expect(self.limits.header_timeout, self._head_timed_out)
        elif self.phase != "body":
            self.phase = "body"
            self._expect(self.limits.body_timeout, self._body_timed_out)
            if self._request.expects_continue:
                self._write(b"HTTP/1.1 100 Continue\r\n\r\n")
                self._request.expects_continue = False

    def _dispatch(self, request: Request) -> None:
        assert self.transport is not None
        if request.stream is not None:
            self._dispatch_streamed(request)
            return
        self.phase = "app"
        self.deadline = float("inf")
        environ = build_environ(
            request, self.peer, self.local, self.front.url_scheme(self.peer[0], request.raw_headers),
            self.front.multiprocess,
        )
        try:
            self.front.executor.submit(self._run, request, environ)
        except RuntimeError:  # the pool is shutting down
            self._close()

    def _run(self, request: Request, environ: dict[str, Any]) -> None:
        """In a pool thread: run the application, hand the answer to the event loop."""
        try:
            answer = call_app(self.front.app, environ)
        except Exception:
            LOG.exception("%s %s failed", environ["REQUEST_METHOD"], environ["PATH_INFO"])
            answer = failed_answer()
        if isinstance(answer, PendingAnswer):
            self._hand_off(request, answer)
            return
        try:
            self.loop.call_soon_threadsafe(self._answer, request, answer)
        except RuntimeError:  # the loop has closed: the worker is exiting
            pass

    def _answer(self, request: Request, answer: Answer) -> None:
        if self.phase == "closing" or self.transport is None:
            return
        more = bool(self._ready) or not (self._no_more or self._eof or self._broken)
        try:
            data, keep_open = render(request, answer, keep_open=request.whole and request.keep_alive and more)
        except ValueError as problem:
            LOG.error("invalid answer to %s %s: %s", request.method, request.path_for_log(), problem)
            self.transport.abort()
            return
        self._close_after = not keep_open
        self._write(data)
        if self._sending:
            self._draining = True
            self._expect(self.limits.send_timeout, self._send_timed_out)
            return
        self._next_request()

    def _next_request(self) -> None:
        if self.transport is None or self.phase == "closing":
            return
        if self._close_after:
            self._linger()
            return
        if self._paused:
            self._paused = False
            self.transport.resume_reading()
        self._next()

    # -- errors, deadlines and closing

    def expired(self) -> None:
        self.deadline = float("inf")
        self._on_deadline()

    def _expect(self, seconds: float, then: Any) -> None:
        self.deadline = time.monotonic() + seconds
        self._on_deadline = then

    def _head_timed_out(self) -> None:
        if self._request is None:
            self._close()  # nothing was sent: just an unused connection
            return
        LOG.info("closing a connection from %s: request headers not received in %gs", self.peer[0],
                 self.limits.header_timeout)
        metrics.HTTP_CLIENT_TIMEOUTS.labels("head").inc()
        self._finish(canned(408, "The request headers did not arrive in time."))

    def _body_timed_out(self) -> None:
        LOG.info("closing a connection from %s: request body not received in %gs", self.peer[0],
                 self.limits.body_timeout)
        metrics.HTTP_CLIENT_TIMEOUTS.labels("body").inc()
        self._finish(canned(408, "The request body did not arrive in time."))

    def _send_timed_out(self) -> None:
        LOG.info("closing a connection from %s: the answer was not read in time", self.peer[0])
        metrics.HTTP_CLIENT_TIMEOUTS.labels("send").inc()
        if self.transport is not None:
            self.transport.abort()

    def _finish(self, answer: bytes) -> None:
        """Write a last answer and close soon."""
        self._write(answer)
        self._linger()

    def _linger(self) -> None:
        """Stop answering, discard what comes in, close after :data:`LINGER`."""
        assert self.transport is not None
        self.phase = "closing"
        if self.transport.can_write_eof() and not self.transport.is_closing():
            try:
                self.transport.write_eof()
            except OSError:
                # The client reset the connection after it read the answer
                # (load balancers' health checks do): nothing more to send.
                self.transport.abort()
                return
        if self._paused:
            self._paused = False
            self.transport.resume_reading()  # read and drop, so the answer is not lost to a reset
        self._expect(LINGER, self._close)

    def _write(self, data: bytes) -> None:
        if data and self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)

    def _close(self) -> None:
        self.phase = "closing"
        self.deadline = float("inf")
        if self.transport is not None:
            self.transport.close()


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
    defaults; :func:`worker_class` makes a subclass with given limits.  The
    application's ``streams_body(method, path)``, when it has one (as the
    applications of :mod:`corral.core.wsgi` do), names the requests whose
    body streams.
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
        streams = ThreadPoolExecutor(max_workers=limits.max_streamed, thread_name_prefix="wsgi-stream")
        try:
            loop.run_until_complete(self._serve(limits, executor, streams))
        finally:
            executor.shutdown(wait=False)
            streams.shutdown(wait=False)
            loop.close()

    async def _serve(self, limits: Limits, executor: ThreadPoolExecutor, streams: ThreadPoolExecutor) -> None:
        loop = asyncio.get_running_loop()
        front = _Front(
            self.wsgi, executor, limits,
            multiprocess=self.cfg.workers > 1,
            forwarded_allow_ips=_as_list(self.cfg.forwarded_allow_ips),
            secure_scheme_headers=dict(self.cfg.secure_scheme_headers or {}),
            stream_executor=streams,
        )
        metrics.sample_gauge(metrics.HTTP_CONNECTIONS_OPEN, lambda: len(front.connections))
        servers = []
        for listener in self.sockets:
            sock = getattr(listener, "sock", listener)
            servers.append(await loop.create_server(lambda: _Connection(front, loop), sock=sock,
                                                    backlog=self.cfg.backlog))
        notified = 0.0
        while self.alive and self.ppid == os.getppid():
            if time.monotonic() - notified >= 0.5:
                self.notify()
                notified = time.monotonic()
            front.sweep()
            await asyncio.sleep(limits.sweep_interval)
        for server in servers:
            server.close()
        deadline = time.monotonic() + self.cfg.graceful_timeout
        while front.busy() and time.monotonic() < deadline:
            self.notify()
            front.sweep()
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
