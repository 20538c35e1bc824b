"""Glance's version negotiation, in front of authentication.

``GET /versions`` answers the version list (200); a path whose first
segment names a known version (``v2``, ``v2.0`` ... ``v2.17``) is served
as ``/v2/...``; any other path answers the version list with 300 Multiple
Choices, without a token, as Glance does.  The list is Glance's for one
store and no image cache, in Glance's own order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any
from wsgiref.util import application_uri

import orjson

# (version, status), in the order Glance lists them.
VERSIONS = (("2.15", "SUPPORTED"), ("2.9", "SUPPORTED"), ("2.17", "CURRENT"), ("2.7", "SUPPORTED"),
            ("2.6", "SUPPORTED"), ("2.5", "SUPPORTED"), ("2.4", "SUPPORTED"), ("2.3", "SUPPORTED"),
            ("2.2", "SUPPORTED"), ("2.1", "SUPPORTED"), ("2.0", "SUPPORTED"))
KNOWN = frozenset({"v2", *(f"v{version}" for version, _ in VERSIONS)})
MEDIA_TYPE = "application/vnd.openstack.images-"


def versions_body(environ: dict[str, Any], public_endpoint: str | None) -> bytes:
    base = (public_endpoint or application_uri(environ)).rstrip("/")
    return orjson.dumps({"versions": [
        {"id": f"v{version}", "status": status, "links": [{"rel": "self", "href": f"{base}/v2/"}]}
        for version, status in VERSIONS]})


class VersionNegotiation:
    def __init__(self, app: Callable[..., Iterable[bytes]], public_endpoint: str | None = None) -> None:
        self._app = app
        self._public_endpoint = public_endpoint

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        first, _, rest = path.lstrip("/").partition("/")
        if first == "versions":
            return self._versions(environ, start_response, "200 OK")
        accept = environ.get("HTTP_ACCEPT", "")
        version = accept[len(MEDIA_TYPE):] if accept.startswith(MEDIA_TYPE) else first
        if version not in KNOWN:
            return self._versions(environ, start_response, "300 Multiple Choices")
        # The version's segment is replaced by /v2 (a version named by the
        # media type leaves the whole path after it).
        remaining = path if accept.startswith(MEDIA_TYPE) else ("/" + rest if rest else "")
        environ["PATH_INFO"] = "/v2" + remaining
        return self._app(environ, start_response)

    def _versions(self, environ: dict[str, Any], start_response: Callable[..., Any], status: str) -> list[bytes]:
        body = versions_body(environ, self._public_endpoint)
        start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        return [body] if environ.get("REQUEST_METHOD") != "HEAD" else [b""]
