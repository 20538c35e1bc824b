"""Calls to this process's own APIs, without a trip through its own HTTP server.

In the all-in-one server, Compute calls Placement and the Image service,
and Bare Metal calls the Image service, on the same server they run in.
Over the network each such call takes a second server thread while the
first waits for it: with as many concurrent requests as threads, every
thread waits on a call that no thread is left to answer.  The process's
composite application is registered here when it is built
(:func:`register`), and a client whose endpoint is this process's own
mounts :class:`LocalAdapter` on its requests session: the call runs the
same WSGI application (authentication, policy, error bodies, access log),
in the calling thread.  Answers stream when the caller asks
(``stream=True``), so image data is never held whole.
"""

from __future__ import annotations

import io
import sys
import threading
import urllib.parse
import weakref
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import requests
from requests.adapters import BaseAdapter
from requests.structures import CaseInsensitiveDict
from urllib3 import HTTPResponse

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]

# id(configuration) -> (a weak reference to it, its application); a
# configuration object is not hashable, and its entry must not outlive it.
_APPS: dict[int, tuple[weakref.ref[Any], WsgiApp]] = {}
_LOCK = threading.Lock()


def register(conf: Any, app: WsgiApp) -> None:
    """``app`` answers this process's own API calls for configuration ``conf``."""
    key = id(conf)
    with _LOCK:
        _APPS[key] = (weakref.ref(conf, lambda _ref: _forget(key)), app)


def _forget(key: int) -> None:
    with _LOCK:
        _APPS.pop(key, None)


def app_for(conf: Any) -> WsgiApp | None:
    with _LOCK:
        entry = _APPS.get(id(conf))
    if entry is None or entry[0]() is not conf:
        return None
    return entry[1]


class _Body(io.RawIOBase):
    """The WSGI answer's chunks as a readable stream (closing it closes the answer)."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self._chunks = chunks
        self._iterator: Iterator[bytes] = iter(chunks)
        self._pending = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._pending:
            try:
                self._pending = next(self._iterator)
            except StopIteration:
                return 0
        size = min(len(buffer), len(self._pending))
        buffer[:size] = self._pending[:size]
        self._pending = self._pending[size:]
        return size

    def close(self) -> None:
        if not self.closed:
            close = getattr(self._chunks, "close", None)
            if close is not None:
                close()
        super().close()


class LocalAdapter(BaseAdapter):
    """A requests adapter that answers from a WSGI application in the calling thread."""

    def __init__(self, app: WsgiApp) -> None:
        super().__init__()
        self._app = app

    def send(self, request: requests.PreparedRequest, stream: bool = False, **kwargs: Any) -> requests.Response:
        environ = _environ(request)
        started: list[Any] = []

        def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Callable[..., None]:
            started[:] = [status, headers]
            return lambda data: None

        chunks = self._app(environ, start_response)
        body = _Body(chunks)
        if not stream:
            data = body.read()
            body.close()
            body = _Body([data])
        status, headers = started
        response = requests.Response()
        response.status_code = int(status[:3])
        response.reason = status[4:]
        response.headers = CaseInsensitiveDict(headers)
        response.raw = HTTPResponse(body=io.BufferedReader(body), headers=headers, status=response.status_code,
                                    preload_content=False, decode_content=False)
        response.url = request.url or ""
        response.request = request
        response.connection = self  # type: ignore[attr-defined]
        response.encoding = requests.utils.get_encoding_from_headers(response.headers)
        return response

    def close(self) -> None:
        pass


def _environ(request: requests.PreparedRequest) -> dict[str, Any]:
    url = urllib.parse.urlsplit(request.url or "")
    body = request.body or b""
    if isinstance(body, str):
        body = body.encode()
    elif not isinstance(body, bytes):
        body = b"".join(part if isinstance(part, bytes) else part.encode() for part in body)
    environ: dict[str, Any] = {
        "REQUEST_METHOD": request.method or "GET",
        "SCRIPT_NAME": "",
        "PATH_INFO": urllib.parse.unquote(url.path) or "/",
        "QUERY_STRING": url.query,
        "SERVER_NAME": url.hostname or "127.0.0.1",
        "SERVER_PORT": str(url.port or 80),
        "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": "local",
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": url.scheme or "http",
        "wsgi.input": io.BytesIO(body),
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": True,
        "wsgi.multiprocess": False,
        "wsgi.run_once": False,
        "CONTENT_LENGTH": str(len(body)),
    }
    for name, value in request.headers.items():
        key = name.upper().replace("-", "_")
        if key == "CONTENT_TYPE":
            environ["CONTENT_TYPE"] = value
        elif key != "CONTENT_LENGTH":
            environ[f"HTTP_{key}"] = value
    return environ
