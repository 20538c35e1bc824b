"""Streamed request bodies and answers of the event-loop front.

The front (:mod:`corral.core.front`) reads every request whole before a
thread runs the application, and collects every answer whole before it
writes it.  Image data does not fit that: an upload or a download may be
many gigabytes.  Two things stream instead, each holding about a mebibyte
of memory whatever its size:

* a request body that the application declares streamed (a WSGI callable's
  ``streams_body(method, path)``, built by :mod:`corral.core.wsgi` from the
  services' ``STREAMED_BODIES``).  The application runs as soon as the
  request head has arrived and reads ``wsgi.input``, a :class:`BodyStream`
  the event loop fills as the body arrives;
* an answer that is neither a list nor a tuple (a generator, a file,
  ``wsgi.file_wrapper``): :func:`send_answer` hands it to the event loop
  chunk by chunk through an :class:`Outlet`.

Both directions wait for the slower side: the loop stops reading the
socket while a body's buffer is full, and the application's thread waits
while the socket's write buffer is above its high-water mark.  Neither can
wait for ever: a client must send each :data:`PROGRESS_STEP` of a body
within ``body_timeout`` (time the application keeps it waiting does not
count), and take each chunk of an answer within ``send_timeout``;
otherwise the connection is closed and the thread freed.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import deque
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Protocol

from corral.core import metrics
from corral.core.front_http import (
    _LINE_BREAKING,
    _TOKEN,
    STREAMS_REFUSED,
    Answer,
    ClientDisconnected,
    PendingAnswer,
    Request,
    build_environ,
    call_app,
    failed_answer,
    incomplete_body,
    path_info,
    streams_busy,
)

LOG = logging.getLogger("corral.core.front")

# Bytes taken from the socket at a time while a streamed body arrives:
# fewer calls per megabyte than the front's usual 16 KiB.
STREAM_RECEIVE_BUFFER = 256 * 1024
# Most of a streamed body held for the application: beyond this, the socket
# is not read until the application has taken half of it.
STREAM_BUFFER = 1024 * 1024
# A streamed body's client must send this much (or the rest of the body)
# within body_timeout, again and again.
PROGRESS_STEP = 1024 * 1024
# How long a thread waits beyond the loop's own deadlines before deciding
# the loop has forgotten it (it never should).
SPARE_WAIT = 10.0


class BodyStream:
    """``wsgi.input`` of a streamed request body: what has arrived, as the application reads it.

    The event loop :meth:`feed` s it; the application's thread reads it.
    ``read(n)`` blocks until ``n`` bytes or the end of the body have arrived
    and returns ``b""`` at the end; it raises :class:`ClientDisconnected`
    once the body can no longer arrive whole (the bytes that did arrive are
    returned first).
    """

    def __init__(self, room: Callable[[BodyStream], None], wait_limit: float) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._chunks: deque[bytes] = deque()
        self._offset = 0  # into the first chunk: what of it was read already
        self._held = 0
        self._ended = False
        self._error: str | None = None
        self._full = False  # the loop has stopped reading until there is room
        self._room = room
        self._wait_limit = wait_limit
        # Kept by the event loop alone: the application is reading it (its
        # client must keep sending), and bytes since the last deadline.
        self.dispatched = False
        self.progress = 0

    # -- event loop side

    def feed(self, data: bytes) -> bool:
        """Add what arrived; True while the buffer is full (stop reading the socket)."""
        with self._cond:
            if self._ended or self._error is not None:
                return False
            self._chunks.append(data)
            self._held += len(data)
            if self._held >= STREAM_BUFFER:
                self._full = True
            self._cond.notify()
            return self._full

    def finish(self) -> None:
        with self._cond:
            self._ended = True
            self._cond.notify()

    def fail(self, reason: str) -> None:
        """The body will not arrive whole: reads raise once what did arrive is taken."""
        with self._cond:
            if not self._ended and self._error is None:
                self._error = reason
                self._cond.notify()

    # -- application side (WSGI input stream)

    def read(self, size: int | None = -1) -> bytes:
        wanted = float("inf") if size is None or size < 0 else size
        return self._collect(wanted, line=False)

    def readline(self, size: int | None = -1) -> bytes:
        wanted = float("inf") if size is None or size < 0 else size
        return self._collect(wanted, line=True)

    def readlines(self, hint: int = -1) -> list[bytes]:
        lines = []
        total = 0
        while line := self.readline():
            lines.append(line)
            total += len(line)
            if 0 < hint <= total:
                break
        return lines

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.readline, b"")

    def _collect(self, wanted: float, *, line: bool) -> bytes:
        parts: list[bytes] = []
        while wanted > 0:
            try:
                taken, size, done = self._take(wanted, line=line)
            except ClientDisconnected:
                if parts:
                    break  # the next read raises
                raise
            if not taken:
                break
            parts.extend(taken)
            wanted -= size
            if done:
                break
        return b"".join(parts)

    def _take(self, limit: float, *, line: bool) -> tuple[list[bytes], int, bool]:
        """Up to ``limit`` bytes once any are there ([] at the end), their size, and whether a line ended."""
        with self._cond:
            while not self._chunks:
                if self._error is not None:
                    raise ClientDisconnected(self._error)
                if self._ended:
                    return [], 0, False
                if not self._cond.wait(self._wait_limit) and not self._chunks and not self._ended:
                    self._error = self._error or f"no part of the request body arrived in {self._wait_limit:g}s"
            taken: list[bytes] = []
            size = 0
            done = False
            while self._chunks and size < limit and not done:
                chunk, start = self._chunks[0], self._offset
                end = start + int(min(limit - size, len(chunk) - start))
                if line:
                    newline = chunk.find(b"\n", start, end)
                    if newline >= 0:
                        end = newline + 1
                        done = True
                if end == len(chunk):
                    self._chunks.popleft()
                    self._offset = 0
                else:
                    self._offset = end
                taken.append(chunk if start == 0 and end == len(chunk) else chunk[start:end])
                size += end - start
            self._held -= size
            room = self._full and self._held <= STREAM_BUFFER // 2
            if room:
                self._full = False
        if room:
            self._room(self)
        return taken, size, done


class AnswerSink(Protocol):
    """What an :class:`Outlet` calls on the event loop (a connection)."""

    def stream_out(self, outlet: Outlet, request: Request, head: bytes | None, data: bytes, close: bool,
                   last: bool) -> None: ...

    def stream_abort(self, outlet: Outlet) -> None: ...

    def whole_answer(self, request: Request, answer: Any) -> None: ...


class Outlet:
    """A streamed answer's way from the application's thread to the event loop.

    One chunk is in flight at a time: the thread hands a chunk over and
    waits until the loop has written it and the transport's buffer is below
    its high-water mark again (:meth:`accepted`), or the connection is gone
    (:meth:`lost`).
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, sink: AnswerSink, wait_limit: float) -> None:
        self._loop = loop
        self._sink = sink
        self._ready = threading.Event()
        self._wait_limit = wait_limit
        self.gone = False

    # -- application side

    def send(self, request: Request, head: bytes | None, data: bytes, close: bool, *, last: bool) -> bool:
        """Hand ``data`` (after ``head``, when given) to the loop; False once the client is gone."""
        if self.gone:
            return False
        self._ready.clear()
        if not self._call(self._sink.stream_out, self, request, head, data, close, last):
            return False
        if last:
            return True
        if not self._ready.wait(self._wait_limit):
            # The loop aborts a connection whose client stops reading long
            # before this; make sure it is gone.
            self.abort()
        return not self.gone

    def abort(self) -> None:
        self.gone = True
        self._call(self._sink.stream_abort, self)

    def answer(self, request: Request, answer: Any) -> None:
        """A whole answer instead (the application failed before its head was sent)."""
        self._call(self._sink.whole_answer, request, answer)

    def _call(self, callback: Callable[..., None], *args: Any) -> bool:
        try:
            self._loop.call_soon_threadsafe(callback, *args)
        except RuntimeError:  # the loop has closed: the worker is exiting
            self.gone = True
            return False
        return True

    # -- event loop side

    def accepted(self) -> None:
        self._ready.set()

    def lost(self) -> None:
        self.gone = True
        self._ready.set()


