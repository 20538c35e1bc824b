"""Domains, projects and users: lookups and writes.

Rows come back as plain dicts with ``extra`` (and ``tags``) decoded; the
API layer renders them.
"""

from __future__ import annotations

import datetime
from typing import Any

import orjson
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from corral.identity.db.tables import domains, projects, users


def now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC).replace(tzinfo=None)


def _decode(row: sa.Row | None) -> dict[str, Any] | None:
    if row is None:
        return None
    item = dict(row._mapping)
    for column in ("extra", "tags"):
        if column in item:
            item[column] = orjson.loads(item[column])
    return item


def _encode(values: dict[str, Any]) -> dict[str, Any]:
    encoded = dict(values)
    for column in ("extra", "tags"):
        if column in encoded:
            encoded[column] = orjson.dumps(encoded[column]).decode()
    return encoded


# --------------------------------------------------------------- domains


def get_domain(conn: Connection, domain_id: str) -> dict[str, Any] | None:
    # SELECT * FROM domains WHERE id = :id
    return _decode(conn.execute(sa.select(domains).where(domains.c.id == domain_id)).first())


def get_domain_by_name(conn: Connection, name: str) -> dict[str, Any] | None:
    # SELECT * FROM domains WHERE name = :name
    return _decode(conn.execute(sa.select(domains).where(domains.c.name == name)).first())


def list_domains(conn: Connection, name: str | None = None, enabled: bool | None = None) -> list[dict[str, Any]]:
    # SELECT * FROM domains [WHERE name = :name] [AND enabled = :enabled] ORDER BY name
    query = sa.select(domains).order_by(domains.c.name)
    if name is not None:
        query = query.where(domains.c.name == name)
    if enabled is not None:
        query = query.where(domains.c.enabled == enabled)
    return [_decode(row) for row in conn.execute(query)]  # type: ignore[misc]


def count_domains(conn: Connection) -> int:
    # SELECT count(*) FROM domains
    return int(conn.execute(sa.select(sa.func.count()).select_from(domains)).scalar_one())


def insert_domain(conn: Connection, values: dict[str, Any]) -> None:
    # INSERT INTO domains (...) VALUES (...)
    conn.execute(domains.insert().values(**_encode(values), created_at=now()))


def update_domain(conn: Connection, domain_id: str, values: dict[str, Any]) -> None:
    # UPDATE domains SET ... WHERE id = :id
    conn.execute(domains.update().where(domains.c.id == domain_id).values(**_encode(values), updated_at=now()))


def delete_domain(conn: Connection, domain_id: str) -> None:
    # DELETE FROM domains WHERE id = :id
    conn.execute(domains.delete().where(domains.c.id == domain_id))


# -------------------------------------------------------------- projects


def get_project(conn: Connection, project_id: str) -> dict[str, Any] | None:
    # SELECT * FROM projects WHERE id = :id
    return _decode(conn.execute(sa.select(projects).where(projects.c.id == project_id)).first())


def get_project_by_name(conn: Connection, name: str, domain_id: str) -> dict[str, Any] | None:
    # SELECT * FROM projects WHERE name = :name AND domain_id = :domain_id
    query = sa.select(projects).where(projects.c.name == name, projects.c.domain_id == domain_id)
    return _decode(conn.execute(query).first())


def list_projects(
    conn: Connection,
    *,
    domain_id: str | None = None,
    name: str | None = None,
    enabled: bool | None = None,
    ids: list[str] | None = None,
) -> list[dict[str, Any]]:
    # SELECT * FROM projects [WHERE domain_id = :d] [AND name = :n] [AND enabled = :e]
    #   [AND id IN (:ids)] ORDER BY name
    query = sa.select(projects).order_by(projects.c.name, projects.c.id)
    if domain_id is not None:
        query = query.where(projects.c.domain_id == domain_id)
    if name is not None:
        query = query.where(projects.c.name == name)
    if enabled is not None:
        query = query.where(projects.c.enabled == enabled)
    if ids is not None:
        if not ids:
            return []
        query = query.where(projects.c.id.in_(ids))
    return [_decode(row) for row in conn.execute(query)]  # type: ignore[misc]


def domain_has_projects_or_users(conn: Connection, domain_id: str) -> bool:
    # SELECT 1 FROM projects WHERE domain_id = :d LIMIT 1; the same on users
    for table in (projects, users):
        if conn.execute(sa.select(sa.literal(1)).where(table.c.domain_id == domain_id).limit(1)).first():
            return True
    return False


def insert_project(conn: Connection, values: dict[str, Any]) -> None:
    # INSERT INTO projects (...) VALUES (...)
    conn.execute(projects.insert().values(**_encode(values), created_at=now()))


def update_project(conn: Connection, project_id: str, values: dict[str, Any]) -> None:
    # UPDATE projects SET ... WHERE id = :id
    conn.execute(projects.update().where(projects.c.id == project_id).values(**_encode(values), updated_at=now()))


def delete_project(conn: Connection, project_id: str) -> None:
    # DELETE FROM projects WHERE id = :id
    conn.execute(projects.delete().where(projects.c.id == project_id))


# ----------------------------------------------------------------- users


def get_user(conn: Connection, user_id: str) -> dict[str, Any] | None:
    # SELECT * FROM users WHERE id = :id
    return _decode(conn.execute(sa.select(users).where(users.c.id == user_id)).first())


def get_user_by_name(conn: Connection, name: str, domain_id: str) -> dict[str, Any] | None:
    # SELECT * FROM users WHERE name = :name AND domain_id = :domain_id
    query = sa.select(users).where(users.c.name == name, users.c.domain_id == domain_id)
    return _decode(conn.execute(query).first())


def list_users(
    conn: Connection, *, domain_id: str | None = None, name: str | None = None, enabled: bool | None = None
) -> list[dict[str, Any]]:
    # SELECT * FROM users [WHERE domain_id = :d] [AND name = :n] [AND enabled = :e] ORDER BY name
    query = sa.select(users).order_by(users.c.name, users.c.id)
    if domain_id is not None:
        query = query.where(users.c.domain_id == domain_id)
    if name is not None:
        query = query.where(users.c.name == name)
    if enabled is not None:
        query = query.where(users.c.enabled == enabled)
    return [_decode(row) for row in conn.execute(query)]  # type: ignore[misc]


def insert_user(conn: Connection, values: dict[str, Any]) -> None:
    # INSERT INTO users (...) VALUES (...)
    conn.execute(users.insert().values(**_encode(values), created_at=now()))


def update_user(conn: Connection, user_id: str, values: dict[str, Any]) -> None:
    # UPDATE users SET ... WHERE id = :id
    conn.execute(users.update().where(users.c.id == user_id).values(**_encode(values), updated_at=now()))


def delete_user(conn: Connection, user_id: str) -> None:
    # DELETE FROM users WHERE id = :id
    conn.execute(users.delete().where(users.c.id == user_id))


def clear_default_project(conn: Connection, project_id: str) -> None:
    # UPDATE users SET default_project_id = NULL WHERE default_project_id = :project_id
    conn.execute(users.update().where(users.c.default_project_id == project_id).values(default_project_id=None))
