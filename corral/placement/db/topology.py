"""The provider topology, kept in memory by each API process.

Providers, their inventories, traits and aggregates change when operators
or compute services reconfigure something; usage changes with every
claim.  The allocation-candidate search needs the first for the whole
cloud at every request, so each process keeps a snapshot of it
(:class:`~corral.placement.db.topology_cache.TopologyCache`) and checks
with one single-row query per search whether a topology write has
happened since.  Usage is read for every search.

Every transaction that changes the topology calls :func:`changed`.  It
increments ``topology_versions.position`` (which locks that row until the
transaction ends, so such transactions commit one after the other, in
``position`` order: a process that sees position P committed knows that
every lower position is committed too) and logs in ``topology_changes``
which providers changed at that position.  A process whose snapshot is
at an older position re-reads only those providers' rows.

``topology_versions.version`` is a random value, replaced when everything
must be read again (and new whenever the row is created again, after the
tables were emptied): random rather than a counter, so that a database
emptied or restored can never bring back a value a process has already
seen.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from corral.placement.db.tables import (
    inventories,
    placement_aggregates,
    resource_classes,
    resource_provider_aggregates,
    resource_provider_traits,
    resource_providers,
    topology_changes,
    topology_versions,
    traits,
)
from corral.placement.domain.candidates import SHARING_TRAIT
from corral.placement.domain.class_index import ClassIndex, InventoryRow, class_index

_ROW_ID = 1
# Changes are kept for this many positions; a process further behind reads
# the whole topology again.  Pruned once every PRUNE_EVERY positions.
KEEP_POSITIONS = 5000
PRUNE_EVERY = 100


def changed(conn: Connection, providers: Iterable[int] | None = None, *, classes: bool = False) -> None:
    """Record, inside the writing transaction, that the topology changes.

    ``providers``: the ids of the providers whose rows (the provider itself,
    its inventories, traits or aggregates) change; ``classes``: resource
    classes are renamed or deleted.  With neither, every process reads the
    whole topology again.
    """
    provider_ids = sorted(set(providers)) if providers is not None else []
    everything = providers is None and not classes
    # UPDATE topology_versions SET position = position + 1 [, version = :version] WHERE id = 1
    values: dict[str, Any] = {"position": topology_versions.c.position + 1}
    if everything:
        values["version"] = secrets.token_hex(16)
    update = topology_versions.update().where(topology_versions.c.id == _ROW_ID).values(**values)
    if not conn.execute(update).rowcount:
        # The row is missing (the table was emptied): create it.
        try:
            with conn.begin_nested():
                # INSERT INTO topology_versions (id, version, position) VALUES (1, :version, 1)
                conn.execute(topology_versions.insert().values(id=_ROW_ID, version=secrets.token_hex(16), position=1))
        except sa.exc.IntegrityError:
            # A concurrent transaction created it first.
            conn.execute(update)
    # SELECT position FROM topology_versions WHERE id = 1
    position = conn.execute(
        sa.select(topology_versions.c.position).where(topology_versions.c.id == _ROW_ID)
    ).scalar_one()
    # INSERT INTO topology_changes (position, resource_provider_id) VALUES (:position, :id), ...
    # (one row without a provider when no provider changed: every position has a row)
    rows = [{"position": position, "resource_provider_id": rp_id} for rp_id in provider_ids]
    if classes or not rows:
        rows.append({"position": position, "resource_provider_id": None})
    conn.execute(topology_changes.insert(), rows)
    if position % PRUNE_EVERY == 0:
        # DELETE FROM topology_changes WHERE position <= :oldest
        conn.execute(topology_changes.delete().where(topology_changes.c.position <= position - KEEP_POSITIONS))


def current_label(conn: Connection) -> tuple[str, int] | None:
    """(version, position) of the topology ``conn`` sees; None when unknown."""
    # SELECT version, position FROM topology_versions WHERE id = 1
    row = conn.execute(
        sa.select(topology_versions.c.version, topology_versions.c.position).where(topology_versions.c.id == _ROW_ID)
    ).first()
    return None if row is None else (row[0], int(row[1]))


class ProviderRow(NamedTuple):
    uuid: str
    parent_id: int | None
    root_id: int


# ((resource class id, capacity, used), ...) in class id order
SummaryRows = tuple[tuple[int, int, int], ...]


@dataclass
class Topology:
    """Everything about providers the candidate search needs, except usage.

    Shared by concurrent searches.  A later catch-up may replace the values
    of existing entries of the per-provider maps in place (never add or
    remove keys, never touch class indexes): see
    :mod:`corral.placement.db.topology_cache`.
    """

    version: str | None
    # the topology_versions position this snapshot holds at least
    position: int
    providers: dict[int, ProviderRow]
    uuids: dict[int, str]
    ids_by_uuid: dict[str, int]
    # provider id -> root provider id
    root_of: dict[int, int]
    # root provider id -> every provider of its tree
    members_of: dict[int, list[int]]
    # resource class id -> provider id -> (capacity, 0, min_unit, max_unit, step_size)
    inventory: dict[int, dict[int, InventoryRow]]
    # provider id -> its inventories with nothing used, for summaries
    # (equal tuples are one object)
    capacities: dict[int, SummaryRows]
    traits_of: dict[int, frozenset[int]]
    # provider id -> trait names, in the order the traits were created
    trait_names_of: dict[int, list[str]]
    aggs_of: dict[int, frozenset[int]]
    aggregate_ids: dict[str, int]
    class_names: dict[int, str]
    # providers with the sharing trait
    sharing: frozenset[int]
    # sharing provider id -> roots of every tree sharing an aggregate with it
    anchors_of: dict[int, frozenset[int]]
    # resource class id -> its index, built when first needed (the only
    # things added after the snapshot is built, with ``derived``; building
    # twice is harmless)
    _indexes: dict[int, ClassIndex] = field(default_factory=dict)
    # what the API layer derives from the topology and keeps with it
    # (rendered provider summaries): shared by later snapshots of the same
    # resource class names, so every entry must name what it was derived
    # from, for its users to check
    derived: dict[Any, Any] = field(default_factory=dict)

    def index_of(self, rc: int) -> ClassIndex | None:
        found = self._indexes.get(rc)
        if found is None:
            rows = self.inventory.get(rc)
            if rows is None:
                return None
            found = self._indexes[rc] = class_index(rows, self.root_of, self.sharing, self.anchors_of)
        return found


def plain_rows(conn: Connection, statement: sa.Select) -> list[tuple[Any, ...]]:
    """The rows of ``statement`` as the driver's plain tuples: for the reads
    of whole tables, SQLAlchemy's result rows cost more than the database
    spends finding them.  (The statement still goes through SQLAlchemy's
    compiled cache.)"""
    return conn.execute(statement).cursor.fetchall()


def load(conn: Connection, version: str | None, position: int = 0) -> Topology:
    """Read the whole topology (``version`` and ``position`` read first, by the caller)."""
    providers, root_of, members_of, ids_by_uuid = _providers(conn)
    inventory, capacities = _inventories(conn, providers)
    traits_of, trait_names_of, sharing = _traits(conn, providers)
    aggs_of, aggregate_ids = _aggregates(conn, providers)
    # SELECT id, name FROM resource_classes
    class_names = dict(plain_rows(conn, sa.select(resource_classes.c.id, resource_classes.c.name)))
    return Topology(
        version=version,
        position=position,
        providers=providers,
        uuids={rp_id: row[0] for rp_id, row in providers.items()},
        ids_by_uuid=ids_by_uuid,
        root_of=root_of,
        members_of=members_of,
        inventory=inventory,
        capacities=capacities,
        traits_of=traits_of,
        trait_names_of=trait_names_of,
        aggs_of=aggs_of,
        aggregate_ids=aggregate_ids,
        class_names=class_names,
        sharing=sharing,
        anchors_of=sharing_anchors(sharing, aggs_of, root_of),
    )


def _providers(
    conn: Connection,
) -> tuple[dict[int, ProviderRow], dict[int, int], dict[int, list[int]], dict[str, int]]:
    rp = resource_providers
    # SELECT id, uuid, parent_provider_id, root_provider_id FROM resource_providers
    rows = plain_rows(conn, sa.select(rp.c.id, rp.c.uuid, rp.c.parent_provider_id, rp.c.root_provider_id))
    make = tuple.__new__
    providers = {rp_id: make(ProviderRow, (uuid, parent_id, root_id)) for rp_id, uuid, parent_id, root_id in rows}
    root_of = {rp_id: root_id for rp_id, _uuid, _parent_id, root_id in rows}
    members_of: dict[int, list[int]] = {}
    for rp_id, root_id in root_of.items():
        found = members_of.get(root_id)
        if found is None:
            members_of[root_id] = [rp_id]
        else:
            found.append(rp_id)
    ids_by_uuid = {uuid: rp_id for rp_id, uuid, _parent_id, _root_id in rows}
    return providers, root_of, members_of, ids_by_uuid


def _inventories(
    conn: Connection, providers: dict[int, ProviderRow]
) -> tuple[dict[int, dict[int, InventoryRow]], dict[int, SummaryRows]]:
    inv = inventories
    # SELECT resource_provider_id, resource_class_id, total, reserved, min_unit, max_unit,
    #        step_size, allocation_ratio
    # FROM inventories ORDER BY resource_class_id
    rows = plain_rows(
        conn,
        sa.select(
            inv.c.resource_provider_id, inv.c.resource_class_id, inv.c.total, inv.c.reserved,
            inv.c.min_unit, inv.c.max_unit, inv.c.step_size, inv.c.allocation_ratio,
        ).order_by(inv.c.resource_class_id),
    )
    inventory: dict[int, dict[int, InventoryRow]] = {}
    listed: dict[int, list[tuple[int, int, int]]] = {}
    for rp_id, rc, total, reserved, min_unit, max_unit, step, ratio in rows:
        if rp_id not in providers:
            # Created after the providers were read: left for the next snapshot.
            continue
        capacity = (total - reserved) * ratio
        by_provider = inventory.get(rc)
        if by_provider is None:
            by_provider = inventory[rc] = {}
        by_provider[rp_id] = (capacity, 0, min_unit, max_unit, step)
        entry = (rc, int(capacity), 0)
        found = listed.get(rp_id)
        if found is None:
            listed[rp_id] = [entry]
        else:
            found.append(entry)
    one_of: dict[SummaryRows, SummaryRows] = {}
    capacities = {}
    for rp_id, entries in listed.items():
        key = tuple(entries)
        capacities[rp_id] = one_of.setdefault(key, key)
    return inventory, capacities


def _traits(
    conn: Connection, providers: dict[int, ProviderRow]
) -> tuple[dict[int, frozenset[int]], dict[int, list[str]], frozenset[int]]:
    rpt = resource_provider_traits
    # SELECT rpt.resource_provider_id, rpt.trait_id, traits.name
    # FROM resource_provider_traits AS rpt JOIN traits ON traits.id = rpt.trait_id
    ids, names, by_name = _memberships(
        conn,
        sa.select(rpt.c.resource_provider_id, rpt.c.trait_id, traits.c.name).select_from(
            rpt.join(traits, traits.c.id == rpt.c.trait_id)
        ),
        providers,
    )
    sharing_trait = by_name.get(SHARING_TRAIT)
    sharing = frozenset(rp for rp, found in ids.items() if sharing_trait in found)
    # Listed in the order the traits were created, as upstream lists them.
    for found in names.values():
        found.sort(key=by_name.__getitem__)
    return ids, names, sharing


def _aggregates(
    conn: Connection, providers: dict[int, ProviderRow]
) -> tuple[dict[int, frozenset[int]], dict[str, int]]:
    rpa = resource_provider_aggregates
    agg = placement_aggregates
    # SELECT rpa.resource_provider_id, rpa.aggregate_id, agg.uuid
    # FROM resource_provider_aggregates AS rpa
    # JOIN placement_aggregates AS agg ON agg.id = rpa.aggregate_id
    ids, _uuids, by_uuid = _memberships(
        conn,
        sa.select(rpa.c.resource_provider_id, rpa.c.aggregate_id, agg.c.uuid).select_from(
            rpa.join(agg, agg.c.id == rpa.c.aggregate_id)
        ),
        providers,
    )
    return ids, by_uuid


def _memberships(
    conn: Connection, statement: sa.Select, providers: dict[int, ProviderRow]
) -> tuple[dict[int, frozenset[int]], dict[int, list[str]], dict[str, int]]:
    """From (provider id, member id, member name) rows of known providers:
    provider -> member ids, provider -> member names, and name -> id."""
    ids: dict[int, set[int]] = {}
    names: dict[int, list[str]] = {}
    by_name: dict[str, int] = {}
    for rp_id, member_id, name in plain_rows(conn, statement):
        if rp_id not in providers:
            # Created after the providers were read: left for the next snapshot.
            continue
        if rp_id in ids:
            ids[rp_id].add(member_id)
            names[rp_id].append(name)
        else:
            ids[rp_id] = {member_id}
            names[rp_id] = [name]
        by_name[name] = member_id
    return _frozen(ids), names, by_name


def _frozen(sets: dict[int, set[int]]) -> dict[int, frozenset[int]]:
    one_of: dict[frozenset[int], frozenset[int]] = {}
    result = {}
    for key, value in sets.items():
        frozen = frozenset(value)
        result[key] = one_of.setdefault(frozen, frozen)
    return result


def sharing_anchors(
    sharing: frozenset[int], aggs_of: dict[int, frozenset[int]], root_of: dict[int, int]
) -> dict[int, frozenset[int]]:
    """The roots of every tree that shares an aggregate with each sharing
    provider (its own tree included)."""
    wanted = set().union(*[aggs_of.get(rp, ()) for rp in sharing]) if sharing else set()
    if not wanted:
        return {}
    roots_in: dict[int, set[int]] = {}
    for rp_id, aggregates in aggs_of.items():
        for aggregate_id in aggregates & wanted:
            roots_in.setdefault(aggregate_id, set()).add(root_of[rp_id])
    anchors = {}
    for rp_id in sharing:
        aggregates = aggs_of.get(rp_id)
        if aggregates:
            anchors[rp_id] = frozenset().union(*[roots_in[a] for a in aggregates])
    return anchors
