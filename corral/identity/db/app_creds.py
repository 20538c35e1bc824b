"""Application credentials and the roles each one carries."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from corral.identity.db.resources import now
from corral.identity.db.tables import app_credential_roles, application_credentials

_ac = application_credentials.c


def _with_roles(conn: Connection, rows: list[sa.Row]) -> list[dict[str, Any]]:
    items = [dict(row._mapping) for row in rows]
    if not items:
        return []
    # SELECT credential_id, role_id FROM app_credential_roles WHERE credential_id IN (:ids)
    query = sa.select(app_credential_roles).where(
        app_credential_roles.c.credential_id.in_([item["id"] for item in items])
    ).order_by(app_credential_roles.c.role_id)
    role_ids: dict[str, list[str]] = {}
    for row in conn.execute(query):
        role_ids.setdefault(row.credential_id, []).append(row.role_id)
    for item in items:
        item["role_ids"] = role_ids.get(item["id"], [])
    return items


def get(conn: Connection, credential_id: str) -> dict[str, Any] | None:
    # SELECT * FROM application_credentials WHERE id = :id
    found = _with_roles(conn, list(conn.execute(sa.select(application_credentials).where(_ac.id == credential_id))))
    return found[0] if found else None


def get_by_name(conn: Connection, user_id: str, name: str) -> dict[str, Any] | None:
    # SELECT * FROM application_credentials WHERE user_id = :u AND name = :name
    query = sa.select(application_credentials).where(_ac.user_id == user_id, _ac.name == name)
    found = _with_roles(conn, list(conn.execute(query)))
    return found[0] if found else None


def list_for_user(conn: Connection, user_id: str, name: str | None = None) -> list[dict[str, Any]]:
    # SELECT * FROM application_credentials WHERE user_id = :u [AND name = :name] ORDER BY created_at, id
    query = sa.select(application_credentials).where(_ac.user_id == user_id).order_by(_ac.created_at, _ac.id)
    if name is not None:
        query = query.where(_ac.name == name)
    return _with_roles(conn, list(conn.execute(query)))


def insert(conn: Connection, values: dict[str, Any], role_ids: list[str]) -> None:
    # INSERT INTO application_credentials (...) VALUES (...);
    # INSERT INTO app_credential_roles (credential_id, role_id) VALUES (...), ...
    conn.execute(application_credentials.insert().values(**values, created_at=now()))
    if role_ids:
        conn.execute(app_credential_roles.insert(),
                     [{"credential_id": values["id"], "role_id": role_id} for role_id in role_ids])


def delete(conn: Connection, credential_id: str) -> bool:
    # DELETE FROM app_credential_roles WHERE credential_id = :id;
    # DELETE FROM application_credentials WHERE id = :id
    conn.execute(app_credential_roles.delete().where(app_credential_roles.c.credential_id == credential_id))
    return conn.execute(application_credentials.delete().where(_ac.id == credential_id)).rowcount > 0


def ids_for_user(conn: Connection, user_id: str) -> list[str]:
    # SELECT id FROM application_credentials WHERE user_id = :u
    return [row.id for row in conn.execute(sa.select(_ac.id).where(_ac.user_id == user_id))]
