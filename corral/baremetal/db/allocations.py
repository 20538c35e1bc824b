"""Allocation queries.  An allocation is a plain dict keyed by column name.

Decoded allocations also carry ``traits`` (the requested traits, in the
order given) and ``node_uuid`` (the UUID of the reserved node, or None).

Every write a conductor makes to an allocation it processes goes through a
function taking ``affinity``: the statement carries ``AND
conductor_affinity = :affinity``, so a conductor that lost the allocation
to a takeover changes nothing (the caller sees ``False`` and stops).

Every function takes an open connection; callers decide the transaction.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import orjson
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from corral.baremetal.db import json_columns
from corral.baremetal.db.nodes import utcnow
from corral.baremetal.db.tables import allocation_traits, allocations, conductors, node_traits, nodes

JSON_DEFAULTS: dict[str, Any] = {"candidate_nodes": [], "extra": {}}

SORT_KEYS = frozenset(
    {"id", "uuid", "name", "created_at", "updated_at", "state", "resource_class", "owner", "node_id"}
)


def encode(values: Mapping[str, Any]) -> dict[str, Any]:
    return json_columns.encode(values, JSON_DEFAULTS)


def _decode(row: Any) -> dict[str, Any]:
    return json_columns.decode(row, JSON_DEFAULTS)


def _select() -> sa.Select:
    # SELECT allocations.*, nodes.uuid AS node_uuid
    #   FROM allocations LEFT JOIN nodes ON nodes.id = allocations.node_id
    return sa.select(allocations, nodes.c.uuid.label("node_uuid")).select_from(
        allocations.outerjoin(nodes, nodes.c.id == allocations.c.node_id)
    )


def _with_traits(conn: Connection, rows: Iterable[Any]) -> list[dict[str, Any]]:
    found = [_decode(row) for row in rows]
    traits = traits_of(conn, [allocation["id"] for allocation in found])
    for allocation in found:
        allocation["traits"] = traits[allocation["id"]]
    return found


def get(conn: Connection, *, allocation_id: int | None = None, uuid: str | None = None,
        name: str | None = None, node_id: int | None = None) -> dict[str, Any] | None:
    # SELECT ... WHERE allocations.id = :id | uuid = :uuid | name = :name | node_id = :node_id
    query = _select()
    if allocation_id is not None:
        query = query.where(allocations.c.id == allocation_id)
    elif uuid is not None:
        query = query.where(allocations.c.uuid == uuid)
    elif name is not None:
        query = query.where(allocations.c.name == name)
    else:
        query = query.where(allocations.c.node_id == node_id)
    found = _with_traits(conn, conn.execute(query.limit(1)))
    return found[0] if found else None


def traits_of(conn: Connection, allocation_ids: Sequence[int]) -> dict[int, list[str]]:
    # SELECT allocation_id, trait FROM allocation_traits WHERE allocation_id IN (:ids)
    #   ORDER BY allocation_id, position
    found: dict[int, list[str]] = {allocation_id: [] for allocation_id in allocation_ids}
    if not allocation_ids:
        return found
    query = (
        sa.select(allocation_traits.c.allocation_id, allocation_traits.c.trait)
        .where(allocation_traits.c.allocation_id.in_(list(allocation_ids)))
        .order_by(allocation_traits.c.allocation_id, allocation_traits.c.position)
    )
    for allocation_id, trait in conn.execute(query):
        found[allocation_id].append(trait)
    return found


def insert(conn: Connection, values: Mapping[str, Any], traits: Sequence[str]) -> int:
    now = utcnow()
    # INSERT INTO allocations (...) VALUES (...)
    result = conn.execute(allocations.insert().values({"created_at": now, **encode(values)}))
    allocation_id = int(result.inserted_primary_key[0])
    rows = [
        {"allocation_id": allocation_id, "trait": trait, "position": position, "created_at": now}
        for position, trait in enumerate(dict.fromkeys(traits))
    ]
    if rows:
        # INSERT INTO allocation_traits (allocation_id, trait, position, created_at) VALUES ...
        conn.execute(allocation_traits.insert(), rows)
    return allocation_id


def update(conn: Connection, allocation_id: int, values: Mapping[str, Any], *,
           affinity: int | None = None, state: str | None = None) -> bool:
    """Write ``values``; with ``affinity``/``state``, only while the row still has them."""
    # UPDATE allocations SET ..., updated_at = :now WHERE id = :id
    #   [AND conductor_affinity = :affinity] [AND state = :state]
    query = allocations.update().where(allocations.c.id == allocation_id)
    if affinity is not None:
        query = query.where(allocations.c.conductor_affinity == affinity)
    if state is not None:
        query = query.where(allocations.c.state == state)
    result = conn.execute(query.values(**encode(values), updated_at=utcnow()))
    return result.rowcount == 1


def take_over(conn: Connection, allocation_id: int, dead: int | None, me: int) -> bool:
    """Move an allocation from a dead conductor to ``me``; False when another one was faster."""
    # UPDATE allocations SET conductor_affinity = :me, updated_at = :now
    #   WHERE id = :id AND conductor_affinity = :dead AND state = 'allocating'
    # (conductor_affinity IS NULL when the dead conductor's row was removed)
    owner = allocations.c.conductor_affinity
    query = allocations.update().where(
        allocations.c.id == allocation_id,
        owner.is_(None) if dead is None else owner == dead,
        allocations.c.state == "allocating",
    )
    result = conn.execute(query.values(conductor_affinity=me, updated_at=utcnow()))
    return result.rowcount == 1


def delete(conn: Connection, allocation_id: int, *, unreserved_only: bool = False) -> bool:
    """Remove the allocation and free the node it holds; False when nothing was removed."""
    # UPDATE nodes SET instance_uuid = NULL, allocation_id = NULL, updated_at = :now
    #   WHERE allocation_id = :id
    # DELETE FROM allocation_traits WHERE allocation_id = :id
    # DELETE FROM allocations WHERE id = :id [AND node_id IS NULL]
    if not unreserved_only:
        conn.execute(
            nodes.update()
            .where(nodes.c.allocation_id == allocation_id)
            .values(instance_uuid=None, allocation_id=None, updated_at=utcnow())
        )
    query = allocations.delete().where(allocations.c.id == allocation_id)
    if unreserved_only:
        query = query.where(allocations.c.node_id.is_(None))
    conn.execute(allocation_traits.delete().where(allocation_traits.c.allocation_id == allocation_id))
    result = conn.execute(query)
    return result.rowcount == 1


def delete_for_node(conn: Connection, node_id: int) -> int:
    """Remove the allocations holding a node (before the node goes, or on tear-down)."""
    # SELECT id FROM allocations WHERE node_id = :node_id
    ids = list(conn.execute(sa.select(allocations.c.id).where(allocations.c.node_id == node_id)).scalars())
    for allocation_id in ids:
        delete(conn, allocation_id)
    return len(ids)


def uuids_by_id(conn: Connection, allocation_ids: Iterable[int | None]) -> dict[int, str]:
    """allocations.id -> uuid, for ``allocation_uuid`` on node bodies."""
    ids = sorted({allocation_id for allocation_id in allocation_ids if allocation_id is not None})
    if not ids:
        return {}
    # SELECT id, uuid FROM allocations WHERE id IN (:ids)
    query = sa.select(allocations.c.id, allocations.c.uuid).where(allocations.c.id.in_(ids))
    return {row.id: row.uuid for row in conn.execute(query)}


# ------------------------------------------------------------- listing


def list_allocations(
    conn: Connection,
    filters: Mapping[str, Any],
    *,
    sort_key: str = "id",
    sort_dir: str = "asc",
    limit: int | None = None,
    marker: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    # SELECT ... WHERE <filters> [AND (sort_key, id) after marker] ORDER BY sort_key, id LIMIT :limit
    query = _select()
    for key, value in filters.items():
        query = query.where(allocations.c[key].is_(None) if value is None else allocations.c[key] == value)
    column = allocations.c[sort_key]
    ascending = sort_dir == "asc"
    if marker is not None:
        query = query.where(_after(column, marker, ascending))
    order = [column.asc() if ascending else column.desc()]
    if sort_key != "id":
        order.append(allocations.c.id.asc() if ascending else allocations.c.id.desc())
    query = query.order_by(*order)
    if limit is not None:
        query = query.limit(limit)
    return _with_traits(conn, conn.execute(query))


def _after(column: sa.Column, marker: Mapping[str, Any], ascending: bool) -> Any:
    """Rows strictly after the marker in (sort_key, id) order; NULLs sort first."""
    value, marker_id = marker[column.name], marker["id"]
    id_after = allocations.c.id > marker_id if ascending else allocations.c.id < marker_id
    if column.name == "id":
        return id_after
    if value is None:
        if ascending:
            return sa.or_(column.is_not(None), sa.and_(column.is_(None), id_after))
        return sa.and_(column.is_(None), id_after)
    beyond = column > value if ascending else column < value
    tied = sa.and_(column == value, id_after)
    if ascending:
        return sa.or_(beyond, tied)
    return sa.or_(beyond, tied, column.is_(None))


def in_state(conn: Connection, state: str, *, affinity: int | None = None) -> list[dict[str, Any]]:
    # SELECT ... WHERE state = :state [AND conductor_affinity = :affinity] ORDER BY id
    query = _select().where(allocations.c.state == state)
    if affinity is not None:
        query = query.where(allocations.c.conductor_affinity == affinity)
    return _with_traits(conn, conn.execute(query.order_by(allocations.c.id)))


def orphaned(conn: Connection, live_ids: Iterable[int]) -> list[tuple[int, int | None]]:
    """(id, conductor_affinity) of allocations in progress on conductors that are not alive."""
    live = sorted(set(live_ids))
    # SELECT id, conductor_affinity FROM allocations
    #   WHERE state = 'allocating' AND (conductor_affinity IS NULL OR conductor_affinity NOT IN (:live))
    owner = allocations.c.conductor_affinity
    condition = owner.is_(None)
    if live:
        condition = sa.or_(condition, owner.not_in(live))
    query = (
        sa.select(allocations.c.id, owner)
        .where(allocations.c.state == "allocating", condition)
        .order_by(allocations.c.id)
    )
    return [(row.id, row.conductor_affinity) for row in conn.execute(query)]


def conductor_hosts(conn: Connection, conductor_ids: Iterable[int]) -> dict[int, str]:
    ids = sorted(set(conductor_ids))
    if not ids:
        return {}
    # SELECT id, hostname FROM conductors WHERE id IN (:ids)
    query = sa.select(conductors.c.id, conductors.c.hostname).where(conductors.c.id.in_(ids))
    return {row.id: row.hostname for row in conn.execute(query)}


# ------------------------------------------------------------ candidates

# Columns the allocation process needs from a node.
CANDIDATE_COLUMNS = (
    nodes.c.id, nodes.c.uuid, nodes.c.name, nodes.c.provision_state, nodes.c.maintenance,
    nodes.c.power_state, nodes.c.instance_uuid, nodes.c.resource_class, nodes.c.owner, nodes.c.lessee,
    nodes.c.allocation_id,
)


def candidate_nodes(conn: Connection, resource_class: str, *, uuids: Sequence[str] | None = None,
                    owner: str | None = None) -> list[dict[str, Any]]:
    """Nodes that could serve an allocation now, each with its ``traits``."""
    # SELECT <columns> FROM nodes WHERE resource_class = :rc AND provision_state = 'available'
    #   AND NOT maintenance AND power_state IS NOT NULL AND instance_uuid IS NULL
    #   [AND uuid IN (:uuids)] [AND (owner = :owner OR lessee = :owner)]
    query = sa.select(*CANDIDATE_COLUMNS).where(
        nodes.c.resource_class == resource_class,
        nodes.c.provision_state == "available",
        sa.not_(nodes.c.maintenance),
        nodes.c.power_state.is_not(None),
        nodes.c.instance_uuid.is_(None),
    )
    if uuids:
        query = query.where(nodes.c.uuid.in_(list(uuids)))
    if owner:
        query = query.where(sa.or_(nodes.c.owner == owner, nodes.c.lessee == owner))
    found = [dict(row._mapping) for row in conn.execute(query.order_by(nodes.c.id))]
    traits = node_traits_of(conn, [node["id"] for node in found])
    for node in found:
        node["traits"] = traits[node["id"]]
    return found


def node_traits_of(conn: Connection, node_ids: Sequence[int]) -> dict[int, list[str]]:
    found: dict[int, list[str]] = {node_id: [] for node_id in node_ids}
    if not node_ids:
        return found
    # SELECT node_id, trait FROM node_traits WHERE node_id IN (:ids)
    query = sa.select(node_traits.c.node_id, node_traits.c.trait).where(node_traits.c.node_id.in_(list(node_ids)))
    for node_id, trait in conn.execute(query):
        found[node_id].append(trait)
    return found


def candidate_node(conn: Connection, node_id: int) -> dict[str, Any] | None:
    """One node as :func:`candidate_nodes` shows it (for the re-check under the lock)."""
    # SELECT <columns> FROM nodes WHERE id = :id
    row = conn.execute(sa.select(*CANDIDATE_COLUMNS, nodes.c.instance_info).where(nodes.c.id == node_id)).first()
    if row is None:
        return None
    node = dict(row._mapping)
    node["instance_info"] = orjson.loads(node["instance_info"]) if node["instance_info"] else {}
    node["traits"] = node_traits_of(conn, [node_id])[node_id]
    return node


class ReservationFailed(Exception):
    """A guard of :func:`reserve_node` failed; raised so the transaction rolls back."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what  # "node" (taken meanwhile) or "allocation" (lost or deleted)


