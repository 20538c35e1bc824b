"""Aggregates that resource providers belong to."""

from __future__ import annotations

import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from corral.core.db import is_duplicate
from corral.placement.db import topology
from corral.placement.db.tables import placement_aggregates, resource_provider_aggregates

_rpa = resource_provider_aggregates
_agg = placement_aggregates


def for_provider(conn: Connection, provider_id: int) -> list[str]:
    # SELECT agg.uuid FROM resource_provider_aggregates rpa JOIN placement_aggregates agg ON agg.id = rpa.aggregate_id
    # WHERE rpa.resource_provider_id = :id ORDER BY agg.uuid
    query = (
        sa.select(_agg.c.uuid)
        .select_from(_rpa.join(_agg, _agg.c.id == _rpa.c.aggregate_id))
        .where(_rpa.c.resource_provider_id == provider_id)
        .order_by(_agg.c.uuid)
    )
    return list(conn.execute(query).scalars())


def ensure(conn: Connection, uuids: list[str], now: datetime.datetime) -> dict[str, int]:
    """uuid -> id for every aggregate in ``uuids``, creating the missing ones."""
    if not uuids:
        return {}
    # SELECT uuid, id FROM placement_aggregates WHERE uuid IN (:uuids)
    found = {row.uuid: row.id for row in conn.execute(sa.select(_agg.c.uuid, _agg.c.id).where(_agg.c.uuid.in_(uuids)))}
    for uuid in sorted(set(uuids) - set(found)):
        try:
            with conn.begin_nested():
                # INSERT INTO placement_aggregates (uuid, created_at) VALUES (:uuid, :now)
                found[uuid] = conn.execute(_agg.insert().values(uuid=uuid, created_at=now)).inserted_primary_key[0]
        except sa.exc.IntegrityError as error:
            if not is_duplicate(error):
                raise
            # Created concurrently by another request.
            found[uuid] = conn.execute(sa.select(_agg.c.id).where(_agg.c.uuid == uuid)).scalar_one()
    return found


def replace(conn: Connection, provider_id: int, uuids: list[str], now: datetime.datetime) -> None:
    ids = ensure(conn, uuids, now)
    # DELETE FROM resource_provider_aggregates WHERE resource_provider_id = :id
    conn.execute(_rpa.delete().where(_rpa.c.resource_provider_id == provider_id))
    if ids:
        # INSERT INTO resource_provider_aggregates (resource_provider_id, aggregate_id, created_at) VALUES ...
        conn.execute(
            _rpa.insert(),
            [{"resource_provider_id": provider_id, "aggregate_id": ident, "created_at": now} for ident in sorted(set(ids.values()))],
        )
    topology.changed(conn, [provider_id])
