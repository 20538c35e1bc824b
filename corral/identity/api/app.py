"""Build the identity service's WSGI application (serving at its own root).

The identity API authenticates its callers with its own tokens whatever
``[api] auth_strategy`` says (it is the service that issues them); only
``POST /v3/auth/tokens``, a user's own password change (the old password
is the credential) and the version documents need no token.
"""

from __future__ import annotations

import re

import falcon
from oslo_config import cfg

from corral.core.db import database_from_conf
from corral.core.http import HttpService, build_app
from corral.core.microversion import VersionSpec
from corral.core.policy import Enforcer
from corral.identity import conf as identity_conf
from corral.identity.api import policies
from corral.identity.api.errors import format_error
from corral.identity.api.routes import ROUTES
from corral.identity.api.schemas import compile_all
from corral.identity.api.state import IdentityState
from corral.identity.api.util import v3
from corral.identity.auth import authenticate_with
from corral.identity.domain.passwords import PasswordHasher
from corral.identity.keys import KeyRing
from corral.identity.validator import RevocationCache, TokenValidator

_PASSWORD_CHANGE = re.compile(r"^/v3/users/[^/]+/password/?$")


class _NoMicroversions(VersionSpec):
    """Keystone has no microversions: every request is served the same way."""

    def negotiate(self, headers):  # type: ignore[no-untyped-def]
        return None


SPEC = _NoMicroversions(service_type="identity", versions=("3.14",))


def build_state(conf: cfg.ConfigOpts) -> IdentityState:
    db = database_from_conf(conf, identity_conf.database_url(conf), "identity_database")
    keys = KeyRing(identity_conf.key_repository(conf))
    identity = conf.identity
    return IdentityState(
        conf=conf,
        db=db,
        policy=Enforcer(conf, policies.rules(),
                        forbidden_message="You are not authorized to perform the requested action: {rule}."),
        hasher=PasswordHasher(identity.password_hash_algorithm, identity.password_hash_rounds,
                              identity.max_concurrent_password_hashes, identity.password_hash_wait),
        keys=keys,
        validator=TokenValidator(keys, RevocationCache(db, conf.token.revocation_check_interval),
                                 conf.token.cache_size),
        schemas=compile_all(),
    )


def _authenticator(state: IdentityState):  # noqa: ANN202 - closure
    def authenticate(req: falcon.Request) -> None:
        if req.method == "POST" and (req.path.rstrip("/") == "/v3/auth/tokens" or _PASSWORD_CHANGE.match(req.path)):
            return
        authenticate_with(state.validator, req, lambda request: _realm(state, request))

    return authenticate


def _realm(state: IdentityState, req: falcon.Request) -> str:
    return f'Keystone uri="{v3(state, req)}"'


def _headers(state: IdentityState):  # noqa: ANN202 - closure
    def add(req: falcon.Request, resp: falcon.Response) -> None:
        resp.set_header("Vary", "X-Auth-Token")
        if resp.status_code == 401 and not resp.get_header("WWW-Authenticate"):
            resp.set_header("WWW-Authenticate", _realm(state, req))

    return add


def make_app(conf: cfg.ConfigOpts, state: IdentityState | None = None) -> falcon.App:
    if state is None:
        state = build_state(conf)
    service = HttpService(
        name="identity",
        versions=SPEC,
        format_error=format_error,
        authenticate=_authenticator(state),
        max_body_size=conf.api.max_request_body_size,
        extra_headers=_headers(state),
        strip_trailing_slash=True,
    )
    return build_app(service, ROUTES, state)
