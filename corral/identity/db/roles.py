"""Roles, role implications and role assignments."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from corral.identity.db.resources import now
from corral.identity.db.tables import implied_roles, role_assignments, roles

PROJECT = "project"
DOMAIN = "domain"
SYSTEM = "system"
SYSTEM_ID = "all"


def _role(row: sa.Row | None) -> dict[str, Any] | None:
    if row is None:
        return None
    item = dict(row._mapping)
    item["options"] = orjson.loads(item["options"])
    return item


def get_role(conn: Connection, role_id: str) -> dict[str, Any] | None:
    # SELECT * FROM roles WHERE id = :id
    return _role(conn.execute(sa.select(roles).where(roles.c.id == role_id)).first())


def get_role_by_name(conn: Connection, name: str) -> dict[str, Any] | None:
    # SELECT * FROM roles WHERE name = :name
    return _role(conn.execute(sa.select(roles).where(roles.c.name == name)).first())


def list_roles(conn: Connection, name: str | None = None) -> list[dict[str, Any]]:
    # SELECT * FROM roles [WHERE name = :name] ORDER BY name
    query = sa.select(roles).order_by(roles.c.name)
    if name is not None:
        query = query.where(roles.c.name == name)
    return [_role(row) for row in conn.execute(query)]  # type: ignore[misc]


def role_names(conn: Connection) -> dict[str, str]:
    # SELECT id, name FROM roles
    return {row.id: row.name for row in conn.execute(sa.select(roles.c.id, roles.c.name))}


def insert_role(conn: Connection, values: dict[str, Any]) -> None:
    # INSERT INTO roles (...) VALUES (...)
    conn.execute(roles.insert().values(**{**values, "options": orjson.dumps(values.get("options", {})).decode()},
                                       created_at=now()))


def update_role(conn: Connection, role_id: str, values: dict[str, Any]) -> None:
    # UPDATE roles SET ... WHERE id = :id
    if "options" in values:
        values = {**values, "options": orjson.dumps(values["options"]).decode()}
    conn.execute(roles.update().where(roles.c.id == role_id).values(**values, updated_at=now()))


def delete_role(conn: Connection, role_id: str) -> None:
    # DELETE FROM implied_roles WHERE prior_role_id = :id OR implied_role_id = :id;
    # DELETE FROM role_assignments WHERE role_id = :id; DELETE FROM roles WHERE id = :id
    # (MySQL does not cascade reliably inside one statement order, so children go first.)
    conn.execute(implied_roles.delete().where(
        sa.or_(implied_roles.c.prior_role_id == role_id, implied_roles.c.implied_role_id == role_id)))
    conn.execute(role_assignments.delete().where(role_assignments.c.role_id == role_id))
    conn.execute(roles.delete().where(roles.c.id == role_id))


# ---------------------------------------------------------- implications


def implications(conn: Connection) -> dict[str, list[str]]:
    """prior role id -> the role ids it implies directly."""
    # SELECT prior_role_id, implied_role_id FROM implied_roles ORDER BY prior_role_id, implied_role_id
    result: dict[str, list[str]] = {}
    query = sa.select(implied_roles).order_by(implied_roles.c.prior_role_id, implied_roles.c.implied_role_id)
    for row in conn.execute(query):
        result.setdefault(row.prior_role_id, []).append(row.implied_role_id)
    return result


def add_implication(conn: Connection, prior: str, implied: str) -> None:
    # INSERT INTO implied_roles (prior_role_id, implied_role_id) VALUES (:prior, :implied)
    conn.execute(implied_roles.insert().values(prior_role_id=prior, implied_role_id=implied))


def delete_implication(conn: Connection, prior: str, implied: str) -> int:
    # DELETE FROM implied_roles WHERE prior_role_id = :prior AND implied_role_id = :implied
    result = conn.execute(implied_roles.delete().where(
        implied_roles.c.prior_role_id == prior, implied_roles.c.implied_role_id == implied))
    return result.rowcount


# ----------------------------------------------------------- assignments


def _assignment_where(target_type: str, target_id: str, user_id: str, role_id: str) -> list[Any]:
    ra = role_assignments.c
    return [ra.target_type == target_type, ra.target_id == target_id, ra.user_id == user_id, ra.role_id == role_id]


def has_assignment(conn: Connection, target_type: str, target_id: str, user_id: str, role_id: str) -> bool:
    # SELECT 1 FROM role_assignments WHERE target_type = :t AND target_id = :tid AND user_id = :u AND role_id = :r
    query = sa.select(sa.literal(1)).where(*_assignment_where(target_type, target_id, user_id, role_id))
    return conn.execute(query).first() is not None


def add_assignment(conn: Connection, target_type: str, target_id: str, user_id: str, role_id: str) -> bool:
    """Grant a role; False when the user already had it there."""
    if has_assignment(conn, target_type, target_id, user_id, role_id):
        return False
    # INSERT INTO role_assignments (target_type, target_id, user_id, role_id) VALUES (...)
    conn.execute(role_assignments.insert().values(
        target_type=target_type, target_id=target_id, user_id=user_id, role_id=role_id))
    return True


def delete_assignment(conn: Connection, target_type: str, target_id: str, user_id: str, role_id: str) -> bool:
    # DELETE FROM role_assignments WHERE target_type = :t AND target_id = :tid AND user_id = :u AND role_id = :r
    result = conn.execute(role_assignments.delete().where(
        *_assignment_where(target_type, target_id, user_id, role_id)))
    return result.rowcount > 0


def delete_target_assignments(conn: Connection, target_type: str, target_id: str) -> list[str]:
    """Remove every assignment on a project or domain; the users who had one."""
    ra = role_assignments.c
    # SELECT DISTINCT user_id FROM role_assignments WHERE target_type = :t AND target_id = :tid
    holders = [row.user_id for row in conn.execute(
        sa.select(ra.user_id).distinct().where(ra.target_type == target_type, ra.target_id == target_id))]
    # DELETE FROM role_assignments WHERE target_type = :t AND target_id = :tid
    conn.execute(role_assignments.delete().where(ra.target_type == target_type, ra.target_id == target_id))
    return holders


def direct_roles(conn: Connection, user_id: str, target_type: str, target_id: str) -> list[str]:
    """Role ids assigned to a user on one target (no implied roles)."""
    ra = role_assignments.c
    # SELECT role_id FROM role_assignments WHERE user_id = :u AND target_type = :t AND target_id = :tid
    query = sa.select(ra.role_id).where(ra.user_id == user_id, ra.target_type == target_type,
                                        ra.target_id == target_id).order_by(ra.role_id)
    return [row.role_id for row in conn.execute(query)]


def targets_of_user(conn: Connection, user_id: str, target_type: str) -> list[str]:
    ra = role_assignments.c
    # SELECT DISTINCT target_id FROM role_assignments WHERE user_id = :u AND target_type = :t
    query = sa.select(ra.target_id).distinct().where(ra.user_id == user_id, ra.target_type == target_type)
    return sorted(row.target_id for row in conn.execute(query))


def list_assignments(
    conn: Connection,
    *,
    user_id: str | None = None,
    role_ids: Iterable[str] | None = None,
    target_type: str | None = None,
    target_id: str | None = None,
) -> list[dict[str, Any]]:
    ra = role_assignments.c
    # SELECT * FROM role_assignments [WHERE user_id = :u] [AND role_id IN (:r)]
    #   [AND target_type = :t] [AND target_id = :tid] ORDER BY target_type, target_id, user_id, role_id
    query = sa.select(role_assignments).order_by(ra.target_type, ra.target_id, ra.user_id, ra.role_id)
    if user_id is not None:
        query = query.where(ra.user_id == user_id)
    if role_ids is not None:
        query = query.where(ra.role_id.in_(list(role_ids)))
    if target_type is not None:
        query = query.where(ra.target_type == target_type)
    if target_id is not None:
        query = query.where(ra.target_id == target_id)
    return [dict(row._mapping) for row in conn.execute(query)]
