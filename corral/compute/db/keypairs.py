"""Key pair queries on the API database."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from corral.compute.db import api_tables as t
from corral.compute.db.api_queries import utcnow


def _dict(row: Any) -> dict[str, Any]:
    return dict(row._mapping)


def get_keypair(conn: Connection, user_id: str, name: str) -> dict[str, Any] | None:
    # SELECT * FROM key_pairs WHERE user_id = :user_id AND name = :name
    k = t.key_pairs
    row = conn.execute(sa.select(k).where(k.c.user_id == user_id, k.c.name == name)).first()
    return None if row is None else _dict(row)


def list_keypairs(conn: Connection, user_id: str, *, limit: int | None = None,
                  after_name: str | None = None) -> list[dict[str, Any]]:
    """The user's key pairs by name, those after ``after_name`` only when given."""
    # SELECT * FROM key_pairs WHERE user_id = :user_id [AND name > :after_name] ORDER BY name, id [LIMIT :limit]
    k = t.key_pairs
    query = sa.select(k).where(k.c.user_id == user_id)
    if after_name is not None:
        query = query.where(k.c.name > after_name)
    query = query.order_by(k.c.name, k.c.id)
    if limit is not None:
        query = query.limit(limit)
    return [_dict(row) for row in conn.execute(query)]


def count_keypairs(conn: Connection, user_id: str) -> int:
    # SELECT count(*) FROM key_pairs WHERE user_id = :user_id
    k = t.key_pairs
    return int(conn.execute(sa.select(sa.func.count()).where(k.c.user_id == user_id)).scalar_one())


def create_keypair(conn: Connection, *, user_id: str, name: str, fingerprint: str, public_key: str,
                   key_type: str) -> dict[str, Any]:
    # INSERT INTO key_pairs (user_id, name, fingerprint, public_key, type, created_at) VALUES (...)
    conn.execute(t.key_pairs.insert().values(
        user_id=user_id, name=name, fingerprint=fingerprint, public_key=public_key, type=key_type,
        created_at=utcnow(),
    ))
    created = get_keypair(conn, user_id, name)
    assert created is not None
    return created


def delete_keypair(conn: Connection, user_id: str, name: str) -> int:
    # DELETE FROM key_pairs WHERE user_id = :user_id AND name = :name
    k = t.key_pairs
    return conn.execute(k.delete().where(k.c.user_id == user_id, k.c.name == name)).rowcount
