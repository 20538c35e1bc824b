"""Revocation events and how tokens are matched against them.

An event says: tokens that match ``(kind, subject, scope)`` and were issued
at or before ``issued_before`` are no longer valid.  The kinds:

``audit``    one token (and only it), by its audit id: ``DELETE /v3/auth/tokens``
``user``     every token of a user: password changed, user disabled or deleted
``grant``    a user's tokens on one project, domain or the system: a role taken away
``project``  every token scoped to a project: project disabled or deleted
``domain``   tokens of a domain's users or scoped to it or its projects: domain disabled
``role``     every token carrying a role: role deleted or an implication removed
``app_cred`` tokens made from an application credential: credential deleted

Matching is a few dictionary look-ups per token: :class:`RevocationIndex`
keeps, per key, the latest ``issued_before``.  An event is kept until no
token it could match can still be valid (``prune_after``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

AUDIT = "audit"
USER = "user"
GRANT = "grant"
PROJECT = "project"
DOMAIN = "domain"
ROLE = "role"
APP_CRED = "app_cred"

Key = tuple[str, str, "str | None"]


class RevocableToken(Protocol):
    """What matching reads of a token's payload (tokens' ``TokenPayload`` is one)."""

    @property
    def user_id(self) -> str: ...

    @property
    def user_domain_id(self) -> str: ...

    @property
    def scope(self) -> str | None: ...

    @property
    def scope_id(self) -> str | None: ...

    @property
    def project_domain_id(self) -> str | None: ...

    @property
    def roles(self) -> tuple[str, ...]: ...

    @property
    def audit_ids(self) -> tuple[str, ...]: ...

    @property
    def app_cred_id(self) -> str | None: ...

    @property
    def issued_at(self) -> int: ...

    @property
    def revocation_keys(self) -> tuple[Key, ...]: ...


@dataclass(frozen=True)
class RevocationEvent:
    kind: str
    subject: str
    scope: str | None
    # Microseconds since the epoch.
    issued_before: int

    @property
    def key(self) -> Key:
        return (self.kind, self.subject, self.scope)


def keys_of(payload: RevocableToken) -> tuple[Key, ...]:
    """Every event key that can revoke ``payload``."""
    keys: list[Key] = [(AUDIT, payload.audit_ids[0], None), (USER, payload.user_id, None),
                       (DOMAIN, payload.user_domain_id, None)]
    if payload.scope_id is not None:
        keys.append((GRANT, payload.user_id, payload.scope_id))
    if payload.scope == "project":
        keys.append((PROJECT, payload.scope_id or "", None))
        if payload.project_domain_id and payload.project_domain_id != payload.user_domain_id:
            keys.append((DOMAIN, payload.project_domain_id, None))
    elif payload.scope == "domain" and payload.scope_id != payload.user_domain_id:
        keys.append((DOMAIN, payload.scope_id or "", None))
    keys.extend((ROLE, role, None) for role in payload.roles)
    if payload.app_cred_id is not None:
        keys.append((APP_CRED, payload.app_cred_id, None))
    return tuple(keys)


class RevocationIndex:
    """The events in force, by key, for constant-time checks."""

    def __init__(self, events: Iterable[RevocationEvent] = ()) -> None:
        latest: dict[Key, int] = {}
        for event in events:
            if latest.get(event.key, -1) < event.issued_before:
                latest[event.key] = event.issued_before
        self._latest = latest

    def __len__(self) -> int:
        return len(self._latest)

    def revokes(self, payload: RevocableToken) -> bool:
        latest = self._latest
        if not latest:
            return False
        issued = payload.issued_at
        for key in payload.revocation_keys:
            before = latest.get(key)
            if before is not None and issued <= before:
                return True
        return False