def send_answer(request: Request, pending: PendingAnswer, outlet: Outlet) -> None:
    """In a pool thread: send an iterable answer as the application yields it; it is always closed."""
    try:
        _send(request, pending, outlet)
    finally:
        close = getattr(pending.result, "close", None)
        if close is not None:
            try:
                close()
            except Exception:
                LOG.exception("closing the answer to %s %s failed", _method(request), request.path_for_log())


def _send(request: Request, pending: PendingAnswer, outlet: Outlet) -> None:
    iterator: Iterator[bytes] = iter(())
    first: bytes | None = b""
    try:
        if not (request.method == b"HEAD" and pending.started):
            # (a generator may call start_response only when first iterated)
            iterator = iter(pending.result)
            first = _next_chunk(iterator, pending.written)
        if not pending.started:
            raise RuntimeError("the application did not call start_response")
    except Exception:
        LOG.exception("%s %s failed", _method(request), request.path_for_log())
        outlet.answer(request, failed_answer())
        return
    try:
        head, framing, length, close = stream_head(request, pending.started[0], pending.started[1])
    except ValueError as problem:
        LOG.error("invalid answer to %s %s: %s", _method(request), request.path_for_log(), problem)
        outlet.abort()
        return
    pending.started.append(True)  # the head is out: start_response may not change it any more
    if framing == NO_BODY:
        outlet.send(request, head, b"", close, last=True)
        return
    _send_body(request, iterator, pending.written, outlet, head, first, framing, length, close)


