"""Ironic's error body.

Every error is ``{"error_message": "<JSON document as a string>"}``.  The
inner document is ``{"faultcode", "faultstring", "debuginfo"}`` with
``faultcode`` "Client" for 4xx and "Server" for 5xx, except for version
negotiation failures, whose inner document is ``{"code", "title",
"description"}`` as upstream sends them.
"""

from __future__ import annotations

import json

import falcon
import orjson

from corral.core import errors

# Set on the request when upstream's answer carries no version headers: the
# version header could not be parsed at all, or upstream's router refused
# the path before its version hook ran (errors raised with ``bare=True``).
NO_VERSION_HEADERS = "baremetal.no_version_headers"


class RetryLater(errors.ApiError):
    """The data is not available yet: 202 with a Retry-Request-After header."""

    status = 202


def inner_document(error: errors.ApiError) -> dict[str, object]:
    if isinstance(error, errors.VersionNotAcceptable):
        return {"code": error.status, "title": error.title, "description": error.message}
    if error.extra.get("routing"):
        return {"code": error.status, "title": error.title, "description": error.message}
    return {
        "faultcode": "Client" if error.status < 500 else "Server",
        "faultstring": error.message,
        "debuginfo": None,
    }


def format_error(req: falcon.Request, error: errors.ApiError) -> tuple[bytes, str]:
    if (isinstance(error, errors.VersionNotAcceptable) and error.malformed) or error.extra.get("bare"):
        req.context.extras[NO_VERSION_HEADERS] = True
    if isinstance(error, RetryLater):
        body: dict[str, object] = {"message": error.message}
        return orjson.dumps(body), falcon.MEDIA_JSON
    # The inner document is encoded the way Python's json module does it
    # (", " and ": " separators), which is what upstream's clients parse.
    body = {"error_message": json.dumps(inner_document(error))}
    return orjson.dumps(body), falcon.MEDIA_JSON
