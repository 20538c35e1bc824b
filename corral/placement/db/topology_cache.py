"""Each API process's snapshot of the topology, kept up to date change by change.

A search first reads ``topology_versions`` (one row).  When its position
is the snapshot's, the snapshot is current.  When it is ahead, the search
reads the change log between the two positions and re-reads only the rows
of the providers named there, then builds the next snapshot from the old
one.  It reads everything again when the version differs, when it is too
far behind, or when the log lacks some position (pruned).

The next snapshot shares the old one's maps.  Where a provider's row only
changes value (its inventory of a class, its capacities, its traits), the
shared map is changed in place: copying a map of every provider for each
change would cost more than the search.  Where providers come or go from
a map, the next snapshot gets a copy, so a search iterating the old map
never sees its keys change.  A search still using the old snapshot may
therefore see some providers as a later committed write left them, never
as no committed write did.  Class indexes are never changed in place:
the next snapshot's shares the old one's sorted lists and names the
providers whose limits changed since (see ``ClassIndex``), until there
are enough of them to sort the lists again.

Only positions up to the one read from ``topology_versions`` are applied:
that value is committed, and positions commit in order (see
:mod:`corral.placement.db.topology`), so every lower position is committed
and visible too.  A later position a concurrent transaction holds is never
skipped: it is above the snapshot's position and read by a later search.
Under READ COMMITTED the provider rows may already hold writes of later
positions; those are applied again later, which changes nothing.
"""

from __future__ import annotations

import operator
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from corral.core import memory, metrics
from corral.placement.db.tables import (
    inventories,
    placement_aggregates,
    resource_classes,
    resource_provider_aggregates,
    resource_provider_traits,
    resource_providers,
    topology_changes,
    traits,
)
from corral.placement.db.topology import (
    ProviderRow,
    SummaryRows,
    Topology,
    current_label,
    load,
    sharing_anchors,
)
from corral.placement.domain.candidates import SHARING_TRAIT
from corral.placement.domain.class_index import ClassIndex, InventoryRow, inventory_limit, is_special, sorted_limits

# Further behind than this many positions, or with more providers to
# re-read than this, a snapshot is read whole again.
MAX_POSITIONS_BEHIND = 1000
MAX_PROVIDERS_CHANGED = 2000
# A class index's sorted limits are shared by the snapshots patched from
# it, which list the providers changed since instead of copying lists of
# every provider (see ClassIndex).  Sorted again once more than this many
# have changed, or this share of the class's providers.
MIN_CHANGED_LIMITS = 256
CHANGED_LIMITS_SHARE = 64


