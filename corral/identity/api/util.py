"""Request helpers shared by the identity handlers: bodies, links, URLs, policy targets."""

from __future__ import annotations

import datetime
from typing import Any

import falcon
import jsonschema
import orjson

from corral.core.errors import BadRequest
from corral.core.http import base_url, read_body
from corral.identity.api.errors import forbidden
from corral.identity.api.state import IdentityState
from corral.identity.domain.auth_request import expecting


def json_body(state: IdentityState, req: falcon.Request, *, required: str | None = None) -> Any:
    """The decoded body; Keystone's messages for a missing or malformed one."""
    data = read_body(req, state.conf.api.max_request_body_size)
    if not data.strip():
        if required:
            raise expecting(required, "request body")
        return {}
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        raise expecting("valid JSON", "request body") from None


def validate(state: IdentityState, name: str, body: Any) -> None:
    """Keystone's resource validation wording: ``Invalid input for field/attribute ...``."""
    validator: jsonschema.protocols.Validator = state.schemas[name]
    error = next(iter(validator.iter_errors(body)), None)
    if error is None:
        return
    if error.path:
        field = error.path[-1]
        raise BadRequest(f"Invalid input for field/attribute {field}. Value: {error.instance}. {error.message}")
    raise BadRequest(error.message)


def identity_url(state: IdentityState, req: falcon.Request) -> str:
    """Where clients reach this service (no trailing slash, no /v3)."""
    configured = state.conf.catalog.identity_url
    if configured:
        return configured.rstrip("/")
    if state.conf.catalog.public_url:
        return state.conf.catalog.public_url.rstrip("/") + req.root_path
    return base_url(req, state.conf.api.public_endpoint)


def server_url(state: IdentityState, req: falcon.Request) -> str:
    """The base the other services' paths are added to."""
    if state.conf.api.public_endpoint:
        return state.conf.api.public_endpoint.rstrip("/")
    prefix = req.prefix.rstrip("/")
    return prefix[: len(prefix) - len(req.root_path)] if req.root_path else prefix


def v3(state: IdentityState, req: falcon.Request) -> str:
    return identity_url(state, req) + "/v3"


def self_link(state: IdentityState, req: falcon.Request, path: str) -> dict[str, str]:
    return {"self": f"{v3(state, req)}/{path}"}


def collection_links(state: IdentityState, req: falcon.Request) -> dict[str, Any]:
    query = f"?{req.query_string}" if req.query_string else ""
    return {"next": None, "self": f"{v3(state, req)}{req.path[3:] if req.path.startswith('/v3') else req.path}{query}",
            "previous": None}


def authorize(state: IdentityState, req: falcon.Request, rule: str, target: dict[str, Any] | None = None) -> None:
    # As Keystone builds targets: an attribute that is not known is absent,
    # so "domain_id:%(target.domain_id)s" cannot match a token without a domain.
    known = {key: value for key, value in (target or {}).items() if value is not None}
    if not state.policy.allows(req.context, rule, known):
        raise forbidden(rule)


def query_bool(req: falcon.Request, name: str) -> bool | None:
    value = req.get_param(name)
    if value is None:
        return None
    return value.lower() not in ("0", "false", "no", "off")


def flag_present(req: falcon.Request, name: str) -> bool:
    """A query flag such as ``?nocatalog`` or ``?effective`` (present, with or without a value)."""
    value = req.get_param(name)
    if value is None:
        return False
    return value.lower() not in ("0", "false", "no", "off")


def timestamp(value: datetime.datetime | float | int | None) -> str | None:
    """Keystone's token times: seconds, then ``.000000Z``."""
    if value is None:
        return None
    if isinstance(value, datetime.datetime):
        moment = value.replace(tzinfo=datetime.UTC) if value.tzinfo is None else value
    else:
        moment = datetime.datetime.fromtimestamp(value, datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.000000Z")


def iso_microseconds(value: datetime.datetime | None) -> str | None:
    """Keystone's application credential times: ``2099-01-01T00:00:00.000000``."""
    return None if value is None else value.strftime("%Y-%m-%dT%H:%M:%S.%f")