def _send_body(request: Request, iterator: Iterator[bytes], written: list[bytes], outlet: Outlet, head: bytes,
               data: bytes | None, framing: str, length: int | None, close: bool) -> None:
    """The body, checked against its Content-Length: a short or long one is not sent as a whole one."""
    prefix: bytes | None = head  # the head goes with the first chunk
    sent = 0
    while data is not None:
        sent += len(data)
        if length is not None and sent > length:
            LOG.error("the answer to %s %s is longer than its Content-Length (%d)", _method(request),
                      request.path_for_log(), length)
            _give_up(request, outlet, prefix)
            return
        if not outlet.send(request, prefix, _framed(data, framing), close, last=False):
            return  # the client went away or stopped reading
        prefix = None
        try:
            data = _next_chunk(iterator, written)
        except Exception:
            LOG.exception("%s %s failed while its answer was sent", _method(request), request.path_for_log())
            outlet.abort()
            return
    if length is not None and sent != length:
        LOG.error("the answer to %s %s ended %d bytes short of its Content-Length", _method(request),
                  request.path_for_log(), length - sent)
        _give_up(request, outlet, prefix)
        return
    outlet.send(request, prefix, b"0\r\n\r\n" if framing == CHUNKED else b"", close, last=True)


def _give_up(request: Request, outlet: Outlet, head: bytes | None) -> None:
    """A 500 if nothing was sent yet; else the connection is aborted, so the client sees a broken answer."""
    if head is not None:
        outlet.answer(request, failed_answer())
    else:
        outlet.abort()


def _next_chunk(iterator: Iterator[bytes], written: list[bytes]) -> bytes | None:
    """The next bytes to send (what the application passed to ``write`` first), None at the end."""
    for chunk in iterator:
        if written:
            chunk = b"".join(written) + chunk
            written.clear()
        if chunk:
            return bytes(chunk)
    if written:
        chunk = b"".join(written)
        written.clear()
        return chunk or None
    return None


