"""Helpers shared by Placement's handlers: bodies, query strings, links, headers."""

from __future__ import annotations

import datetime
import email.utils
import json
from collections.abc import Iterable
from typing import Any

import falcon
import jsonschema

from corral.core import errors
from corral.core.http import parse_json, read_body, send_json
from corral.core.schema import VersionedSchema, best_error, compile_schema
from corral.placement.api.state import PlacementState

# Versions at which a response shape or a rule changes, named once here.
LAST_MODIFIED = (1, 15)


def json_body(state: PlacementState, req: falcon.Request, schema: VersionedSchema | None = None) -> Any:
    """The request's JSON body, validated against ``schema`` at the request's version."""
    content_type = (req.content_type or "").split(";")[0].strip().lower()
    if content_type != "application/json":
        raise errors.UnsupportedMediaType(
            f"The media type {req.content_type or 'None'} is not supported, use application/json"
        )
    raw = read_body(req, state.conf.api.max_request_body_size)
    try:
        body = parse_json(raw)
    except errors.BadRequest:
        # Upstream's message is the standard library decoder's, when it has
        # one: deeply nested input exhausts its recursion instead.
        try:
            json.loads(raw)
        except ValueError as problem:
            raise errors.BadRequest(f"Malformed JSON: {problem}") from None
        except RecursionError:
            pass
        raise
    if schema is not None:
        schema.validate(body, req.context.version)
    return body


def provider_json_body(
    state: PlacementState, req: falcon.Request, schema: VersionedSchema, provider_uuid: str
) -> Any:
    """Like :func:`json_body` for a provider's sub-resource: a missing provider is a 404 before a bad body's 400."""
    try:
        return json_body(state, req, schema)
    except errors.BadRequest:
        from corral.placement.db import providers

        with state.db.read() as conn:
            providers.get_or_404(conn, provider_uuid)
        raise


# Upstream's answer when a PUT of traits or aggregates names a stale generation.
GENERATION_CHANGED = (
    "Resource provider's generation already changed. Please update the generation and try again."
)


def query_params(req: falcon.Request) -> dict[str, list[str]]:
    """Every query parameter, each with all its values in order."""
    params: dict[str, list[str]] = {}
    for name, value in falcon.uri.parse_query_string(
        req.query_string, keep_blank=True, csv=False
    ).items():
        params[name] = value if isinstance(value, list) else [value]
    return params


class QuerySchema:
    """A JSON schema for a query string (single values), compiled once."""

    def __init__(self, schema: dict[str, Any]) -> None:
        self._validator = compile_schema(schema)

    def validate(self, single: dict[str, Any]) -> None:
        problem: jsonschema.ValidationError | None = best_error(self._validator, single)
        if problem is not None:
            # Upstream's wording: the whole validation error, schema path included.
            raise errors.BadRequest(f"Invalid query string parameters: {problem}")


def single_values(params: dict[str, list[str]], repeatable: Iterable[str] = ()) -> dict[str, Any]:
    """Query parameters as name -> value; a repeated non-repeatable one is a 400."""
    repeatable = set(repeatable)
    single: dict[str, Any] = {}
    for name, values in params.items():
        if name in repeatable:
            single[name] = values[-1]
            continue
        if len(values) > 1:
            raise errors.BadRequest(f"Invalid query string parameters: '{name}' may only be given once")
        single[name] = values[0]
    return single


def last_values(params: dict[str, list[str]]) -> dict[str, str]:
    """Query parameters as name -> value, the last one winning when repeated (as upstream reads them)."""
    return {name: values[-1] for name, values in params.items()}


def url(req: falcon.Request, path: str) -> str:
    """A link as upstream renders it: the application's root path plus ``path``."""
    return f"{req.root_path}{path}"


def set_location(req: falcon.Request, resp: falcon.Response, path: str) -> None:
    """A Location header as upstream's WSGI stack sends it: an absolute URL."""
    resp.set_header("location", f"{req.prefix}{path}")


def http_date(moment: datetime.datetime | None) -> str:
    if moment is None:
        moment = utcnow()
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return email.utils.format_datetime(moment, usegmt=True)


def utcnow() -> datetime.datetime:
    """Now, in UTC, without tzinfo (how timestamps are stored)."""
    return datetime.datetime.now(datetime.UTC).replace(tzinfo=None, microsecond=0)


def send_cacheable(
    req: falcon.Request,
    resp: falcon.Response,
    body: Any,
    last_modified: datetime.datetime | None,
    status: int = 200,
    *,
    modified_known: bool = True,
) -> None:
    """JSON plus, from 1.15, ``last-modified`` and ``cache-control: no-cache``.

    ``modified_known=False`` leaves ``last-modified`` out (upstream does for an empty inventory list).
    """
    if req.context.at_least(*LAST_MODIFIED):
        if modified_known:
            resp.set_header("last-modified", http_date(last_modified))
        resp.set_header("cache-control", "no-cache")
    send_json(resp, body, status)


def newest(*moments: datetime.datetime | None) -> datetime.datetime | None:
    present = [moment for moment in moments if moment is not None]
    return max(present) if present else None


def authorize(state: PlacementState, req: falcon.Request, rule: str, target: dict[str, Any] | None = None) -> None:
    state.policy.authorize(req.context, rule, target)


def not_found(message: str, code: str | None = None) -> errors.NotFound:
    return errors.NotFound(message, code=code)
