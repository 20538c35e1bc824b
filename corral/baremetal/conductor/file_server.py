"""The conductor's HTTP file server: ``[deploy] http_root``, read-only, for BMCs to fetch boot images.

Only regular files under http_root are served (GET and HEAD, no listing,
no path outside the root); everything else is 404.
"""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Callable, Iterable
from typing import Any

CHUNK = 1024 * 1024


def make_app(root: str) -> Callable[..., Iterable[bytes]]:
    root = os.path.realpath(root)

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        method = environ["REQUEST_METHOD"]
        if method not in ("GET", "HEAD"):
            start_response("405 Method Not Allowed", [("Allow", "GET, HEAD"), ("Content-Length", "0")])
            return [b""]
        relative = urllib.parse.unquote(environ.get("PATH_INFO", "")).lstrip("/")
        path = os.path.realpath(os.path.join(root, relative))
        if not relative or os.path.commonpath([root, path]) != root or not os.path.isfile(path):
            body = b"Not Found\n"
            start_response("404 Not Found", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
            return [body]
        try:
            handle = open(path, "rb")
        except OSError:
            body = b"Not Found\n"
            start_response("404 Not Found", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
            return [body]
        size = os.fstat(handle.fileno()).st_size
        start_response("200 OK", [("Content-Type", "application/octet-stream"), ("Content-Length", str(size))])
        if method == "HEAD":
            handle.close()
            return [b""]
        wrapper = environ.get("wsgi.file_wrapper")
        if wrapper is not None:
            return wrapper(handle, CHUNK)  # type: ignore[no-any-return]
        return _chunks(handle)

    return app


def _chunks(handle: Any) -> Iterable[bytes]:
    with handle:
        yield from iter(lambda: handle.read(CHUNK), b"")
