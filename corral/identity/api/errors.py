"""Keystone's error body: ``{"error": {"code", "message", "title"}}``.

Errors raised while authenticating may carry an ``identity`` member
(Keystone's auth-plugin errors do); it is placed where Keystone places it.
A 401 also gets ``WWW-Authenticate: Keystone uri="<identity URL>"``
(see :func:`corral.identity.api.app`).
"""

from __future__ import annotations

import falcon
import orjson

from corral.core import errors
from corral.identity.domain.auth_request import unauthorized

__all__ = ["body", "conflict", "forbidden", "format_error", "not_found", "unauthorized"]


def body(error: errors.ApiError) -> dict[str, object]:
    content: dict[str, object] = {"code": error.status}
    if "identity" in error.extra:
        content["identity"] = error.extra["identity"]
    content["message"] = error.message
    content["title"] = error.title
    return {"error": content}


def format_error(req: falcon.Request, error: errors.ApiError) -> tuple[bytes, str]:
    return orjson.dumps(body(error)), falcon.MEDIA_JSON


def not_found(kind: str, ident: str) -> errors.NotFound:
    return errors.NotFound(f"Could not find {kind}: {ident}.")


def conflict(kind: str, detail: str) -> errors.Conflict:
    return errors.Conflict(f"Conflict occurred attempting to store {kind} - {detail}")


def forbidden(rule: str) -> errors.Forbidden:
    return errors.Forbidden(f"You are not authorized to perform the requested action: {rule}.")
