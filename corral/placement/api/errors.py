"""Placement's error codes and error body.

Error code constants are part of the wire contract: each string appears
once here and is never reused for a different condition.  The body is
``{"errors": [{"status", "title", "detail", "code", "request_id"}]}``;
``code`` appears from microversion 1.23.  ``detail`` starts with the same
generic explanation per status that upstream's clients see.
"""

from __future__ import annotations

import html
import re

import falcon
import orjson
from falcon import mediatypes

from corral.core import errors

# ------------------------------------------------------------ error codes
DEFAULT = "placement.undefined_code"
INVENTORY_INUSE = "placement.inventory.inuse"
CONCURRENT_UPDATE = "placement.concurrent_update"
DUPLICATE_NAME = "placement.duplicate_name"
PROVIDER_IN_USE = "placement.resource_provider.inuse"
PROVIDER_CANNOT_DELETE_PARENT = "placement.resource_provider.cannot_delete_parent"
RESOURCE_PROVIDER_NOT_FOUND = "placement.resource_provider.not_found"
ILLEGAL_DUPLICATE_QUERYPARAM = "placement.query.duplicate_key"
QUERYPARAM_BAD_VALUE = "placement.query.bad_value"
QUERYPARAM_MISSING_VALUE = "placement.query.missing_value"

# The code attribute appears in error bodies from this microversion on.
CODE_MICROVERSION = (1, 23)

# Generic explanations per status, as upstream's bodies begin with them.
_EXPLANATIONS = {
    400: "The server could not comply with the request since it is either malformed or otherwise incorrect.",
    401: "This server could not verify that you are authorized to access the document you requested. "
    "Either you supplied the wrong credentials (e.g., bad password), or your browser does not understand "
    "how to supply the credentials required.",
    403: "Access was denied to this resource.",
    404: "The resource could not be found.",
    405: "The method specified is not allowed for this resource.",
    406: "The resource could not be generated that was acceptable to your browser.",
    409: "There was a conflict when trying to complete your request.",
    413: "The body of your request was too large for this server.",
    415: "The request media type is not supported by this server.",
    500: "The server has either erred or is incapable of performing the requested operation.",
    503: "The server is currently unavailable. Please try again at a later time.",
}


def explanation_for(status: int, method: str | None = None) -> str:
    if status == 405 and method:
        # Upstream's 405 explanation names the refused method.
        return f"The method {method} is not allowed for this resource."
    return _EXPLANATIONS.get(status, "")


def _inline_headline(req: falcon.Request | None, status: int) -> str | None:
    """For 405, 406 and 415 upstream's text names the request's method, Accept or content type."""
    if req is None:
        return None
    if status == 405:
        return f"The method {req.method} is not allowed for this resource. "
    if status == 406:
        accept = req.get_header("accept") or ""
        if not accept or accept == "*/*":
            accept = falcon.MEDIA_JSON
        return f"The resource could not be generated that was acceptable to your browser (content of type {accept}. "
    if status == 415:
        return f"The request media type {req.content_type or 'None'} is not supported by this server. "
    return None


def detail_text(status: int, message: str, method: str | None = None, req: falcon.Request | None = None) -> str:
    headline = _inline_headline(req, status)
    if headline is not None:
        return f"{headline}\n\n {flatten(message)}"
    explanation = explanation_for(status, method)
    if message == explanation:
        # A bare refusal (no route, no such version): upstream adds no detail.
        message = ""
    if not message:
        return f"{explanation}\n\n   " if explanation else ""
    message = flatten(message)
    if not explanation:
        return message
    return f"{explanation}\n\n {message}  "


_BREAK = re.compile(r"<br.*?>", re.I | re.S)
_COMMENT = re.compile(r"<!--|-->")
_TAG = re.compile(r"<.*?>", re.S)


def flatten(message: str) -> str:
    """A message as upstream's text bodies carry it: one line, markup removed."""
    message = message.replace("\n", " ").replace("\r", "")
    message = _BREAK.sub("\n", message)
    return _TAG.sub("", _COMMENT.sub("", message))


def _preferred_error_type(req: falcon.Request) -> str:
    """The error body type upstream's WSGI stack picks from the Accept header.

    No Accept (or ``*/*``) means JSON; otherwise the better of HTML and JSON
    (HTML on a tie), and plain text when the client accepts neither.
    """
    accept = (req.get_header("accept") or "").strip()
    if not accept or accept == "*/*":
        return falcon.MEDIA_JSON
    try:
        html = mediatypes.quality("text/html", accept)
        json = mediatypes.quality("application/json", accept)
    except (ValueError, IndexError):
        return falcon.MEDIA_JSON
    if html <= 0 and json <= 0:
        return falcon.MEDIA_TEXT
    return falcon.MEDIA_HTML if html >= json else falcon.MEDIA_JSON


def _status_line(status: int, title: str) -> str:
    return f"{status} {title}"


def _message(error: errors.ApiError, message: str) -> str:
    if isinstance(error, errors.VersionNotAcceptable):
        # Upstream's microversion middleware prefixes its refusals.
        return f"Invalid microversion: {message}"
    return message


def _text_error(req: falcon.Request, error: errors.ApiError, media_type: str) -> tuple[bytes, str]:
    status = _status_line(error.status, error.title)
    # The authentication refusal carries no detail upstream.
    message = "" if error.status == 401 else error.message
    if media_type == falcon.MEDIA_TEXT:
        text = f"{status}\n\n{detail_text(error.status, _message(error, message), req.method, req)}"
        return text.encode(), "text/plain; charset=UTF-8"
    explanation = explanation_for(error.status, req.method)
    page = (
        f"<html>\n <head>\n  <title>{status}</title>\n </head>\n <body>\n  <h1>{status}</h1>\n"
        f"  {explanation}<br /><br />\n{html.escape(_message(error, message))}\n\n\n </body>\n</html>"
    )
    return page.encode(), "text/html; charset=UTF-8"


def format_error(req: falcon.Request, error: errors.ApiError) -> tuple[bytes, str]:
    context = req.context
    media_type = _preferred_error_type(req)
    if media_type != falcon.MEDIA_JSON:
        return _text_error(req, error, media_type)
    if error.status == 401:
        # The noauth2 refusal: the plain web-framework shape upstream sends, without detail.
        body = {"message": f"{explanation_for(401)}<br /><br />\n\n\n", "code": "401 Unauthorized",
                "title": "Unauthorized"}
        return orjson.dumps(body), falcon.MEDIA_JSON
    detail = detail_text(error.status, _message(error, error.message), req.method, req)
    entry: dict[str, object] = {"status": error.status, "title": error.title, "detail": detail}
    if context.version is not None and context.version >= CODE_MICROVERSION:
        entry["code"] = error.code or DEFAULT
    entry["request_id"] = context.request_id
    if isinstance(error, errors.VersionNotAcceptable):
        from corral.placement.microversions import VERSIONS

        entry["max_version"] = VERSIONS[-1]
        entry["min_version"] = VERSIONS[0]
    return orjson.dumps({"errors": [entry]}), falcon.MEDIA_JSON
