"""Traits on resource providers."""

from __future__ import annotations

import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from corral.placement.db import topology
from corral.placement.db.tables import resource_provider_traits, traits

_rpt = resource_provider_traits


def trait_names(conn: Connection, provider_id: int) -> list[str]:
    """The provider's traits in the order they were created (upstream's order: by id)."""
    # SELECT t.name FROM resource_provider_traits rpt JOIN traits t ON t.id = rpt.trait_id
    # WHERE rpt.resource_provider_id = :id ORDER BY t.id
    query = (
        sa.select(traits.c.name)
        .select_from(_rpt.join(traits, traits.c.id == _rpt.c.trait_id))
        .where(_rpt.c.resource_provider_id == provider_id)
        .order_by(traits.c.id)
    )
    return list(conn.execute(query).scalars())


def replace(conn: Connection, provider_id: int, trait_ids: list[int], now: datetime.datetime) -> None:
    # DELETE FROM resource_provider_traits WHERE resource_provider_id = :id
    conn.execute(_rpt.delete().where(_rpt.c.resource_provider_id == provider_id))
    if trait_ids:
        # INSERT INTO resource_provider_traits (resource_provider_id, trait_id, created_at) VALUES ...
        conn.execute(
            _rpt.insert(),
            [{"resource_provider_id": provider_id, "trait_id": ident, "created_at": now} for ident in sorted(set(trait_ids))],
        )
    topology.changed(conn, [provider_id])


def in_use(conn: Connection, trait_id: int) -> bool:
    # SELECT 1 FROM resource_provider_traits WHERE trait_id = :id LIMIT 1
    return conn.execute(sa.select(_rpt.c.trait_id).where(_rpt.c.trait_id == trait_id).limit(1)).first() is not None


def list_traits(conn: Connection, *, names: list[str] | None, prefix: str | None, associated: bool | None) -> list[str]:
    """Trait names in the order they were created (upstream's order: by id)."""
    # SELECT name FROM traits WHERE name IN (:names) AND name LIKE :prefix || '%'
    #   AND [NOT] EXISTS (SELECT 1 FROM resource_provider_traits WHERE trait_id = traits.id)
    # ORDER BY id
    query = sa.select(traits.c.name)
    if names is not None:
        query = query.where(traits.c.name.in_(names))
    if prefix is not None:
        query = query.where(traits.c.name.startswith(prefix, autoescape=True))
    if associated is not None:
        used = sa.exists().where(_rpt.c.trait_id == traits.c.id)
        query = query.where(used if associated else ~used)
    return list(conn.execute(query.order_by(traits.c.id)).scalars())