# The statements of a catch-up, built once: positions are parameters.
# SELECT position, resource_provider_id FROM topology_changes WHERE position > :after AND position <= :upto
_CHANGES = sa.select(topology_changes.c.position, topology_changes.c.resource_provider_id).where(
    topology_changes.c.position > sa.bindparam("after"), topology_changes.c.position <= sa.bindparam("upto")
)
# The providers' rows are read by their ids, taken from the change log
# rows just read (an expanding IN: the statement is compiled once).  A
# subquery on the log here would let PostgreSQL's planner choose a hash
# join over a scan of the whole table, as its estimate of the changed
# rows is generic.
_IDS = sa.bindparam("ids", expanding=True)
# SELECT id, uuid, parent_provider_id, root_provider_id FROM resource_providers WHERE id IN (:ids)
_PROVIDERS = sa.select(
    resource_providers.c.id, resource_providers.c.uuid, resource_providers.c.parent_provider_id,
    resource_providers.c.root_provider_id,
).where(resource_providers.c.id.in_(_IDS))
# SELECT resource_provider_id, resource_class_id, total, reserved, min_unit, max_unit,
#        step_size, allocation_ratio
# FROM inventories WHERE resource_provider_id IN (:ids) ORDER BY resource_class_id
_INVENTORIES = sa.select(
    inventories.c.resource_provider_id, inventories.c.resource_class_id, inventories.c.total,
    inventories.c.reserved, inventories.c.min_unit, inventories.c.max_unit, inventories.c.step_size,
    inventories.c.allocation_ratio,
).where(inventories.c.resource_provider_id.in_(_IDS)).order_by(inventories.c.resource_class_id)
# SELECT rpt.resource_provider_id, rpt.trait_id, traits.name
# FROM resource_provider_traits AS rpt JOIN traits ON traits.id = rpt.trait_id
# WHERE rpt.resource_provider_id IN (:ids)
_TRAITS = (
    sa.select(resource_provider_traits.c.resource_provider_id, resource_provider_traits.c.trait_id, traits.c.name)
    .select_from(resource_provider_traits.join(traits, traits.c.id == resource_provider_traits.c.trait_id))
    .where(resource_provider_traits.c.resource_provider_id.in_(_IDS))
)
# SELECT rpa.resource_provider_id, rpa.aggregate_id, agg.uuid
# FROM resource_provider_aggregates AS rpa JOIN placement_aggregates AS agg ON agg.id = rpa.aggregate_id
# WHERE rpa.resource_provider_id IN (:ids)
_AGGREGATES = (
    sa.select(
        resource_provider_aggregates.c.resource_provider_id, resource_provider_aggregates.c.aggregate_id,
        placement_aggregates.c.uuid,
    )
    .select_from(
        resource_provider_aggregates.join(
            placement_aggregates, placement_aggregates.c.id == resource_provider_aggregates.c.aggregate_id
        )
    )
    .where(resource_provider_aggregates.c.resource_provider_id.in_(_IDS))
)
# The four reads above as one statement (one round trip: on a busy
# database each costs more than the work it asks for).  Rows are tagged
# with their kind and padded with NULLs to a common shape:
# (kind, provider id, int, int, int, int, int, int, allocation ratio, text).
# SELECT 0, id, parent_provider_id, root_provider_id, NULL, ..., uuid FROM resource_providers WHERE id IN (:ids)
# UNION ALL SELECT 1, resource_provider_id, resource_class_id, total, reserved, min_unit, max_unit,
#     step_size, allocation_ratio, NULL FROM inventories WHERE resource_provider_id IN (:ids)
# UNION ALL SELECT 2, rpt.resource_provider_id, rpt.trait_id, NULL, ..., traits.name FROM ... (as _TRAITS)
# UNION ALL SELECT 3, rpa.resource_provider_id, rpa.aggregate_id, NULL, ..., agg.uuid FROM ... (as _AGGREGATES)
_PROVIDER_ROWS, _INVENTORY_ROWS, _TRAIT_ROWS, _AGGREGATE_ROWS = range(4)


def _tagged(kind: int, statement: sa.Select, *, ratio: bool = False, text: bool = False) -> sa.Select:
    """``statement`` in the common shape: its kind, its integer columns,
    NULLs up to six of them, then its ratio and its text (last columns)."""
    columns = list(statement.selected_columns)
    last = [columns.pop() if text else sa.null()]
    last.insert(0, columns.pop() if ratio else sa.null())
    ints = columns[1:]
    return statement.with_only_columns(
        sa.literal_column(str(kind)), columns[0], *ints, *[sa.null()] * (6 - len(ints)), *last
    ).order_by(None)


_CHANGED_ROWS = sa.union_all(
    _tagged(_PROVIDER_ROWS, _PROVIDERS.with_only_columns(
        resource_providers.c.id, resource_providers.c.parent_provider_id, resource_providers.c.root_provider_id,
        resource_providers.c.uuid,
    ), text=True),
    _tagged(_INVENTORY_ROWS, _INVENTORIES, ratio=True),
    _tagged(_TRAIT_ROWS, _TRAITS, text=True),
    _tagged(_AGGREGATE_ROWS, _AGGREGATES, text=True),
)
# SELECT id, name FROM resource_classes
_CLASS_NAMES = sa.select(resource_classes.c.id, resource_classes.c.name)


def _rows(conn: Connection, statement: sa.Select, params: dict[str, Any]) -> list[tuple[Any, ...]]:
    return conn.execute(statement, params).cursor.fetchall()


