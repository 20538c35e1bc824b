"""Node queries.  A node is a plain dict keyed by column name, JSON decoded.

Every function takes an open connection; callers decide the transaction
(``Database.write`` / ``Database.read``).
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from corral.baremetal.db import json_columns
from corral.baremetal.db.tables import (
    allocations,
    bios_settings,
    chassis,
    firmware_components,
    node_history,
    node_inventory,
    node_traits,
    nodes,
)

JSON_FIELDS = (
    "driver_info",
    "driver_internal_info",
    "properties",
    "extra",
    "instance_info",
    "clean_step",
    "deploy_step",
    "raid_config",
    "target_raid_config",
    "network_data",
    "service_step",
)
COLUMNS = tuple(column.name for column in nodes.columns)


def utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC).replace(tzinfo=None)


# Every JSON field of a node reads as {} when NULL.
JSON_DEFAULTS: dict[str, Any] = {name: {} for name in JSON_FIELDS}


def encode(values: Mapping[str, Any]) -> dict[str, Any]:
    """Column values ready for the database (JSON fields as text)."""
    return json_columns.encode(values, JSON_DEFAULTS)


def decode(row: Any) -> dict[str, Any]:
    return json_columns.decode(row, JSON_DEFAULTS)


def get(conn: Connection, *, node_id: int | None = None, uuid: str | None = None,
        name: str | None = None) -> dict[str, Any] | None:
    # SELECT * FROM nodes WHERE id = :id | uuid = :uuid | name = :name
    query = sa.select(nodes)
    if node_id is not None:
        query = query.where(nodes.c.id == node_id)
    elif uuid is not None:
        query = query.where(nodes.c.uuid == uuid)
    else:
        query = query.where(nodes.c.name == name)
    row = conn.execute(query).first()
    return decode(row) if row is not None else None


def get_shown(conn: Connection, *, uuid: str | None = None, name: str | None = None) -> dict[str, Any] | None:
    """The node with what its body shows from other tables, in one statement: ``traits``
    (sorted), ``allocation_uuid`` and ``chassis_uuid``.  (One row per trait: a node has few.)"""
    # SELECT nodes.*, allocations.uuid, chassis.uuid, node_traits.trait FROM nodes
    #   LEFT JOIN allocations ON allocations.id = nodes.allocation_id
    #   LEFT JOIN chassis ON chassis.id = nodes.chassis_id
    #   LEFT JOIN node_traits ON node_traits.node_id = nodes.id
    #   WHERE nodes.uuid = :uuid | nodes.name = :name ORDER BY node_traits.trait
    query = (
        sa.select(nodes, allocations.c.uuid.label("_allocation_uuid"), chassis.c.uuid.label("_chassis_uuid"),
                  node_traits.c.trait.label("_trait"))
        .select_from(nodes.outerjoin(allocations, allocations.c.id == nodes.c.allocation_id)
                     .outerjoin(chassis, chassis.c.id == nodes.c.chassis_id)
                     .outerjoin(node_traits, node_traits.c.node_id == nodes.c.id))
        .where(nodes.c.uuid == uuid if uuid is not None else nodes.c.name == name)
        .order_by(node_traits.c.trait)
    )
    rows = conn.execute(query).all()
    if not rows:
        return None
    node = decode(rows[0])
    node["allocation_uuid"] = node.pop("_allocation_uuid")
    node["chassis_uuid"] = node.pop("_chassis_uuid")
    node.pop("_trait")
    node["traits"] = [row._trait for row in rows if row._trait is not None]
    return node


def insert(conn: Connection, values: Mapping[str, Any]) -> int:
    # INSERT INTO nodes (...) VALUES (...)
    result = conn.execute(nodes.insert().values(**encode(values), created_at=utcnow()))
    return int(result.inserted_primary_key[0])


def update(conn: Connection, node_id: int, values: Mapping[str, Any], *,
           reservation: str | None = None, generation: int | None = None) -> bool:
    """Write ``values``; with ``reservation`` (and ``generation``), only while that
    host holds the lock (that very lock: not one it lost and took again)."""
    # UPDATE nodes SET ..., updated_at = :now WHERE id = :id [AND reservation = :host]
    #   [AND lock_generation = :generation]
    query = nodes.update().where(nodes.c.id == node_id)
    if reservation is not None:
        query = query.where(nodes.c.reservation == reservation)
    if generation is not None:
        query = query.where(nodes.c.lock_generation == generation)
    result = conn.execute(query.values(**encode(values), updated_at=utcnow()))
    return result.rowcount == 1


def delete(conn: Connection, node_id: int) -> None:
    # DELETE FROM node_traits WHERE node_id = :id; DELETE FROM bios_settings ...; DELETE FROM node_history ...;
    # DELETE FROM node_inventory ...; DELETE FROM firmware_information ...; DELETE FROM nodes ...
    conn.execute(node_traits.delete().where(node_traits.c.node_id == node_id))
    conn.execute(bios_settings.delete().where(bios_settings.c.node_id == node_id))
    for table in (node_history, node_inventory, firmware_components):
        conn.execute(table.delete().where(table.c.node_id == node_id))
    conn.execute(nodes.delete().where(nodes.c.id == node_id))


# ------------------------------------------------------------- listing

SORT_KEYS = frozenset(
    {"id", "uuid", "name", "created_at", "updated_at", "provision_state", "power_state", "driver",
     "resource_class", "instance_uuid", "maintenance", "provision_updated_at", "conductor_group",
     "owner", "lessee", "description", "target_provision_state", "target_power_state", "reservation",
     "shard", "parent_node", "instance_name", "retired"}
)


def count_by_provision_state(conn: Connection) -> dict[str, int]:
    """How many nodes are in each provision state (for the metrics: one grouped query)."""
    # SELECT provision_state, count(*) FROM nodes GROUP BY provision_state
    query = sa.select(nodes.c.provision_state, sa.func.count()).group_by(nodes.c.provision_state)
    return {state: count for state, count in conn.execute(query) if state is not None}


def list_nodes(
    conn: Connection,
    filters: Mapping[str, Any],
    *,
    sort_key: str = "id",
    sort_dir: str = "asc",
    limit: int | None = None,
    marker: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    # SELECT * FROM nodes WHERE <filters> [AND (sort_key, id) > marker]
    #   ORDER BY sort_key, id LIMIT :limit
    query = sa.select(nodes)
    for condition in _conditions(filters):
        query = query.where(condition)
    column = nodes.c[sort_key]
    ascending = sort_dir == "asc"
    if marker is not None:
        query = query.where(_after(column, marker, ascending))
    order = [column.asc() if ascending else column.desc()]
    if sort_key != "id":
        order.append(nodes.c.id.asc() if ascending else nodes.c.id.desc())
    query = query.order_by(*order)
    if limit is not None:
        query = query.limit(limit)
    return [decode(row) for row in conn.execute(query)]


def _after(column: sa.Column, marker: Mapping[str, Any], ascending: bool) -> Any:
    """Rows strictly after the marker in (sort_key, id) order; NULLs sort first."""
    value, marker_id = marker[column.name], marker["id"]
    if column.name == "id":
        return nodes.c.id > marker_id if ascending else nodes.c.id < marker_id
    id_after = nodes.c.id > marker_id if ascending else nodes.c.id < marker_id
    if value is None:
        if ascending:
            return sa.or_(column.is_not(None), sa.and_(column.is_(None), id_after))
        return sa.and_(column.is_(None), id_after)
    beyond = column > value if ascending else column < value
    tied = sa.and_(column == value, id_after)
    if ascending:
        return sa.or_(beyond, tied)
    return sa.or_(beyond, tied, column.is_(None))


def _conditions(filters: Mapping[str, Any]) -> Iterable[Any]:
    for key, value in filters.items():
        if key == "associated":
            yield nodes.c.instance_uuid.is_not(None) if value else nodes.c.instance_uuid.is_(None)
        elif key == "provision_state_in":
            yield nodes.c.provision_state.in_(list(value))
        elif key == "uuid_in":
            yield nodes.c.uuid.in_(list(value))
        elif key == "shard_in":
            yield nodes.c.shard.in_(list(value))
        elif key == "sharded":
            yield nodes.c.shard.is_not(None) if value else nodes.c.shard.is_(None)
        elif key == "project":
            yield sa.or_(nodes.c.owner == value, nodes.c.lessee == value)
        elif key in ("description_contains",):
            yield nodes.c.description.contains(value, autoescape=True)
        elif value is None:
            yield nodes.c[key].is_(None)
        else:
            yield nodes.c[key] == value


# -------------------------------------------------------------- traits


def traits_of(conn: Connection, node_ids: Sequence[int]) -> dict[int, list[str]]:
    # SELECT node_id, trait FROM node_traits WHERE node_id IN (:ids) ORDER BY trait
    found: dict[int, list[str]] = {node_id: [] for node_id in node_ids}
    if not node_ids:
        return found
    query = (
        sa.select(node_traits.c.node_id, node_traits.c.trait)
        .where(node_traits.c.node_id.in_(list(node_ids)))
        .order_by(node_traits.c.trait)
    )
    for node_id, trait in conn.execute(query):
        found[node_id].append(trait)
    return found


def set_traits(conn: Connection, node_id: int, traits: Iterable[str]) -> None:
    # DELETE FROM node_traits WHERE node_id = :id; INSERT INTO node_traits ...
    conn.execute(node_traits.delete().where(node_traits.c.node_id == node_id))
    rows = [{"node_id": node_id, "trait": trait, "created_at": utcnow()} for trait in sorted(set(traits))]
    if rows:
        conn.execute(node_traits.insert(), rows)


def add_trait(conn: Connection, node_id: int, trait: str) -> None:
    # INSERT INTO node_traits (node_id, trait) VALUES (...) unless present
    exists = conn.execute(
        sa.select(node_traits.c.trait).where(node_traits.c.node_id == node_id, node_traits.c.trait == trait)
    ).first()
    if exists is None:
        conn.execute(node_traits.insert().values(node_id=node_id, trait=trait, created_at=utcnow()))


def remove_trait(conn: Connection, node_id: int, trait: str) -> bool:
    # DELETE FROM node_traits WHERE node_id = :id AND trait = :trait
    result = conn.execute(
        node_traits.delete().where(node_traits.c.node_id == node_id, node_traits.c.trait == trait)
    )
    return result.rowcount > 0


# ---------------------------------------------------------------- BIOS


def bios_of(conn: Connection, node_id: int) -> list[dict[str, Any]]:
    # SELECT * FROM bios_settings WHERE node_id = :id ORDER BY name
    query = sa.select(bios_settings).where(bios_settings.c.node_id == node_id).order_by(bios_settings.c.name)
    return [dict(row._mapping) for row in conn.execute(query)]


def write_bios(conn: Connection, node_id: int, settings: Mapping[str, str], *, merge: bool) -> None:
    # DELETE FROM bios_settings WHERE node_id = :id [AND name IN (:names)]; INSERT ...
    query = bios_settings.delete().where(bios_settings.c.node_id == node_id)
    if merge:
        query = query.where(bios_settings.c.name.in_(list(settings)))
    conn.execute(query)
    now = utcnow()
    rows = [{"node_id": node_id, "name": name, "value": value, "created_at": now} for name, value in settings.items()]
    if rows:
        conn.execute(bios_settings.insert(), rows)
