"""Inventory rows and per-provider usage."""

from __future__ import annotations

import datetime
from collections.abc import Mapping

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from corral.placement.db import topology
from corral.placement.db.tables import allocations, inventories, resource_classes
from corral.placement.domain.inventory import FIELDS, Inventory

_inv = inventories


def for_provider(conn: Connection, provider_id: int) -> dict[str, Inventory]:
    """resource class name -> inventory."""
    # SELECT rc.name, inv.total, inv.reserved, inv.min_unit, inv.max_unit, inv.step_size, inv.allocation_ratio
    # FROM inventories inv JOIN resource_classes rc ON rc.id = inv.resource_class_id
    # WHERE inv.resource_provider_id = :id ORDER BY rc.id
    query = (
        sa.select(resource_classes.c.name, *(_inv.c[name] for name in FIELDS))
        .select_from(_inv.join(resource_classes, resource_classes.c.id == _inv.c.resource_class_id))
        .where(_inv.c.resource_provider_id == provider_id)
        .order_by(resource_classes.c.id)
    )
    return {row[0]: Inventory(*row[1:]) for row in conn.execute(query)}


def usage(conn: Connection, provider_id: int) -> dict[str, int]:
    """resource class name -> amount allocated on the provider, in resource class id order."""
    # SELECT rc.name, SUM(a.used) FROM allocations a JOIN resource_classes rc ON rc.id = a.resource_class_id
    # WHERE a.resource_provider_id = :id GROUP BY rc.id, rc.name ORDER BY rc.id
    query = (
        sa.select(resource_classes.c.name, sa.func.sum(allocations.c.used))
        .select_from(allocations.join(resource_classes, resource_classes.c.id == allocations.c.resource_class_id))
        .where(allocations.c.resource_provider_id == provider_id)
        .group_by(resource_classes.c.id, resource_classes.c.name)
        .order_by(resource_classes.c.id)
    )
    return {name: int(total) for name, total in conn.execute(query)}


def replace(
    conn: Connection,
    provider_id: int,
    new: Mapping[str, Inventory],
    class_ids: Mapping[str, int],
    now: datetime.datetime,
) -> None:
    """Make the provider's inventories exactly ``new`` (update in place, add, remove)."""
    # SELECT resource_class_id FROM inventories WHERE resource_provider_id = :id
    existing = set(
        conn.execute(sa.select(_inv.c.resource_class_id).where(_inv.c.resource_provider_id == provider_id)).scalars()
    )
    wanted = {class_ids[name]: inventory for name, inventory in new.items()}
    gone = existing - set(wanted)
    if gone:
        # DELETE FROM inventories WHERE resource_provider_id = :id AND resource_class_id IN (:gone)
        conn.execute(
            _inv.delete().where(_inv.c.resource_provider_id == provider_id, _inv.c.resource_class_id.in_(sorted(gone)))
        )
    for class_id, inventory in sorted(wanted.items()):
        values = inventory.as_dict()
        if class_id in existing:
            # UPDATE inventories SET total = :total, ... WHERE resource_provider_id = :id AND resource_class_id = :rc
            conn.execute(
                _inv.update()
                .where(_inv.c.resource_provider_id == provider_id, _inv.c.resource_class_id == class_id)
                .values(**values, updated_at=now)
            )
        else:
            # INSERT INTO inventories (resource_provider_id, resource_class_id, total, ...) VALUES (...)
            conn.execute(
                _inv.insert().values(
                    resource_provider_id=provider_id, resource_class_id=class_id, **values, created_at=now
                )
            )
    topology.changed(conn, [provider_id])