class TopologyCache:
    """The latest snapshot read by this process; one per application."""

    def __init__(
        self,
        loader: Callable[[Connection, str | None, int], Topology] = load,
        max_positions_behind: int = MAX_POSITIONS_BEHIND,
        max_providers_changed: int = MAX_PROVIDERS_CHANGED,
        settle_at: int = memory.LARGE,
    ) -> None:
        self._current: Topology | None = None
        self._lock = threading.Lock()
        self._loader = loader
        self.max_positions_behind = max_positions_behind
        self.max_providers_changed = max_providers_changed
        self.settle_at = settle_at
        # whole reads and change-by-change updates, for tests and operators
        self.loads = 0
        self.updates = 0

    @property
    def current(self) -> Topology | None:
        """The latest snapshot, as it is (no database access)."""
        return self._current

    def snapshot(self, conn: Connection) -> Topology:
        """The topology as ``conn``'s transaction sees it, or newer."""
        label = current_label(conn)
        if label is None:
            # No write was ever recorded here (or the tables were emptied).
            self.loads += 1
            started = time.perf_counter()
            topology = self._loader(conn, None, 0)
            _read("full", started)
            return topology
        current = self._current
        if _holds(current, label):
            return current  # type: ignore[return-value]
        # One reader at a time: concurrent searches wait for it and share it.
        with self._lock:
            current = self._current
            if _holds(current, label):
                return current  # type: ignore[return-value]
            fresh = None
            started = time.perf_counter()
            if current is not None and current.version == label[0]:
                metrics.SNAPSHOT_POSITIONS_BEHIND.observe(label[1] - current.position)
                if label[1] - current.position <= self.max_positions_behind:
                    try:
                        fresh = catch_up(conn, current, label[1], self.max_providers_changed)
                    except BaseException:
                        # Rows may have changed in place: nothing of this
                        # snapshot is to be trusted any more.
                        self._current = None
                        raise
            if fresh is None:
                fresh = self._loader(conn, *label)
                self.loads += 1
                _read("full", started)
                # A whole snapshot is kept until replaced: out of the
                # cyclic collector's way if it is large.
                memory.settle(len(fresh.providers), self.settle_at)
            else:
                self.updates += 1
                _read("changes", started)
            self._current = fresh
            return fresh


def _read(kind: str, started: float) -> None:
    metrics.SNAPSHOT_READS.labels(kind).inc()
    metrics.SNAPSHOT_READ_DURATION.labels(kind).observe(time.perf_counter() - started)


def _holds(snapshot: Topology | None, label: tuple[str, int]) -> bool:
    # A search whose transaction began before the snapshot's last update may
    # see an older position: the newer snapshot serves it too.
    return snapshot is not None and snapshot.version == label[0] and snapshot.position >= label[1]


def catch_up(conn: Connection, old: Topology, position: int, max_providers: int) -> Topology | None:
    """``old`` with the changes up to ``position`` applied; None when it
    must be read whole (a position missing from the log, too many providers)."""
    params = {"after": old.position, "upto": position}
    rows = _rows(conn, _CHANGES, params)
    if len({row[0] for row in rows}) != position - old.position:
        # Pruned: these changes are no longer known.
        return None
    provider_ids = {rp_id for _position, rp_id in rows if rp_id is not None}
    if len(provider_ids) > max_providers:
        return None
    classes = any(rp_id is None for _position, rp_id in rows)
    return _Patch(conn, old, provider_ids, classes).build(position)