NO_BODY, LENGTH, CHUNKED, UNTIL_CLOSE = "none", "length", "chunked", "close"


def stream_head(request: Request, status: str, headers: list[tuple[str, str]]) -> tuple[bytes, str, int | None, bool]:
    """A streamed answer's head (without its final blank line), its framing, length, and whether it closes.

    As :func:`corral.core.front_http.render`, a header that would break the
    message apart raises ValueError; ``Transfer-Encoding`` is the front's.
    """
    code = status[:3]
    if len(status) < 5 or not code.isdigit() or status[3] != " " or _LINE_BREAKING.search(status):
        raise ValueError(f"invalid status line {status!r}")
    lines = ["HTTP/1.1 " + status]
    declared: int | None = None
    close = False
    for name, value in headers:
        if not _TOKEN.fullmatch(name) or _LINE_BREAKING.search(value):
            raise ValueError(f"invalid header {name!r}")
        lower = name.lower()
        if lower == "content-length":
            if not value.strip().isdigit():
                raise ValueError(f"invalid Content-Length {value!r}")
            declared = int(value)
        elif lower == "connection":
            close = close or "close" in value.lower()
        elif lower != "transfer-encoding":
            lines.append(f"{name}: {value}")
    if request.method == b"HEAD":
        framing = NO_BODY
        if declared is not None:
            lines.append(f"Content-Length: {declared}")
    elif code in ("204", "304") or code[0] == "1":
        framing = NO_BODY
    elif declared is not None:
        framing = LENGTH
        lines.append(f"Content-Length: {declared}")
    elif request.version == "1.1":
        framing = CHUNKED
        lines.append("Transfer-Encoding: chunked")
    else:
        # An HTTP/1.0 client knows the end of the body when the connection closes.
        framing = UNTIL_CLOSE
        close = True
    return ("\r\n".join(lines) + "\r\n").encode("latin-1"), framing, declared, close


def _framed(data: bytes, framing: str) -> bytes:
    if framing == CHUNKED:
        return b"%x\r\n" % len(data) + data + b"\r\n"
    return data


def _method(request: Request) -> str:
    return (request.method or b"").decode("latin-1")