def reserve_node(conn: Connection, allocation_id: int, allocation_uuid: str, node_id: int,
                 instance_info: Mapping[str, Any], *, host: str, affinity: int, generation: int) -> None:
    """Node and allocation point at each other, or ReservationFailed (nothing written)."""
    # UPDATE nodes SET instance_uuid = :allocation_uuid, allocation_id = :allocation_id,
    #   instance_info = :info, updated_at = :now
    #   WHERE id = :node_id AND reservation = :host AND lock_generation = :generation AND instance_uuid IS NULL
    now = utcnow()
    node_result = conn.execute(
        nodes.update()
        .where(nodes.c.id == node_id, nodes.c.reservation == host, nodes.c.lock_generation == generation,
               nodes.c.instance_uuid.is_(None))
        .values(instance_uuid=allocation_uuid, allocation_id=allocation_id,
                instance_info=orjson.dumps(dict(instance_info)).decode(), updated_at=now)
    )
    if node_result.rowcount != 1:
        raise ReservationFailed("node")
    # UPDATE allocations SET node_id = :node_id, state = 'active', last_error = NULL, updated_at = :now
    #   WHERE id = :id AND conductor_affinity = :affinity AND state = 'allocating'
    if not update(conn, allocation_id, {"node_id": node_id, "state": "active", "last_error": None},
                  affinity=affinity, state="allocating"):
        raise ReservationFailed("allocation")
