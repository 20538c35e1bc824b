"""Flavor queries on the API database."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from corral.compute.db import api_tables as t
from corral.compute.db.api_queries import utcnow

SORT_KEYS = {
    "created_at", "description", "disabled", "ephemeral_gb", "flavorid", "id", "is_public",
    "memory_mb", "name", "root_gb", "rxtx_factor", "swap", "updated_at", "vcpu_weight", "vcpus",
}


def flavor_dict(row: Any, extra_specs: dict[str, str] | None = None) -> dict[str, Any]:
    flavor = {column: getattr(row, column) for column in t.flavors.c.keys()}
    flavor["extra_specs"] = extra_specs or {}
    return flavor


def get_flavor(conn: Connection, flavorid: str, *, with_specs: bool = True) -> dict[str, Any] | None:
    # SELECT * FROM flavors WHERE flavorid = :flavorid
    row = conn.execute(sa.select(t.flavors).where(t.flavors.c.flavorid == flavorid)).first()
    if row is None:
        return None
    return flavor_dict(row, extra_specs(conn, row.id) if with_specs else None)


def extra_specs(conn: Connection, flavor_id: int) -> dict[str, str]:
    # SELECT key, value FROM flavor_extra_specs WHERE flavor_id = :flavor_id ORDER BY key
    rows = conn.execute(
        sa.select(t.flavor_extra_specs.c.key, t.flavor_extra_specs.c.value)
        .where(t.flavor_extra_specs.c.flavor_id == flavor_id)
        .order_by(t.flavor_extra_specs.c.key)
    )
    return {row.key: row.value for row in rows}


def extra_specs_for(conn: Connection, flavor_ids: list[int]) -> dict[int, dict[str, str]]:
    # SELECT flavor_id, key, value FROM flavor_extra_specs WHERE flavor_id IN (...) ORDER BY key
    specs: dict[int, dict[str, str]] = {ident: {} for ident in flavor_ids}
    if flavor_ids:
        rows = conn.execute(
            sa.select(t.flavor_extra_specs)
            .where(t.flavor_extra_specs.c.flavor_id.in_(flavor_ids))
            .order_by(t.flavor_extra_specs.c.key)
        )
        for row in rows:
            specs[row.flavor_id][row.key] = row.value
    return specs


def list_flavors(
    conn: Connection,
    *,
    project_id: str | None,
    is_public: bool | None,
    min_ram: int | None,
    min_disk: int | None,
    sort_key: str,
    sort_dir: str,
    limit: int,
    marker_row: Any | None,
) -> list[dict[str, Any]]:
    """Flavors visible with the given filters, paged after ``marker_row``.

    ``is_public=None`` means public ones plus those ``project_id`` was
    given access to (all of them when ``project_id`` is None: admins).
    """
    # SELECT * FROM flavors WHERE disabled = false [AND is_public ... OR id IN (SELECT flavor_id
    #   FROM flavor_projects WHERE project_id = :p)] [AND memory_mb >= :min_ram] [AND root_gb >= :min_disk]
    #   [AND (sort_key, id) after the marker] ORDER BY sort_key, id LIMIT :limit
    f = t.flavors
    query = sa.select(f).where(f.c.disabled.is_(False))
    accessible = sa.select(t.flavor_projects.c.flavor_id).where(t.flavor_projects.c.project_id == project_id)
    if is_public is True:
        query = query.where(f.c.is_public.is_(True))
    elif is_public is False:
        if project_id is not None:
            query = query.where(f.c.is_public.is_(False), f.c.id.in_(accessible))
        else:
            query = query.where(f.c.is_public.is_(False))
    elif project_id is not None:
        query = query.where(sa.or_(f.c.is_public.is_(True), f.c.id.in_(accessible)))
    if min_ram is not None:
        query = query.where(f.c.memory_mb >= min_ram)
    if min_disk is not None:
        query = query.where(f.c.root_gb >= min_disk)
    column = f.c[sort_key]
    ascending = sort_dir == "asc"
    if marker_row is not None:
        value = getattr(marker_row, sort_key)
        after = (column > value) if ascending else (column < value)
        tie = (f.c.id > marker_row.id) if ascending else (f.c.id < marker_row.id)
        query = query.where(sa.or_(after, sa.and_(column == value, tie)))
    order = [column.asc(), f.c.id.asc()] if ascending else [column.desc(), f.c.id.desc()]
    rows = list(conn.execute(query.order_by(*order).limit(limit)))
    specs = extra_specs_for(conn, [row.id for row in rows])
    return [flavor_dict(row, specs[row.id]) for row in rows]


def flavor_row(conn: Connection, flavorid: str) -> Any:
    # SELECT * FROM flavors WHERE flavorid = :flavorid
    return conn.execute(sa.select(t.flavors).where(t.flavors.c.flavorid == flavorid)).first()


def name_taken(conn: Connection, name: str) -> bool:
    # SELECT 1 FROM flavors WHERE name = :name
    return conn.execute(sa.select(sa.literal(1)).where(t.flavors.c.name == name)).first() is not None


def create_flavor(conn: Connection, values: dict[str, Any]) -> int:
    # INSERT INTO flavors (...) VALUES (...)
    result = conn.execute(t.flavors.insert().values(created_at=utcnow(), **values))
    return int(result.inserted_primary_key[0])


def update_flavor(conn: Connection, flavor_id: int, **values: Any) -> None:
    # UPDATE flavors SET ... WHERE id = :flavor_id
    conn.execute(t.flavors.update().where(t.flavors.c.id == flavor_id).values(updated_at=utcnow(), **values))


def delete_flavor(conn: Connection, flavor_id: int) -> None:
    # DELETE FROM flavor_extra_specs WHERE flavor_id = :id; DELETE FROM flavor_projects ...;
    # DELETE FROM flavors WHERE id = :id
    conn.execute(t.flavor_extra_specs.delete().where(t.flavor_extra_specs.c.flavor_id == flavor_id))
    conn.execute(t.flavor_projects.delete().where(t.flavor_projects.c.flavor_id == flavor_id))
    conn.execute(t.flavors.delete().where(t.flavors.c.id == flavor_id))


def set_extra_specs(conn: Connection, flavor_id: int, specs: dict[str, str]) -> None:
    # UPDATE flavor_extra_specs SET value = :v WHERE flavor_id = :id AND key = :k
    # (INSERT when no row was updated), per key
    e = t.flavor_extra_specs
    now = utcnow()
    for key, value in specs.items():
        updated = conn.execute(
            e.update().where(e.c.flavor_id == flavor_id, e.c.key == key).values(value=value, updated_at=now)
        ).rowcount
        if not updated:
            conn.execute(e.insert().values(flavor_id=flavor_id, key=key, value=value, created_at=now))


def delete_extra_spec(conn: Connection, flavor_id: int, key: str) -> int:
    # DELETE FROM flavor_extra_specs WHERE flavor_id = :id AND key = :key
    e = t.flavor_extra_specs
    return conn.execute(e.delete().where(e.c.flavor_id == flavor_id, e.c.key == key)).rowcount


def add_access(conn: Connection, flavor_id: int, project_id: str) -> None:
    # INSERT INTO flavor_projects (flavor_id, project_id, created_at) VALUES (...)
    conn.execute(t.flavor_projects.insert().values(flavor_id=flavor_id, project_id=project_id, created_at=utcnow()))


def has_access(conn: Connection, flavor_id: int, project_id: str) -> bool:
    # SELECT 1 FROM flavor_projects WHERE flavor_id = :id AND project_id = :p
    fp = t.flavor_projects
    query = sa.select(sa.literal(1)).where(fp.c.flavor_id == flavor_id, fp.c.project_id == project_id)
    return conn.execute(query).first() is not None
