"""Look-ups and write helpers the identity handlers share."""

from __future__ import annotations

import uuid
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from corral.core.db import is_duplicate
from corral.core.errors import NotFound
from corral.identity.api.errors import conflict, not_found
from corral.identity.api.state import IdentityState
from corral.identity.db import resources, revocations
from corral.identity.db import roles as role_db


def new_id() -> str:
    return uuid.uuid4().hex


def write(state: IdentityState, kind: str, duplicate: str, work: Any, *args: Any) -> Any:
    """``state.db.write(work, *args)``, a unique-key violation becoming Keystone's 409."""
    try:
        return state.db.write(work, *args)
    except sa.exc.IntegrityError as error:
        if is_duplicate(error):
            raise conflict(kind, duplicate) from None
        raise


def revoke(state: IdentityState, conn: Connection, events: list[tuple[str, str, str | None]]) -> None:
    """Record revocation events in the transaction of the change that causes them."""
    revocations.record(conn, events, state.token_lifetime)
    state.validator.revocations.expire()


def domain_or_404(conn: Connection, domain_id: str) -> dict[str, Any]:
    row = resources.get_domain(conn, domain_id)
    if row is None:
        raise not_found("domain", domain_id)
    return row


def project_or_404(conn: Connection, project_id: str) -> dict[str, Any]:
    row = resources.get_project(conn, project_id)
    if row is None:
        raise not_found("project", project_id)
    return row


def user_or_404(conn: Connection, user_id: str) -> dict[str, Any]:
    row = resources.get_user(conn, user_id)
    if row is None:
        raise not_found("user", user_id)
    return row


def role_or_404(conn: Connection, role_id: str) -> dict[str, Any]:
    row = role_db.get_role(conn, role_id)
    if row is None:
        raise not_found("role", role_id)
    return row


def assignment_not_found(role_id: str, user_id: str, target_id: str) -> NotFound:
    return NotFound(f"Could not find role assignment with role: {role_id}, user or group: {user_id}, "
                    f"project, domain, or system: {target_id}.")
