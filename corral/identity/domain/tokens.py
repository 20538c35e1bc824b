"""What a token says, and its encrypted form.

A token is a Fernet token (AES-CBC with an HMAC-SHA256, from the
``cryptography`` package) over a compact JSON list: the user and their
domain, the authentication methods, the scope, the role names (implied
roles included), when it was issued and when it expires, its audit ids and
the application credential it came from.  Any process holding the keys can
check a token without asking a database; roles are fixed when a token is
issued, and every change that takes a role away revokes the tokens that
carry it (see :mod:`corral.identity.domain.revocation`).

As with Keystone's Fernet tokens, the base64 padding is left off so a
token is URL-safe as it is.
"""

from __future__ import annotations

import base64
import os
from dataclasses import dataclass, field
from typing import Any

import orjson
from cryptography.fernet import InvalidToken as FernetInvalidToken
from cryptography.fernet import MultiFernet

from corral.identity.domain.revocation import keys_of

FORMAT_VERSION = 1
PROJECT = "project"
DOMAIN = "domain"
SYSTEM = "system"
_SCOPE_CODES = {None: 0, PROJECT: 1, DOMAIN: 2, SYSTEM: 3}
_SCOPES = {code: scope for scope, code in _SCOPE_CODES.items()}


class InvalidToken(Exception):
    """The text is not a token these keys made (or it was altered)."""


def new_audit_id() -> str:
    return base64.urlsafe_b64encode(os.urandom(16)).decode().rstrip("=")


@dataclass(frozen=True)
class TokenPayload:
    user_id: str
    user_domain_id: str
    methods: tuple[str, ...]
    # None (unscoped), "project", "domain" or "system".
    scope: str | None
    # The project or domain id, or "all" for the system.
    scope_id: str | None
    project_domain_id: str | None
    roles: tuple[str, ...]
    # Microseconds since the epoch.
    issued_at: int
    # Seconds since the epoch.
    expires_at: int
    # This token's audit id first, then the one of the token it came from.
    audit_ids: tuple[str, ...]
    app_cred_id: str | None = None
    # What revocation events are matched on, computed once.
    revocation_keys: tuple[tuple[str, str, str | None], ...] = field(default=(), compare=False, repr=False)

    @property
    def project_id(self) -> str | None:
        return self.scope_id if self.scope == PROJECT else None

    @property
    def domain_id(self) -> str | None:
        return self.scope_id if self.scope == DOMAIN else None

    @property
    def system(self) -> bool:
        return self.scope == SYSTEM

    def to_list(self) -> list[Any]:
        return [
            FORMAT_VERSION, self.user_id, self.user_domain_id, list(self.methods), _SCOPE_CODES[self.scope],
            self.scope_id, self.project_domain_id, list(self.roles), self.issued_at, self.expires_at,
            list(self.audit_ids), self.app_cred_id,
        ]

    @classmethod
    def from_list(cls, items: list[Any]) -> TokenPayload:
        (version, user_id, user_domain_id, methods, scope, scope_id, project_domain_id, roles, issued_at,
         expires_at, audit_ids, app_cred_id) = items
        if version != FORMAT_VERSION:
            raise ValueError(f"token format {version}")
        payload = cls(
            user_id=user_id, user_domain_id=user_domain_id, methods=tuple(methods), scope=_SCOPES[scope],
            scope_id=scope_id, project_domain_id=project_domain_id, roles=tuple(roles), issued_at=int(issued_at),
            expires_at=int(expires_at), audit_ids=tuple(audit_ids), app_cred_id=app_cred_id,
        )
        return payload.with_revocation_keys()

    def with_revocation_keys(self) -> TokenPayload:
        object.__setattr__(self, "revocation_keys", keys_of(self))
        return self


def encode(fernet: MultiFernet, payload: TokenPayload) -> str:
    return fernet.encrypt(orjson.dumps(payload.to_list())).decode().rstrip("=")


def decode(fernet: MultiFernet, token: str) -> TokenPayload:
    """The payload of ``token``; :class:`InvalidToken` when it is not one of ours.

    Expiry and revocation are the caller's to check.
    """
    if not token or len(token) > 4096:
        raise InvalidToken()
    try:
        data = fernet.decrypt((token + "=" * (-len(token) % 4)).encode("ascii"))
        return TokenPayload.from_list(orjson.loads(data))
    except (FernetInvalidToken, UnicodeError, ValueError, TypeError, KeyError):
        raise InvalidToken() from None