class _Patch:
    """The next snapshot: ``old`` with ``ids``' rows read again."""

    def __init__(self, conn: Connection, old: Topology, ids: set[int], classes: bool) -> None:
        self.params = {"ids": sorted(ids)}
        self._by_kind: dict[int, list[tuple[Any, ...]]] | None = None
        # resource class id -> provider id -> its new row (None: gone), and
        # its row before (None: new), filled by _inventories
        self.inventory_changes: dict[int, dict[int, InventoryRow | None]] = {}
        self.inventory_before: dict[int, dict[int, InventoryRow | None]] = {}
        self.conn = conn
        self.old = old
        self.ids = ids
        self.classes = classes

    def build(self, position: int) -> Topology | None:
        old = self.old
        ids = sorted(self.ids)
        rows = self._provider_rows()
        providers, uuids, ids_by_uuid, root_of, members_of = self._providers(rows)
        if not _consistent(providers, members_of, rows, self.ids, old.root_of):
            # Rows read under READ COMMITTED already hold later writes that
            # name providers this snapshot lacks: read everything.
            return None
        known = rows.keys()
        inventory, capacities, new_classes = self._inventories(ids, known)
        traits_of, trait_names_of, sharing = self._traits(ids, known)
        aggs_of, aggregate_ids = self._aggregates(ids, known)
        class_names = old.class_names
        if self.classes or new_classes - class_names.keys():
            class_names = dict(_rows(self.conn, _CLASS_NAMES, {}))
        anchors_of = old.anchors_of
        if (sharing or old.sharing) and (
            sharing is not old.sharing or aggs_of is not old.aggs_of or root_of is not old.root_of
        ):
            anchors_of = sharing_anchors(sharing, aggs_of, root_of)
        fresh = Topology(
            version=old.version,
            position=position,
            providers=providers,
            uuids=uuids,
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
            anchors_of=anchors_of,
        )
        if anchors_of == old.anchors_of:
            fresh._indexes.update(self._indexes(fresh))
        if class_names == old.class_names:
            # What the API layer keeps is shared with the next snapshot, not
            # copied (a copy would cost a pass over every provider per
            # change): each entry says what it was derived from, and its
            # users check that against their own snapshot.  The changed
            # providers' entries go, so that deleted providers leave none.
            for key, kept in list(old.derived.items()):
                for rp in ids:
                    kept.pop(rp, None)
                fresh.derived[key] = kept
        return fresh

    # ------------------------------------------------------------ providers

    def _changed_rows(self, kind: int) -> list[tuple[Any, ...]]:
        """The rows of ``kind`` of the changed providers (read once, with
        the other kinds, in one statement)."""
        if self._by_kind is None:
            self._by_kind = {_PROVIDER_ROWS: [], _INVENTORY_ROWS: [], _TRAIT_ROWS: [], _AGGREGATE_ROWS: []}
            if self.ids:
                for row in _rows(self.conn, _CHANGED_ROWS, self.params):
                    self._by_kind[row[0]].append(row)
        return self._by_kind[kind]

    def _provider_rows(self) -> dict[int, ProviderRow]:
        return {
            row[1]: ProviderRow(row[9], row[2], row[3]) for row in self._changed_rows(_PROVIDER_ROWS)
        }

    def _providers(
        self, rows: dict[int, ProviderRow]
    ) -> tuple[dict[int, ProviderRow], dict[int, str], dict[str, int], dict[int, int], dict[int, list[int]]]:
        old = self.old
        gone = [rp for rp in self.ids if rp not in rows and rp in old.providers]
        moved = [rp for rp, row in rows.items() if old.providers.get(rp) != row]
        if not gone and not moved:
            return old.providers, old.uuids, old.ids_by_uuid, old.root_of, old.members_of
        providers = dict(old.providers)
        uuids = dict(old.uuids)
        ids_by_uuid = dict(old.ids_by_uuid)
        root_of = dict(old.root_of)
        members_of = dict(old.members_of)
        # Lists of the old snapshot are copied before their first change.
        copied: set[int] = set()

        def members(root: int) -> list[int]:
            if root not in copied:
                copied.add(root)
                members_of[root] = list(members_of.get(root, ()))
            return members_of[root]

        for rp in gone + moved:
            before = providers.pop(rp, None)
            if before is None:
                continue
            ids_by_uuid.pop(before.uuid, None)
            del uuids[rp]
            members(root_of.pop(rp)).remove(rp)
        for rp in moved:
            row = rows[rp]
            providers[rp] = row
            uuids[rp] = row.uuid
            ids_by_uuid[row.uuid] = rp
            root_of[rp] = row.root_id
            members(row.root_id).append(rp)
        for root in copied:
            if not members_of[root]:
                del members_of[root]
        return providers, uuids, ids_by_uuid, root_of, members_of

    # ---------------------------------------------------------- inventories

    def _inventories(
        self, ids: list[int], known: Iterable[int]
    ) -> tuple[dict[int, dict[int, InventoryRow]], dict[int, SummaryRows], set[int]]:
        old = self.old
        new_rows: dict[int, dict[int, InventoryRow]] = {rp: {} for rp in known}
        # (in class order, as a whole read has them)
        for _kind, rp, rc, total, reserved, min_unit, max_unit, step, ratio, _text in sorted(
            self._changed_rows(_INVENTORY_ROWS), key=operator.itemgetter(2)
        ):
            if rp in new_rows:
                new_rows[rp][rc] = ((total - reserved) * ratio, 0, min_unit, max_unit, step)
        capacities = old.capacities
        # Value changes are made in place, key changes on a copy (see the
        # module's docstring); the copy is made before the first key change.
        capacities_copied = False
        classes_seen: set[int] = set()
        for rp in ids:
            now = new_rows.get(rp, {})
            before = {rc: rows[rp] for rc, rows in old.inventory.items() if rp in rows}
            classes_seen.update(now)
            if now == before:
                continue
            for rc in now.keys() | before.keys():
                if now.get(rc) != before.get(rc):
                    self.inventory_changes.setdefault(rc, {})[rp] = now.get(rc)
                    self.inventory_before.setdefault(rc, {})[rp] = before.get(rc)
            summary = tuple((rc, int(row[0]), 0) for rc, row in now.items())
            if not capacities_copied and (not now or rp not in capacities):
                capacities, capacities_copied = capacities.copy(), True
            if now:
                capacities[rp] = summary
            else:
                capacities.pop(rp, None)
        return self._apply_inventory_changes(), capacities, classes_seen

    def _apply_inventory_changes(self) -> dict[int, dict[int, InventoryRow]]:
        """The inventory maps with ``inventory_changes`` made: in place where
        only rows change, on copies where providers come or go."""
        inventory = self.old.inventory
        for rc, changes in self.inventory_changes.items():
            by_provider = inventory.get(rc, {})
            if any(row is None or rp not in by_provider for rp, row in changes.items()):
                by_provider = by_provider.copy()
                if inventory is self.old.inventory:
                    inventory = inventory.copy()
            for rp, row in changes.items():
                if row is None:
                    by_provider.pop(rp, None)
                else:
                    by_provider[rp] = row
            if by_provider:
                inventory[rc] = by_provider
            else:
                inventory.pop(rc, None)
        return inventory

    def _indexes(self, fresh: Topology) -> dict[int, ClassIndex]:
        """The old snapshot's class indexes, patched where they can be:
        a class whose changed providers include sharing ones is left to be
        built again when needed."""
        old = self.old
        moved = {rp for rp in self.ids if old.root_of.get(rp) != fresh.root_of.get(rp)}
        kept: dict[int, ClassIndex] = {}
        for rc, index in list(old._indexes.items()):
            changes = dict(self.inventory_changes.get(rc, {}))
            rows = fresh.inventory.get(rc)
            if rows is None:
                continue
            for rp in moved:
                if rp in rows and rp not in changes:
                    changes[rp] = rows[rp]
            if not changes:
                kept[rc] = index
                continue
            if any(rp in old.sharing or rp in fresh.sharing for rp in changes):
                continue
            # (the rows as they were: the inventory maps may have changed in place)
            before = {rp: rows[rp] for rp in changes if rp in rows}
            before.update(self.inventory_before.get(rc, {}))
            kept[rc] = _patched_index(index, rows, before, changes, old.root_of, fresh.root_of)
        return kept

    # ---------------------------------------------------- traits, aggregates

    def _memberships(self, kind: int, known: Iterable[int]) -> dict[int, dict[int, str]]:
        found: dict[int, dict[int, str]] = {rp: {} for rp in known}
        for row in self._changed_rows(kind):
            if row[1] in found:
                found[row[1]][row[2]] = row[9]
        return found

    def _traits(
        self, ids: list[int], known: Iterable[int]
    ) -> tuple[dict[int, frozenset[int]], dict[int, list[str]], frozenset[int]]:
        old = self.old
        found = self._memberships(_TRAIT_ROWS, known)
        traits_of, trait_names_of, sharing = old.traits_of, old.trait_names_of, old.sharing
        for rp in ids:
            now = found.get(rp, {})
            if frozenset(now) == old.traits_of.get(rp, frozenset()):
                continue
            if traits_of is old.traits_of:
                traits_of, trait_names_of = dict(old.traits_of), dict(old.trait_names_of)
            if now:
                traits_of[rp] = frozenset(now)
                # In the order the traits were created (by id), as a full read lists them.
                trait_names_of[rp] = [now[trait_id] for trait_id in sorted(now)]
            else:
                traits_of.pop(rp, None)
                trait_names_of.pop(rp, None)
        if traits_of is not old.traits_of:
            sharing_now = {rp for rp in ids if SHARING_TRAIT in found.get(rp, {}).values()}
            updated = (old.sharing - set(ids)) | sharing_now
            if updated != old.sharing:
                sharing = frozenset(updated)
        return traits_of, trait_names_of, sharing

    def _aggregates(self, ids: list[int], known: Iterable[int]) -> tuple[dict[int, frozenset[int]], dict[str, int]]:
        old = self.old
        found = self._memberships(_AGGREGATE_ROWS, known)
        aggs_of, aggregate_ids = old.aggs_of, old.aggregate_ids
        for rp in ids:
            now = found.get(rp, {})
            if frozenset(now) == old.aggs_of.get(rp, frozenset()):
                continue
            if aggs_of is old.aggs_of:
                aggs_of = dict(old.aggs_of)
            if now:
                aggs_of[rp] = frozenset(now)
            else:
                aggs_of.pop(rp, None)
            for agg_id, uuid in now.items():
                if aggregate_ids.get(uuid) != agg_id:
                    if aggregate_ids is old.aggregate_ids:
                        aggregate_ids = dict(old.aggregate_ids)
                    # (an aggregate left by every provider stays known: it
                    # matches no provider, as an unknown one would not)
                    aggregate_ids[uuid] = agg_id
        return aggs_of, aggregate_ids


