"""Tokens for Corral's own services when they call each other (Compute calling Placement).

The caller mints a token itself, with the token keys, for the ``corral``
user of the ``service`` project that the bootstrap creates (roles admin and
service, as a deployment gives nova's service user).  No password exists
for that user; disabling it, or taking its roles away, revokes these
tokens like any other.  A token is minted again when less than a quarter
of its lifetime is left, or when the callee refused it.
"""

from __future__ import annotations

import threading
import time

from oslo_config import cfg

from corral.core.db import database_from_conf
from corral.core.errors import ApiError
from corral.identity import conf as identity_conf
from corral.identity.bootstrap import service_identity
from corral.identity.domain.passwords import PasswordHasher
from corral.identity.domain.tokens import encode
from corral.identity.issuing import TokenIssuer
from corral.identity.validator import make_validator


class ServiceTokenUnavailable(Exception):
    pass


class ServiceTokenSource:
    def __init__(self, conf: cfg.ConfigOpts) -> None:
        self._conf = conf
        self._db = database_from_conf(conf, identity_conf.database_url(conf), "identity_database")
        self._validator = make_validator(conf, self._db)
        # Service tokens involve no password: the hasher is never used.
        self._issuer = TokenIssuer(conf, self._db, PasswordHasher(rounds=4, concurrency=1), self._validator)
        self._lock = threading.Lock()
        self._token: str | None = None
        self._renew_at = 0.0

    def token(self) -> str:
        with self._lock:
            if self._token is None or time.time() >= self._renew_at:
                self._token = self._mint()
            return self._token

    def invalidate(self) -> None:
        with self._lock:
            self._token = None

    def _mint(self) -> str:
        found = service_identity(self._db, self._conf.identity.default_domain_id)
        if found is None:
            raise ServiceTokenUnavailable("Corral's service user does not exist yet: run 'corral identity bootstrap'")
        try:
            payload = self._issuer.service_token(*found)
        except ApiError as error:
            raise ServiceTokenUnavailable(f"Corral's service user cannot get a token: {error.message}") from None
        lifetime = payload.expires_at - time.time()
        self._renew_at = time.time() + lifetime * 0.75
        return encode(self._validator.keys.fernet(), payload)
