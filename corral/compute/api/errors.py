"""Compute's error body: ``{"<faultName>": {"code": <status>, "message": ...}}``.

The fault name depends only on the status, as upstream's fault wrapper
chooses it; ``retryAfter`` is added when the error carries a Retry-After
header.  Unexpected exceptions become a 500 ``computeFault`` whose message
names the exception class, as upstream's does.
"""

from __future__ import annotations

import falcon
import orjson

from corral.core import errors

FAULT_NAMES = {
    400: "badRequest",
    401: "unauthorized",
    403: "forbidden",
    404: "itemNotFound",
    405: "badMethod",
    409: "conflictingRequest",
    413: "overLimit",
    415: "badMediaType",
    429: "overLimit",
    501: "notImplemented",
    503: "serviceUnavailable",
}
DEFAULT_FAULT = "computeFault"

UNEXPECTED_MESSAGE = "Unexpected API Error. Please contact the administrator\n<class '{name}'>"


def fault_name(status: int) -> str:
    return FAULT_NAMES.get(status, DEFAULT_FAULT)


def format_error(req: falcon.Request, error: errors.ApiError) -> tuple[bytes, str]:
    message = error.message
    if error.status == 500 and type(error) is errors.InternalError:
        # Anything unexpected: upstream names only the exception class.
        message = UNEXPECTED_MESSAGE.format(name="Exception")
    fault: dict[str, object] = {"code": error.status, "message": message}
    retry_after = error.headers.get("Retry-After")
    if retry_after is not None:
        fault["retryAfter"] = retry_after
    return orjson.dumps({fault_name(error.status): fault}), "application/json; charset=UTF-8"