class StreamingConnection:
    """The event-loop side of streamed bodies and answers, for :class:`corral.core.front._Connection`.

    Runs on the event loop, except what says it runs in a thread.
    """

    # Kept by the connection (corral.core.front._Connection).
    front: Any
    limits: Any
    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport | None
    peer: tuple[str, int]
    local: tuple[str, int]
    phase: str
    deadline: float
    _ready: list[Request]
    _streaming: BodyStream | None
    _outlet: Outlet | None
    _buffer: bytearray
    _view: memoryview
    _request: Request | None
    _paused: bool
    _no_more: bool
    _eof: bool
    _broken: str | None
    _sending: bool
    _draining: bool
    _close_after: bool

    if TYPE_CHECKING:
        def _expect(self, seconds: float, then: Any) -> None: ...
        def _close(self) -> None: ...
        def _finish(self, answer: bytes) -> None: ...
        def _write(self, data: bytes) -> None: ...
        def _answer(self, request: Request, answer: Answer) -> None: ...
        def _next_request(self) -> None: ...
        def _send_timed_out(self) -> None: ...

    # -- streamed bodies

    def _streams(self, request: Request) -> bool:
        """Whether the application reads this request's body as it arrives (an empty one is read whole)."""
        assert request.method is not None and self.front.streams_body is not None
        if request.declared == 0:
            return False
        return bool(self.front.streams_body(request.method.decode("latin-1"), path_info(request.target)))

    def _begin_stream(self, request: Request) -> None:
        """Queue a request whose application reads the body as it arrives: it runs once its turn comes."""
        if self._no_more:
            request.skipped = True  # (as any request after the last one taken)
            return
        request.stream = BodyStream(self._room_soon, self.limits.body_timeout + SPARE_WAIT)
        request.whole = False  # until the end of the body has arrived
        self._streaming = request.stream
        self._ready.append(request)
        self._view = memoryview(bytearray(STREAM_RECEIVE_BUFFER))

    def _feed(self, stream: BodyStream, data: bytes) -> None:
        full = stream.feed(data)
        if stream.dispatched:
            # Its client must keep sending, unless the application is the
            # one keeping it waiting (the buffer is full).
            stream.progress += len(data)
            if full:
                self.deadline = float("inf")
            elif stream.progress >= PROGRESS_STEP:
                stream.progress = 0
                self._expect(self.limits.body_timeout, self._body_stalled)
        if full and not self._paused:
            assert self.transport is not None
            self.transport.pause_reading()
            self._paused = True

    def _end_stream(self, request: Request) -> None:
        stream = request.stream
        request.skipped = True
        request.whole = True
        self._request = None
        self._streaming = None
        self._view = memoryview(self._buffer)
        stream.finish()
        if stream.dispatched:
            stream.dispatched = False
            self.deadline = float("inf")

    def _room_soon(self, stream: BodyStream) -> None:
        """In the application's thread: the body's buffer has room again."""
        try:
            self.loop.call_soon_threadsafe(self._body_room, stream)
        except RuntimeError:  # the loop has closed: the worker is exiting
            pass

    def _body_room(self, stream: BodyStream) -> None:
        if self._streaming is not stream or self.phase == "closing" or not self._paused:
            return
        assert self.transport is not None
        self._paused = False
        self.transport.resume_reading()
        if stream.dispatched:
            stream.progress = 0
            self._expect(self.limits.body_timeout, self._body_stalled)

    def _body_stalled(self) -> None:
        step = f"{PROGRESS_STEP / 2**20:g} MiB"
        LOG.info("closing a connection from %s: less than %s of the request body arrived in %gs", self.peer[0], step,
                 self.limits.body_timeout)
        metrics.HTTP_CLIENT_TIMEOUTS.labels("body").inc()
        if self._streaming is not None:
            self._streaming.fail(f"the request body stalled (less than {step} in {self.limits.body_timeout:g}s)")
            self._streaming = None
        self._close()

    def _dispatch_streamed(self, request: Request) -> None:
        """Run a streamed-body request now, on the streams' pool, or refuse it (503) when all places are taken."""
        assert request.method is not None and request.stream is not None
        if not self.front.take_stream():
            self._log_refusal(request)
            self._streaming = None
            self._no_more = True
            self._finish(STREAMS_REFUSED)
            return
        self.phase = "app"
        self.deadline = float("inf")
        if request.expects_continue:
            self._write(b"HTTP/1.1 100 Continue\r\n\r\n")
            request.expects_continue = False
        if not request.whole:
            request.stream.dispatched = True
            if not self._paused:  # (else its deadline starts when the application has made room)
                self._expect(self.limits.body_timeout, self._body_stalled)
        environ = build_environ(
            request, self.peer, self.local, self.front.url_scheme(self.peer[0], request.raw_headers),
            self.front.multiprocess,
        )
        environ["wsgi.input"] = request.stream
        environ["wsgi.input_terminated"] = True
        environ.pop("CONTENT_LENGTH", None)
        if request.declared is not None:
            environ["CONTENT_LENGTH"] = str(request.declared)
        try:
            self.front.stream_executor.submit(self._run_streamed, request, environ)
        except RuntimeError:  # the pool is shutting down
            self.front.release_stream()
            self._close()

    def _run_streamed(self, request: Request, environ: dict[str, Any]) -> None:
        """In a streams' pool thread: run the application on a streamed body, and send its answer."""
        try:
            try:
                answer = call_app(self.front.app, environ)
            except ClientDisconnected as error:
                LOG.info("%s %s from %s: %s", environ["REQUEST_METHOD"], environ["PATH_INFO"], self.peer[0], error)
                answer = incomplete_body(str(error))
            except Exception:
                LOG.exception("%s %s failed", environ["REQUEST_METHOD"], environ["PATH_INFO"])
                answer = failed_answer()
            if isinstance(answer, PendingAnswer):
                send_answer(request, answer, Outlet(self.loop, self, self.limits.send_timeout + SPARE_WAIT))
            else:
                self._post_answer(request, answer)
        finally:
            self.front.release_stream()

    # -- streamed answers

    def _hand_off(self, request: Request, pending: PendingAnswer) -> None:
        """In a pool thread: send an iterable answer from the streams' pool, or 503 when all places are taken."""
        if request.method == b"HEAD" or (pending.started and pending.started[0][:3] in ("204", "304")):
            # No body to wait on (middleware built on WebOb answers HEAD
            # with an iterable): sent from here, taking no place.
            self._run_answer(request, pending, counted=False)
            return
        if not self.front.take_stream():
            self._log_refusal(request)
            _close_quietly(pending.result)
            self._post_answer(request, streams_busy())
            return
        try:
            self.front.stream_executor.submit(self._run_answer, request, pending)
        except RuntimeError:  # the pool is shutting down
            self.front.release_stream()
            _close_quietly(pending.result)

    def _run_answer(self, request: Request, pending: PendingAnswer, *, counted: bool = True) -> None:
        try:
            send_answer(request, pending, Outlet(self.loop, self, self.limits.send_timeout + SPARE_WAIT))
        finally:
            if counted:
                self.front.release_stream()

    def _post_answer(self, request: Request, answer: Answer) -> None:
        try:
            self.loop.call_soon_threadsafe(self._answer, request, answer)
        except RuntimeError:  # the loop has closed: the worker is exiting
            pass

    def stream_out(self, outlet: Outlet, request: Request, head: bytes | None, data: bytes, close: bool,
                   last: bool) -> None:
        """Write a streamed answer's head (when given) and next chunk; the thread goes on once the socket drains."""
        if self.phase == "closing" or self.transport is None or self.transport.is_closing():
            outlet.lost()
            return
        if head is not None:
            head += self._head_end(request, close)
            data = head + data if data else head
        self._write(data)
        if not last:
            if self._sending:
                self._outlet = outlet  # resume_writing lets the thread go on
                self._expect(self.limits.send_timeout, self._send_timed_out)
            else:
                outlet.accepted()
            return
        if self._sending:
            self._draining = True
            self._expect(self.limits.send_timeout, self._send_timed_out)
            return
        self._next_request()

    def _head_end(self, request: Request, close: bool) -> bytes:
        """The end of a streamed answer's head, deciding whether the connection stays open after it."""
        if request.stream is not None:
            # The answer is under way: the body's deadlines no longer apply.
            request.stream.dispatched = False
        self.deadline = float("inf")
        more = bool(self._ready) or not (self._no_more or self._eof or self._broken)
        keep_open = request.whole and request.keep_alive and more and not close
        self._close_after = not keep_open
        return b"\r\n" if keep_open else b"Connection: close\r\n\r\n"

    def stream_abort(self, outlet: Outlet) -> None:
        """Cut a streamed answer off: the client must not take a short or long body for a whole one."""
        self._outlet = None
        if self.transport is not None:
            self.transport.abort()

    def whole_answer(self, request: Request, answer: Answer) -> None:
        self._answer(request, answer)

    def _log_refusal(self, request: Request) -> None:
        LOG.warning("refusing %s %s from %s: %d streamed requests are running", _method(request),
                    request.path_for_log(), self.peer[0], self.limits.max_streamed)


def _close_quietly(result: Any) -> None:
    close = getattr(result, "close", None)
    if close is not None:
        try:
            close()
        except Exception:
            LOG.exception("closing an answer that was not sent failed")
