"""The ``corral`` auth strategy: tokens from Corral's identity service, checked in-process.

Every service's requests carry ``X-Auth-Token``; the token is checked
locally (see :mod:`corral.identity.validator`) and the request context gets
what keystonemiddleware would have put in the ``X-*`` headers: the user,
the project (project-scoped tokens), the domain (domain-scoped tokens),
``system_scope = "all"`` (system-scoped tokens) and the role names with
implied roles included, so that upstream's policy defaults mean the same.
A missing, malformed, expired or revoked token is a 401 with
``WWW-Authenticate: Keystone uri="<identity URL>"``, as keystonemiddleware
answers.
"""

from __future__ import annotations

from collections.abc import Callable

import falcon
from oslo_config import cfg

from corral.core.context import RequestContext
from corral.core.errors import Unauthorized
from corral.identity.domain.tokens import InvalidToken, TokenPayload
from corral.identity.validator import TokenValidator, make_validator

MESSAGE = "The request you have made requires authentication."


def fill_context(context: RequestContext, payload: TokenPayload) -> None:
    context.user_id = payload.user_id
    context.project_id = payload.project_id
    context.domain_id = payload.domain_id
    context.system_scope = "all" if payload.system else None
    context.roles = payload.roles
    context.authenticated = True
    context.extras["token"] = payload


def www_authenticate(conf: cfg.ConfigOpts, req: falcon.Request) -> str:
    identity = conf.catalog.identity_url
    if not identity:
        base = conf.catalog.public_url or conf.api.public_endpoint
        if not base:
            prefix = req.prefix.rstrip("/")
            base = prefix[: len(prefix) - len(req.root_path)] if req.root_path else prefix
        identity = base.rstrip("/") + "/identity"
    return f'Keystone uri="{identity.rstrip("/")}/v3"'


def authenticate_with(validator: TokenValidator, req: falcon.Request, realm: Callable[[falcon.Request], str]) -> None:
    """Check ``X-Auth-Token``; ``realm`` gives the ``WWW-Authenticate`` value of a refusal."""
    token = req.get_header("X-Auth-Token")
    try:
        if not token:
            raise InvalidToken()
        payload = validator.validate(token)
    except InvalidToken:
        raise Unauthorized(MESSAGE, headers={"WWW-Authenticate": realm(req)}) from None
    fill_context(req.context, payload)


def make_authenticator(conf: cfg.ConfigOpts) -> Callable[[falcon.Request], None]:
    validator = make_validator(conf)
    # Missing or unreadable keys: fail when the application is built, not at the first request.
    validator.keys.fernet()

    def authenticate(req: falcon.Request) -> None:
        authenticate_with(validator, req, lambda request: www_authenticate(conf, request))

    return authenticate
