"""A service for tests of streamed bodies and answers: it stores nothing, it counts and hashes.

Mounted at ``/stream`` (its ``STREAMED_BODIES`` make uploads stream):

``PUT /upload/<name>``
    Streamed: reads ``wsgi.input`` (``?read=N`` bytes at a time, 1 MiB by
    default; ``?readline=1`` line by line) and answers its size and SHA-256;
    ``?sink=<path>`` also writes what it reads there.
``PUT /whole/<name>``
    The same, on a body the server reads whole first (not streamed).
``GET|HEAD /download/<name>?size=N``
    N bytes of :func:`content` from a generator, with Content-Length unless
    ``length=0``; ``short=1`` or ``fail=1`` end it early or raise half-way.
``GET|HEAD /file?path=<path>``
    The file at ``path`` through ``wsgi.file_wrapper``.
``GET /empty``
    204 from a generator.
``GET /ping``
    An ordinary answer (a list).
``GET /events``
    What happened so far: uploads finished or failed, downloads closed.
"""

from __future__ import annotations

import hashlib
import os
import random
import threading
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import parse_qs

import orjson

from corral.core.front_http import ClientDisconnected

NAME = "streamtest"
PREFIX = "/stream"
STREAMED_BODIES = (("PUT", r"/upload/[^/]+"),)
BLOCK = 1024 * 1024

_EVENTS: list[dict[str, Any]] = []
_LOCK = threading.Lock()


def block(name: str, index: int, size: int = BLOCK) -> bytes:
    """The ``index``-th block of the deterministic content named ``name``."""
    return random.Random(f"{name}:{index}").randbytes(size)


def content(name: str, size: int) -> Iterator[bytes]:
    """``size`` bytes named ``name``, a block at a time (the same in every process)."""
    index = 0
    while size > 0:
        part = block(name, index, min(BLOCK, size))
        yield part
        size -= len(part)
        index += 1


def register_opts(conf: Any) -> None:
    pass


def migration_targets(conf: Any) -> list[Any]:
    return []


def start_background(conf: Any, role: str) -> list[Any]:
    return []


def make_app(conf: Any) -> Callable[..., Any]:
    return app


def _record(event: dict[str, Any]) -> None:
    with _LOCK:
        _EVENTS.append(event)


def _json(start_response: Callable[..., Any], status: str, document: Any) -> list[bytes]:
    body = orjson.dumps(document)
    start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]


def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
    path = environ["PATH_INFO"]
    method = environ["REQUEST_METHOD"]
    query = {key: values[-1] for key, values in parse_qs(environ.get("QUERY_STRING", "")).items()}
    if path == "/ping":
        return _json(start_response, "200 OK", {"pong": True})
    if path == "/events":
        with _LOCK:
            return _json(start_response, "200 OK", list(_EVENTS))
    if path == "/empty":
        return _empty(start_response)
    if path == "/file":
        handle = open(query["path"], "rb")
        size = os.fstat(handle.fileno()).st_size
        start_response("200 OK", [("Content-Type", "application/octet-stream"), ("Content-Length", str(size))])
        return environ["wsgi.file_wrapper"](handle, BLOCK)
    kind, _, name = path.strip("/").partition("/")
    if method == "PUT" and kind in ("upload", "whole"):
        return _upload(environ, start_response, name, query)
    if method in ("GET", "HEAD") and kind == "download":
        return _download(start_response, name, query)
    return _json(start_response, "404 Not Found", {"message": "Not found"})


def _upload(environ: dict[str, Any], start_response: Callable[..., Any], name: str,
            query: dict[str, str]) -> list[bytes]:
    stream = environ["wsgi.input"]
    size_per_read = int(query.get("read", BLOCK))
    digest = hashlib.sha256()
    size = 0
    sink = open(query["sink"], "wb") if "sink" in query else None
    _record({"event": "upload-started", "name": name})
    try:
        while True:
            data = stream.readline() if query.get("readline") else stream.read(size_per_read)
            if not data:
                break
            digest.update(data)
            size += len(data)
            if sink is not None:
                sink.write(data)
    except ClientDisconnected as error:
        _record({"event": "upload-failed", "name": name, "size": size, "error": str(error)})
        return _json(start_response, "400 Bad Request", {"message": str(error)})
    finally:
        if sink is not None:
            sink.close()
    result = {
        "event": "upload", "name": name, "size": size, "sha256": digest.hexdigest(),
        "content_length": environ.get("CONTENT_LENGTH"), "terminated": environ.get("wsgi.input_terminated", False),
        "streamed": type(stream).__name__ == "BodyStream",
    }
    _record(result)
    return _json(start_response, "200 OK", result)


class _Answer:
    """A download's body: a generator's chunks, and a record of its close()."""

    def __init__(self, name: str, chunks: Iterator[bytes]) -> None:
        self.name = name
        self.sent = 0
        self._chunks = chunks

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self._chunks:
            self.sent += len(chunk)
            yield chunk

    def close(self) -> None:
        _record({"event": "download-closed", "name": self.name, "sent": self.sent})


def _download(start_response: Callable[..., Any], name: str, query: dict[str, str]) -> _Answer:
    size = int(query.get("size", BLOCK))
    headers = [("Content-Type", "application/octet-stream")]
    if query.get("length", "1") == "1":
        headers.append(("Content-Length", str(size)))
    start_response("200 OK", headers)
    chunks = content(name, size)
    if query.get("short") == "1":
        chunks = content(name, size // 2)
    elif query.get("fail") == "1":
        chunks = _failing(content(name, size // 2))
    return _Answer(name, chunks)


def _failing(chunks: Iterator[bytes]) -> Iterator[bytes]:
    yield from chunks
    raise RuntimeError("the download broke half-way")


def _empty(start_response: Callable[..., Any]) -> Iterator[bytes]:
    start_response("204 No Content", [])
    yield b""
