"""Checks every request passes before any handler sees it.

Every service stores what clients send: names and ids from paths and query
strings, identities from headers (a ``noauth2`` token's project becomes a
row's owner), documents from JSON bodies.  Some values cannot be stored or
written back by every backend, and a database refusing one half-way through
a request is a poor way to find out: PostgreSQL's text types refuse NUL
characters, Corral's JSON encoder writes at most 254 levels of nesting and
its decoder turns integers beyond 64 bits into rounded floats.
These checks turn such values into a 400 in the service's own error body,
the same on SQLite, PostgreSQL and MariaDB.

The body is read here once, under the service's size limit, whatever its
framing: a fixed ``Content-Length`` or ``Transfer-Encoding: chunked`` from a
server that de-chunks it (``wsgi.input_terminated``, as gunicorn sets).
Handlers get the same bytes from :func:`corral.core.http.read_body`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import falcon
import orjson

from corral.core import errors

# PostgreSQL's text and varchar types cannot hold it; no service accepts it.
NUL = "\x00"
# Deeper documents are refused.  Stored documents (a node's ``extra``) are
# written back inside answers a few levels deep, and orjson writes at most
# 254 levels; no OpenStack API document comes anywhere near this.
MAX_JSON_DEPTH = 128

# Integers from 19 digits on may not fit in 64 bits (checked exactly then).
# Found by mapping every digit to "0" and looking for a run of them: two
# passes in C, many times faster than a regular expression.
_DIGITS_TO_ZERO = bytes.maketrans(b"123456789", b"000000000")
_LONG_DIGITS = b"0" * 19
# What orjson reads as an integer; beyond, it reads a float.
INT64_MIN = -(2**63)
UINT64_MAX = 2**64 - 1

_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
_READ_SIZE = 65536


class LengthRequired(errors.ApiError):
    status = 411


def check_request(req: falcon.Request) -> None:
    """Refuse NUL characters in the path, the query string and the headers."""
    if NUL in req.path:
        raise errors.BadRequest("Invalid input: the path contains a NUL character.")
    query = req.query_string
    if "%00" in query or NUL in query:
        raise errors.BadRequest("Invalid input: the query string contains a NUL character.")
    for key, value in req.env.items():
        if isinstance(value, str) and NUL in value and (key.startswith("HTTP_") or key.startswith("CONTENT_")):
            name = "-".join(part.capitalize() for part in key.removeprefix("HTTP_").split("_"))
            raise errors.BadRequest(f"Invalid input: the {name} header contains a NUL character.")


def check_length(req: falcon.Request, limit: int) -> None:
    """Refuse a body announced longer than ``limit`` bytes before reading any of it."""
    length = req.content_length
    if length is not None and length > limit:
        raise errors.PayloadTooLarge("Request is too large.")


def check_body(req: falcon.Request, limit: int, *, exact_integers: bool = True) -> None:
    """Read a write's body (bounded by ``limit``) and refuse what no backend stores."""
    if req.method in _BODY_METHODS:
        check_json(read_request_body(req, limit), exact_integers=exact_integers)


def read_request_body(req: falcon.Request, limit: int) -> bytes:
    """The raw body, read once: 413 beyond ``limit`` bytes, 411 for framing the server left to us."""
    body = req.context.body
    if body is not None:
        if len(body) > limit:
            raise errors.PayloadTooLarge("Request is too large.")
        return body
    length = req.content_length
    if length is not None:
        if length > limit:
            raise errors.PayloadTooLarge("Request is too large.")
        body = _read_all(req.bounded_stream, limit)
    elif _is_chunked(req):
        if not req.env.get("wsgi.input_terminated"):
            # The server hands the chunked framing through undecoded, or not
            # at all: reading to the end could wait for ever.
            raise LengthRequired("A Content-Length header is required for this request.")
        body = _read_all(req.stream, limit)
    else:
        body = b""
    req.context.body = body
    return body


def _is_chunked(req: falcon.Request) -> bool:
    encoding = req.get_header("Transfer-Encoding") or ""
    return "chunked" in encoding.lower()


def _read_all(stream: Any, limit: int) -> bytes:
    """Read to the end of ``stream``, refusing more than ``limit`` bytes (413)."""
    parts = []
    total = 0
    while True:
        part = stream.read(min(_READ_SIZE, limit + 1 - total))
        if not part:
            return b"".join(parts)
        parts.append(part)
        total += len(part)
        if total > limit:
            raise errors.PayloadTooLarge("Request is too large.")


def check_json(body: bytes, *, exact_integers: bool = True) -> None:
    """Refuse JSON documents nested too deeply, carrying NUL characters or integers beyond 64 bits.

    ``exact_integers=False`` lets integers beyond 64 bits through (as
    rounded floats).  Bodies that are not JSON are left to the handler,
    which answers in its own words.  Most bodies cannot contain any of these (no escaped
    NUL, no run of 19 digits, fewer brackets than the depth limit) and are
    not decoded here.
    """
    if not body:
        return
    nul = b"\\u0000" in body
    long_number = exact_integers and _LONG_DIGITS in body.translate(_DIGITS_TO_ZERO)
    if not nul and not long_number and body.count(b"[") + body.count(b"{") <= MAX_JSON_DEPTH:
        return
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError as error:
        if "depth" in str(error) or "recursion" in str(error):
            raise _too_deep() from None
        return
    for pointer, value, depth in _walk(document):
        if depth >= MAX_JSON_DEPTH and isinstance(value, (dict, list)):
            raise _too_deep()
        if isinstance(value, str) and NUL in value:
            where = pointer.replace(NUL, "\\u0000") or "/"
            raise errors.BadRequest(f"Invalid input: the request body contains a NUL character at {where}.")
    if long_number:
        # orjson reads integers beyond 64 bits as floats: they would be
        # stored and answered rounded.  The standard library keeps them
        # exact, so it can tell an integer from a float.
        json.loads(body, parse_int=_int64)


def _int64(text: str) -> int:
    number = int(text)
    if not INT64_MIN <= number <= UINT64_MAX:
        raise errors.BadRequest(f"Invalid input: the request body holds an integer beyond 64 bits ({text}).")
    return number


def _too_deep() -> errors.BadRequest:
    return errors.BadRequest(f"Invalid input: the request body is nested deeper than {MAX_JSON_DEPTH} levels.")


def _walk(document: Any) -> Iterator[tuple[str, Any, int]]:
    """Every value and object key in ``document`` with its JSON pointer and depth, without recursion.

    The depth of the document itself is 0, of its members 1, and so on.
    """
    stack: list[tuple[str, Any, int]] = [("", document, 0)]
    while stack:
        pointer, value, depth = stack.pop()
        yield pointer, value, depth
        if isinstance(value, dict):
            for key, item in value.items():
                child = f"{pointer}/{_escape(key)}"
                yield child, key, depth + 1
                stack.append((child, item, depth + 1))
        elif isinstance(value, list):
            for index, item in enumerate(value):
                stack.append((f"{pointer}/{index}", item, depth + 1))


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")
