"""Glance's error bodies, rendered by WebOb as Glance's are.

Glance raises WebOb's HTTP exceptions, which pick their body by the
request's ``Accept`` header: JSON (``{"message", "code", "title"}``) for
``application/json``, HTML for ``text/html`` or ``*/*``, plain text
otherwise (no ``Accept`` at all included).  Rendering through WebOb
itself keeps every byte the same.  A message is WebOb's ``explanation``
unless the error says it is the ``detail`` (as Glance's 415s are).
"""

from __future__ import annotations

from typing import Any

import falcon
import webob.exc

from corral.core import errors
from corral.image.domain.images import ImageError


def format_error(req: falcon.Request, error: errors.ApiError) -> tuple[bytes, str]:
    cls = webob.exc.status_map.get(error.status, webob.exc.HTTPInternalServerError)
    if error.extra.get("as_detail"):
        exception = cls(detail=error.message)
    else:
        exception = cls(explanation=error.message)
    environ = req.env
    captured: list[Any] = []
    body = b"".join(exception.generate_response(environ, lambda status, headers: captured.append(headers)))
    content_type = next((value for name, value in captured[0] if name.lower() == "content-type"), "text/plain")
    return body, content_type


def api_error(error: ImageError) -> errors.ApiError:
    """The ApiError of a domain refusal (415s carry their message as WebOb's detail, as Glance's do)."""
    return errors.ApiError(error.message, status=error.status, headers=error.headers, as_detail=error.as_detail)