def _consistent(
    providers: dict[int, ProviderRow],
    members_of: dict[int, list[int]],
    rows: dict[int, ProviderRow],
    ids: set[int],
    old_root_of: dict[int, int],
) -> bool:
    """Every parent and root named by a re-read provider is known, and no
    provider is left below a deleted one."""
    for row in rows.values():
        if row.root_id not in providers or (row.parent_id is not None and row.parent_id not in providers):
            return False
    gone = ids - rows.keys()
    if not gone:
        return True
    for rp in gone:
        if rp in members_of:
            return False
    roots = {old_root_of[rp] for rp in gone if rp in old_root_of}
    return not any(providers[m].parent_id in gone for root in roots for m in members_of.get(root, ()))


def _patched_index(
    index: ClassIndex,
    rows: dict[int, InventoryRow],
    before: dict[int, InventoryRow],
    changes: dict[int, InventoryRow | None],
    old_root_of: dict[int, int],
    root_of: dict[int, int],
) -> ClassIndex:
    """``index`` with ``changes`` (provider -> its new row, None when gone)
    applied; none of them is a sharing provider.  ``rows``: the class's
    inventory in the new snapshot."""
    by_anchor = index.by_anchor
    copied: set[int] = set()

    def anchor_list(root: int) -> list[int]:
        nonlocal by_anchor
        if by_anchor is index.by_anchor:
            by_anchor = dict(index.by_anchor)
        if root not in copied:
            copied.add(root)
            by_anchor[root] = list(by_anchor.get(root, ()))
        return by_anchor[root]

    changed = dict(index.changed)
    special_changed = False
    for rp, row in changes.items():
        old_row = before.get(rp)
        old_root = old_root_of.get(rp) if old_row is not None else None
        new_root = root_of.get(rp) if row is not None else None
        if old_root != new_root:
            if old_root is not None:
                anchor_list(old_root).remove(rp)
            if new_root is not None:
                anchor_list(new_root).append(rp)
        changed[rp] = inventory_limit(row) if row is not None else None
        if (old_row is not None and is_special(old_row)) != (row is not None and is_special(row)):
            special_changed = True
    for root in copied:
        if not by_anchor[root]:
            del by_anchor[root]
    special = index.special
    if special_changed:
        special = [rp for rp in index.special if rp not in changes]
        special += [rp for rp, row in changes.items() if row is not None and is_special(row)]
    limits, limited = index.limits, index.limited
    if len(changed) > max(MIN_CHANGED_LIMITS, len(rows) // CHANGED_LIMITS_SHARE):
        # Every search of the class walks the changed limits: sort them in.
        limits, limited = sorted_limits(rows)
        changed = {}
    return ClassIndex(by_anchor=by_anchor, limits=limits, limited=limited, special=special, changed=changed)
