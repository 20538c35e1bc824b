"""Usage sums: per provider, and per project/user (optionally by consumer type)."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from corral.placement.db.tables import (
    allocations,
    consumer_types,
    consumers,
    inventories,
    projects,
    resource_classes,
    users,
)


def for_provider(conn: Connection, provider_id: int) -> dict[str, int]:
    """rc -> used for every class the provider has inventory of (0 when unused)."""
    used = (
        sa.select(allocations.c.resource_class_id, sa.func.sum(allocations.c.used).label("used"))
        .where(allocations.c.resource_provider_id == provider_id)
        .group_by(allocations.c.resource_class_id)
        .subquery()
    )
    # SELECT rc.name, COALESCE(u.used, 0) FROM inventories inv
    # JOIN resource_classes rc ON rc.id = inv.resource_class_id
    # LEFT JOIN (SELECT resource_class_id, SUM(used) AS used FROM allocations
    #            WHERE resource_provider_id = :id GROUP BY resource_class_id) u
    #   ON u.resource_class_id = inv.resource_class_id
    # WHERE inv.resource_provider_id = :id
    query = (
        sa.select(resource_classes.c.name, sa.func.coalesce(used.c.used, 0))
        .select_from(
            inventories.join(resource_classes, resource_classes.c.id == inventories.c.resource_class_id).outerjoin(
                used, used.c.resource_class_id == inventories.c.resource_class_id
            )
        )
        .where(inventories.c.resource_provider_id == provider_id)
    )
    return {name: int(total) for name, total in conn.execute(query)}


def _owned(query: sa.Select, project_id: str, user_id: str | None) -> sa.Select:
    query = query.where(projects.c.external_id == project_id)
    if user_id is not None:
        query = query.where(users.c.external_id == user_id)
    return query


_FROM = (
    allocations.join(consumers, consumers.c.uuid == allocations.c.consumer_id)
    .join(projects, projects.c.id == consumers.c.project_id)
    .join(users, users.c.id == consumers.c.user_id)
    .join(resource_classes, resource_classes.c.id == allocations.c.resource_class_id)
    .outerjoin(consumer_types, consumer_types.c.id == consumers.c.consumer_type_id)
)


def for_project(conn: Connection, project_id: str, user_id: str | None) -> dict[str, int]:
    # SELECT rc.name, SUM(a.used) FROM allocations a JOIN consumers c ON c.uuid = a.consumer_id
    # JOIN projects p ... JOIN users u ... JOIN resource_classes rc ...
    # WHERE p.external_id = :project [AND u.external_id = :user] GROUP BY rc.name
    query = _owned(
        sa.select(resource_classes.c.name, sa.func.sum(allocations.c.used)).select_from(_FROM), project_id, user_id
    ).group_by(resource_classes.c.name)
    return {name: int(total) for name, total in conn.execute(query)}


def by_consumer_type(
    conn: Connection, project_id: str, user_id: str | None, consumer_type: str | None
) -> dict[str, dict[str, int]]:
    """type name ('unknown' for none; everything under 'all' when asked) -> {consumer_count, rc: used}."""
    type_name = sa.func.coalesce(consumer_types.c.name, "unknown")
    group = sa.literal("all") if consumer_type == "all" else type_name
    # SELECT <type>, rc.name, SUM(a.used) FROM ... WHERE ... GROUP BY <type>, rc.name
    sums = _owned(
        sa.select(group.label("type"), resource_classes.c.name, sa.func.sum(allocations.c.used)).select_from(_FROM),
        project_id, user_id,
    )
    # SELECT <type>, COUNT(DISTINCT c.id) FROM ... WHERE ... GROUP BY <type>
    counts = _owned(
        sa.select(group.label("type"), sa.func.count(sa.distinct(consumers.c.id))).select_from(_FROM),
        project_id, user_id,
    )
    if consumer_type not in (None, "all"):
        sums = sums.where(type_name == consumer_type)
        counts = counts.where(type_name == consumer_type)
    if consumer_type == "all":
        sums = sums.group_by(resource_classes.c.name)
    else:
        sums = sums.group_by(type_name, resource_classes.c.name)
        counts = counts.group_by(type_name)
    result: dict[str, dict[str, int]] = {}
    for name, count in conn.execute(counts):
        if count:
            result[name] = {"consumer_count": int(count)}
    for name, rc, total in conn.execute(sums):
        result.setdefault(name, {"consumer_count": 0})[rc] = int(total)
    return result
