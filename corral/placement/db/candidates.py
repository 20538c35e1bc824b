"""The queries behind ``GET /allocation_candidates``.

Set-based and few: one query resolves names, one finds every inventory
with room for a requested amount (usage summed in the same statement), one
reads the requested traits and aggregates, one the anchors of sharing
providers (only when sharing providers are in play), and two or three
describe the trees of the answer.  All the combining happens in
:mod:`corral.placement.domain.candidates` over plain integer structures.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from corral.placement.db.tables import (
    allocations,
    inventories,
    placement_aggregates,
    resource_classes,
    resource_provider_aggregates,
    resource_provider_traits,
    resource_providers,
    traits,
)
from corral.placement.domain.candidates import (
    SHARING_TRAIT,
    Candidate,
    CandidateRequest,
    Facts,
    GroupRequest,
    InventoryRow,
    Merge,
    RequestGroup,
    ResolvedGroup,
    group_requests,
    merge_candidates,
    select,
    named_providers,
    summary_providers,
    used_providers,
)

# Above this many ids an IN list costs more than reading every row and
# filtering in Python.
MAX_IN_LIST = 800


def _plain_rows(conn: Connection, name: str, build: Callable[[], sa.Select]) -> list[tuple[Any, ...]]:
    """The rows of ``build()``, a statement without bound parameters, as the
    driver's plain tuples.

    Used for the statements that read the whole cloud: SQLAlchemy's result
    rows cost more than the database spends finding them.  The SQL text is
    compiled once per ``name`` and dialect; the Core statement stays the
    source of truth.
    """
    key = (conn.dialect.name, name)
    sql = _SQL_TEXTS.get(key)
    if sql is None:
        compiled = build().compile(dialect=conn.dialect)
        if compiled.params:
            raise ValueError(f"{name}: a statement read as plain rows takes no parameters")
        sql = _SQL_TEXTS[key] = str(compiled)
    return conn.exec_driver_sql(sql).cursor.fetchall()


# (dialect name, statement name) -> SQL text
_SQL_TEXTS: dict[tuple[str, str], str] = {}

_KIND_CLASS, _KIND_TRAIT, _KIND_AGG, _KIND_TREE = 0, 1, 2, 3


class UnknownNames(LookupError):
    """Resource classes or traits that do not exist."""

    def __init__(self, resource_classes: list[str], traits: list[str]) -> None:
        super().__init__(resource_classes, traits)
        self.resource_classes = resource_classes
        self.traits = traits


@dataclass
class Names:
    classes: dict[str, int] = field(default_factory=dict)
    traits: dict[str, int] = field(default_factory=dict)
    aggregates: dict[str, int] = field(default_factory=dict)
    # provider uuid -> its root provider id
    tree_roots: dict[str, int] = field(default_factory=dict)


def resolve_names(
    conn: Connection,
    class_names: Iterable[str],
    trait_names: Iterable[str],
    aggregate_uuids: Iterable[str] = (),
    provider_uuids: Iterable[str] = (),
    *,
    standard_classes: dict[str, int] | None = None,
    standard_traits: dict[str, int] | None = None,
) -> Names:
    """Ids for every name, in one round trip; :class:`UnknownNames` if a class or trait is missing.

    Unknown aggregates and providers are simply absent from the result.
    """
    names = Names()
    standard_classes = standard_classes or {}
    standard_traits = standard_traits or {}
    classes_left = sorted({n for n in class_names if n not in standard_classes})
    traits_left = sorted({n for n in trait_names if n not in standard_traits})
    names.classes = {n: standard_classes[n] for n in class_names if n in standard_classes}
    names.traits = {n: standard_traits[n] for n in trait_names if n in standard_traits}
    aggregate_uuids = sorted(set(aggregate_uuids))
    provider_uuids = sorted(set(provider_uuids))
    parts = []
    # SELECT 0, id, name FROM resource_classes WHERE name IN (:classes)
    # UNION ALL SELECT 1, id, name FROM traits WHERE name IN (:traits)
    # UNION ALL SELECT 2, id, uuid FROM placement_aggregates WHERE uuid IN (:aggs)
    # UNION ALL SELECT 3, root_provider_id, uuid FROM resource_providers WHERE uuid IN (:providers)
    if classes_left:
        parts.append(
            sa.select(sa.literal(_KIND_CLASS), resource_classes.c.id, resource_classes.c.name).where(
                resource_classes.c.name.in_(classes_left)
            )
        )
    if traits_left:
        parts.append(sa.select(sa.literal(_KIND_TRAIT), traits.c.id, traits.c.name).where(traits.c.name.in_(traits_left)))
    if aggregate_uuids:
        parts.append(
            sa.select(sa.literal(_KIND_AGG), placement_aggregates.c.id, placement_aggregates.c.uuid).where(
                placement_aggregates.c.uuid.in_(aggregate_uuids)
            )
        )
    if provider_uuids:
        parts.append(
            sa.select(
                sa.literal(_KIND_TREE), resource_providers.c.root_provider_id, resource_providers.c.uuid
            ).where(resource_providers.c.uuid.in_(provider_uuids))
        )
    if parts:
        statement = parts[0] if len(parts) == 1 else sa.union_all(*parts)
        targets = (names.classes, names.traits, names.aggregates, names.tree_roots)
        for kind, ident, name in conn.execute(statement):
            targets[kind][name] = ident
    missing_classes = [n for n in classes_left if n not in names.classes]
    missing_traits = [n for n in traits_left if n not in names.traits]
    if missing_classes or missing_traits:
        raise UnknownNames(missing_classes, missing_traits)
    return names


def _ids_of_any_of(sets: list[frozenset[str]], ids: dict[str, int]) -> list[frozenset[int]]:
    return [frozenset(ids[name] for name in any_of if name in ids) for any_of in sets]


def resolve_group(group: RequestGroup, names: Names) -> ResolvedGroup:
    resources = {names.classes[rc]: amount for rc, amount in group.resources.items()}
    member_of = _ids_of_any_of(group.member_of, names.aggregates)
    resolved = ResolvedGroup(
        suffix=group.suffix,
        resources=dict(sorted(resources.items())),
        required=_ids_of_any_of(group.required_traits, names.traits),
        forbidden=frozenset(names.traits[t] for t in group.forbidden_traits),
        member_of=member_of,
        forbidden_aggs=frozenset(names.aggregates[a] for a in group.forbidden_aggs if a in names.aggregates),
    )
    # An any-of list of aggregates that do not exist can never match.
    if any(not any_of for any_of in member_of):
        resolved.impossible = True
    if group.in_tree is not None:
        root = names.tree_roots.get(group.in_tree)
        if root is None:
            resolved.impossible = True
        else:
            resolved.tree_root = root
    return resolved


def resolve_request(
    conn: Connection,
    request: CandidateRequest,
    standard_classes: dict[str, int],
    standard_traits: dict[str, int],
) -> tuple[list[ResolvedGroup], Names]:
    trees = [g.in_tree for g in request.groups.values() if g.in_tree is not None]
    names = resolve_names(
        conn,
        request.resource_class_names(),
        request.trait_names() | {SHARING_TRAIT},
        request.aggregate_uuids(),
        trees,
        standard_classes=standard_classes,
        standard_traits=standard_traits,
    )
    return [resolve_group(group, names) for group in request.groups.values()], names


# ------------------------------------------------------------------ facts


def _usage(class_ids: Collection[int] | None) -> sa.Select:
    # SELECT resource_provider_id, resource_class_id, SUM(used) AS used
    # FROM allocations [WHERE resource_class_id IN (:class_ids)]
    # GROUP BY resource_provider_id, resource_class_id
    statement = sa.select(
        allocations.c.resource_provider_id,
        allocations.c.resource_class_id,
        sa.func.sum(allocations.c.used).label("used"),
    )
    if class_ids is not None:
        statement = statement.where(allocations.c.resource_class_id.in_(sorted(class_ids)))
    return statement.group_by(allocations.c.resource_provider_id, allocations.c.resource_class_id)


def inventories_of_classes(
    conn: Connection,
    groups: list[ResolvedGroup],
    facts: Facts,
    *,
    every_class: bool = False,
    providers: dict[int, ProviderRow] | None = None,
) -> set[int]:
    """Fill ``facts.inventory`` and ``facts.root_of`` with every inventory of a
    requested class; return the classes read for the whole cloud.

    The room check happens in Python (one pass over compact rows), so the
    same rows also serve the provider summaries.  A class asked for only by
    groups restricted to trees (``in_tree``) is read for those trees only.
    With ``every_class`` (summaries show every class and no group is
    restricted to a tree) the inventories of all classes are read at once.

    SELECT rp.id, rp.root_provider_id, inv.resource_class_id, inv.total, inv.reserved,
           inv.min_unit, inv.max_unit, inv.step_size, inv.allocation_ratio
    FROM inventories AS inv
    JOIN resource_providers AS rp ON rp.id = inv.resource_provider_id
    WHERE inv.resource_class_id IN (:classes)
      [AND (inv.resource_class_id IN (:whole_cloud_classes)
            OR (inv.resource_class_id = :rc AND rp.root_provider_id IN (:tree_roots)) ...)]

    and the usage of those classes (see :func:`_usage`), joined in Python.
    When every provider is already known (``providers``) and no class is
    restricted to trees, the roots come from there and the inventories are
    read on their own:

    SELECT inv.resource_provider_id, inv.resource_class_id, inv.total, inv.reserved,
           inv.min_unit, inv.max_unit, inv.step_size, inv.allocation_ratio
    FROM inventories AS inv [WHERE inv.resource_class_id IN (:classes)]
    """
    trees_by_class: dict[int, set[int | None]] = {}
    for group in groups:
        if group.impossible:
            continue
        for rc in group.resources:
            trees_by_class.setdefault(rc, set()).add(group.tree_root)
    if not trees_by_class:
        return set()
    whole = {rc for rc, trees in trees_by_class.items() if None in trees}
    every_class = every_class and len(whole) == len(trees_by_class)
    class_ids = sorted(trees_by_class)
    if providers is not None and len(whole) == len(trees_by_class):
        return _whole_cloud_inventories(conn, class_ids, facts, every_class, providers)
    rp = resource_providers
    statement = (
        sa.select(
            rp.c.id,
            rp.c.root_provider_id,
            inventories.c.resource_class_id,
            inventories.c.total,
            inventories.c.reserved,
            inventories.c.min_unit,
            inventories.c.max_unit,
            inventories.c.step_size,
            inventories.c.allocation_ratio,
        )
        .select_from(inventories.join(rp, rp.c.id == inventories.c.resource_provider_id))
    )
    if not every_class:
        statement = statement.where(inventories.c.resource_class_id.in_(class_ids))
    if len(whole) < len(trees_by_class):
        branches = []
        if whole:
            branches.append(inventories.c.resource_class_id.in_(sorted(whole)))
        for rc, trees in sorted(trees_by_class.items()):
            if rc not in whole:
                roots = sorted(t for t in trees if t is not None)
                branches.append(sa.and_(inventories.c.resource_class_id == rc, rp.c.root_provider_id.in_(roots)))
        statement = statement.where(sa.or_(*branches))
    used_by = _usage_by_class(conn, None if every_class else class_ids)
    inventory = facts.inventory
    root_of = facts.root_of
    seen_classes: set[int] = set()
    no_usage: dict[int, int] = {}
    rows: dict[int, InventoryRow] = {}
    usage_of = no_usage
    last_rc = None
    # fetchall() and one pass: the rows come grouped by class more often than not.
    for rp_id, root_id, rc, total, reserved, min_unit, max_unit, step, ratio in conn.execute(statement).all():
        root_of[rp_id] = root_id
        if rc != last_rc:
            last_rc = rc
            found_rows = inventory.get(rc)
            if found_rows is None:
                found_rows = inventory[rc] = {}
                seen_classes.add(rc)
            rows = found_rows
            usage_of = used_by.get(rc, no_usage)
        rows[rp_id] = ((total - reserved) * ratio, usage_of.get(rp_id, 0), min_unit, max_unit, step)
    # With every class read, classes no provider has are complete too.
    facts.every_class = every_class
    return whole | seen_classes if every_class else whole


def _usage_by_class(conn: Connection, class_ids: Collection[int] | None) -> dict[int, dict[int, int]]:
    """resource class id -> provider id -> used (keyed by class, then
    provider: no tuple keys to build per row)."""
    used_by: dict[int, dict[int, int]] = {}
    if class_ids is None:
        rows = _plain_rows(conn, "usage of every class", lambda: _usage(None))
    else:
        rows = conn.execute(_usage(class_ids)).all()
    for rp_id, rc, used in rows:
        found = used_by.get(rc)
        if found is None:
            found = used_by[rc] = {}
        found[rp_id] = int(used)
    return used_by


def _whole_cloud_inventories(
    conn: Connection, class_ids: list[int], facts: Facts, every_class: bool, providers: dict[int, ProviderRow]
) -> set[int]:
    """:func:`inventories_of_classes` with the roots taken from ``providers``."""
    found, units = _inventories_and_units(conn, None if every_class else class_ids)
    used_by = _usage_by_class(conn, None if every_class else class_ids)
    inventory = facts.inventory
    root_of = facts.root_of
    seen_classes: set[int] = set()
    no_usage: dict[int, int] = {}
    rows: dict[int, InventoryRow] = {}
    usage_of = no_usage
    last_rc = None
    for rp_id, rc, available, ratio, max_unit in found:
        provider = providers.get(rp_id)
        if provider is None:
            # Created after the providers were read: not part of this answer.
            continue
        root_of[rp_id] = provider[2]
        if rc != last_rc:
            last_rc = rc
            found_rows = inventory.get(rc)
            if found_rows is None:
                found_rows = inventory[rc] = {}
                seen_classes.add(rc)
            rows = found_rows
            usage_of = used_by.get(rc, no_usage)
        if max_unit is None:
            min_unit, max_unit, step = units[(rp_id, rc)]
            rows[rp_id] = (available * ratio, usage_of.get(rp_id, 0), min_unit, max_unit, step)
        else:
            rows[rp_id] = (available * ratio, usage_of.get(rp_id, 0), 1, max_unit, 1)
    facts.every_class = every_class
    return set(class_ids) | seen_classes if every_class else set(class_ids)


def _inventories_and_units(
    conn: Connection, class_ids: list[int] | None
) -> tuple[list[Any], dict[tuple[int, int], tuple[int, int, int]]]:
    """(provider, class, total - reserved, allocation ratio, max_unit) of every
    inventory (of ``class_ids`` if given), ``max_unit`` None where
    ``min_unit`` or ``step_size`` is not 1; and (provider, class) ->
    (min_unit, max_unit, step_size) of those.

    Most inventories have ``min_unit`` and ``step_size`` 1, and each value
    read costs about as much as a row found, so the units of the others are
    read apart, and only when there are some:

    SELECT resource_provider_id, resource_class_id, total - reserved, allocation_ratio,
           CASE WHEN min_unit = 1 AND step_size = 1 THEN max_unit END
    FROM inventories [WHERE resource_class_id IN (:classes)]

    SELECT resource_provider_id, resource_class_id, min_unit, max_unit, step_size
    FROM inventories WHERE NOT (min_unit = 1 AND step_size = 1) [AND resource_class_id IN (:classes)]
    """
    inv = inventories
    plain_units = sa.and_(inv.c.min_unit == sa.literal_column("1"), inv.c.step_size == sa.literal_column("1"))

    def rows(name: str, columns: list[Any], *where: Any) -> list[Any]:
        statement = sa.select(inv.c.resource_provider_id, inv.c.resource_class_id, *columns).where(*where)
        if class_ids is None:
            return _plain_rows(conn, name, lambda: statement)
        return conn.execute(statement.where(inv.c.resource_class_id.in_(class_ids))).all()

    found = rows("inventories", [inv.c.total - inv.c.reserved, inv.c.allocation_ratio, sa.case((plain_units, inv.c.max_unit))])
    if all(row[4] is not None for row in found):
        return found, {}
    units = {
        (rp, rc): (min_unit, max_unit, step)
        for rp, rc, min_unit, max_unit, step in rows(
            "units of inventories", [inv.c.min_unit, inv.c.max_unit, inv.c.step_size], sa.not_(plain_units)
        )
    }
    if all(row[4] is not None or (row[0], row[1]) in units for row in found):
        return found, units
    # Units changed between the two queries: read everything again, at once.
    everything = rows(
        "inventories with units",
        [inv.c.total - inv.c.reserved, inv.c.allocation_ratio, inv.c.min_unit, inv.c.max_unit, inv.c.step_size],
    )
    units = {(rp, rc): (min_unit, max_unit, step) for rp, rc, _available, _ratio, min_unit, max_unit, step in everything}
    return [(rp, rc, available, ratio, None) for rp, rc, available, ratio, *_units in everything], units


def traits_and_aggregates(conn: Connection, trait_ids: Collection[int], aggregate_ids: Collection[int], facts: Facts) -> None:
    """Fill ``facts.traits_of`` / ``facts.aggs_of`` for the requested traits and aggregates.

    SELECT 1, rpt.resource_provider_id, rp.root_provider_id, rpt.trait_id
    FROM resource_provider_traits AS rpt JOIN resource_providers AS rp ON rp.id = rpt.resource_provider_id
    WHERE rpt.trait_id IN (:trait_ids)
    UNION ALL
    SELECT 2, rpa.resource_provider_id, rp.root_provider_id, rpa.aggregate_id
    FROM resource_provider_aggregates AS rpa JOIN resource_providers AS rp ON rp.id = rpa.resource_provider_id
    WHERE rpa.aggregate_id IN (:aggregate_ids)
    """
    rp = resource_providers
    parts = []
    if trait_ids:
        rpt = resource_provider_traits
        parts.append(
            sa.select(sa.literal(_KIND_TRAIT), rpt.c.resource_provider_id, rp.c.root_provider_id, rpt.c.trait_id)
            .select_from(rpt.join(rp, rp.c.id == rpt.c.resource_provider_id))
            .where(rpt.c.trait_id.in_(sorted(trait_ids)))
        )
    if aggregate_ids:
        rpa = resource_provider_aggregates
        parts.append(
            sa.select(sa.literal(_KIND_AGG), rpa.c.resource_provider_id, rp.c.root_provider_id, rpa.c.aggregate_id)
            .select_from(rpa.join(rp, rp.c.id == rpa.c.resource_provider_id))
            .where(rpa.c.aggregate_id.in_(sorted(aggregate_ids)))
        )
    if not parts:
        return
    statement = parts[0] if len(parts) == 1 else sa.union_all(*parts)
    root_of = facts.root_of
    for kind, rp_id, root_id, ident in conn.execute(statement).all():
        root_of[rp_id] = root_id
        target = facts.traits_of if kind == _KIND_TRAIT else facts.aggs_of
        found = target.get(rp_id)
        if found is None:
            target[rp_id] = {ident}
        else:
            found.add(ident)


def sharing_anchors(conn: Connection, sharing_ids: Collection[int], facts: Facts) -> None:
    """Fill ``facts.anchors_of``: the roots of every tree that shares an aggregate
    with each sharing provider (its own tree included).

    SELECT DISTINCT sa.resource_provider_id, rp.root_provider_id
    FROM resource_provider_aggregates AS sa
    JOIN resource_provider_aggregates AS oa ON oa.aggregate_id = sa.aggregate_id
    JOIN resource_providers AS rp ON rp.id = oa.resource_provider_id
    WHERE sa.resource_provider_id IN (:sharing_ids)
    """
    if not sharing_ids:
        return
    mine = resource_provider_aggregates.alias("sa")
    other = resource_provider_aggregates.alias("oa")
    rp = resource_providers
    statement = (
        sa.select(mine.c.resource_provider_id, rp.c.root_provider_id)
        .select_from(
            mine.join(other, other.c.aggregate_id == mine.c.aggregate_id).join(rp, rp.c.id == other.c.resource_provider_id)
        )
        .where(mine.c.resource_provider_id.in_(sorted(sharing_ids)))
        .distinct()
    )
    for sharing_id, root_id in conn.execute(statement).all():
        facts.anchors_of.setdefault(sharing_id, set()).add(root_id)


def gather_facts(
    conn: Connection,
    request: CandidateRequest,
    groups: list[ResolvedGroup],
    names: Names,
    every_class: bool = False,
    providers: dict[int, ProviderRow] | None = None,
) -> Facts:
    facts = Facts(inventory={}, root_of={}, traits_of={}, aggs_of={}, sharing=set(), anchors_of={})
    sharing_trait = names.traits.get(SHARING_TRAIT)
    facts.root_required = frozenset(names.traits[t] for t in request.root_required)
    facts.root_forbidden = frozenset(names.traits[t] for t in request.root_forbidden)
    facts.complete_classes = inventories_of_classes(conn, groups, facts, every_class=every_class, providers=providers)
    trait_ids = set(facts.root_required | facts.root_forbidden)
    aggregate_ids: set[int] = set()
    for group in groups:
        trait_ids |= group.forbidden
        for any_of in group.required:
            trait_ids |= any_of
        aggregate_ids |= group.forbidden_aggs
        for any_of in group.member_of:
            aggregate_ids |= any_of
    if sharing_trait is not None:
        trait_ids.add(sharing_trait)
    traits_and_aggregates(conn, trait_ids, aggregate_ids, facts)
    if sharing_trait is not None:
        facts.sharing = {rp for rp, found in facts.traits_of.items() if sharing_trait in found}
        # Only sharing providers that can serve something need their anchors.
        serving = set(facts.root_of) if any(not g.resources for g in groups) else set()
        for rows in facts.inventory.values():
            serving.update(rows)
        sharing_anchors(conn, facts.sharing & serving, facts)
    return facts


# ------------------------------------------------------------- the answer


class ProviderRow(NamedTuple):
    uuid: str
    parent_id: int | None
    root_id: int


def _id_filter(column: sa.ColumnElement, ids: Collection[int]) -> sa.ColumnElement | None:
    if len(ids) > MAX_IN_LIST:
        return None
    return column.in_(sorted(ids))


def providers_of_trees(conn: Connection, roots: Collection[int], providers: Collection[int] = ()) -> dict[int, ProviderRow]:
    """uuid, parent and root of every provider in ``roots``' trees and of ``providers``.

    SELECT id, uuid, parent_provider_id, root_provider_id FROM resource_providers
    WHERE root_provider_id IN (:roots) OR id IN (:providers)
    """
    rp = resource_providers
    roots = set(roots)
    providers = set(providers)
    statement = sa.select(rp.c.id, rp.c.uuid, rp.c.parent_provider_id, rp.c.root_provider_id)
    clauses = []
    if roots:
        clauses.append(_id_filter(rp.c.root_provider_id, roots))
    if providers:
        clauses.append(_id_filter(rp.c.id, providers))
    if not clauses:
        return {}
    if all(clause is not None for clause in clauses):
        statement = statement.where(sa.or_(*clauses))
    found = {}
    make = tuple.__new__
    for rp_id, uuid, parent_id, root_id in conn.execute(statement).all():
        if root_id in roots or rp_id in providers:
            found[rp_id] = make(ProviderRow, (uuid, parent_id, root_id))
    return found


def all_providers(conn: Connection) -> dict[int, ProviderRow]:
    """uuid, parent and root of every provider.

    SELECT id, uuid, parent_provider_id, root_provider_id FROM resource_providers
    """
    rp = resource_providers
    rows = _plain_rows(
        conn, "every provider", lambda: sa.select(rp.c.id, rp.c.uuid, rp.c.parent_provider_id, rp.c.root_provider_id)
    )
    make = tuple.__new__
    return {rp_id: make(ProviderRow, (uuid, parent_id, root_id)) for rp_id, uuid, parent_id, root_id in rows}


def _other_classes(exclude: Collection[int]) -> sa.Select:
    # SELECT id FROM resource_classes WHERE id NOT IN (:exclude)
    return sa.select(resource_classes.c.id).where(resource_classes.c.id.not_in(sorted(exclude)))


def summary_inventories(
    conn: Connection,
    provider_ids: Collection[int],
    *,
    only: Collection[int] | None = None,
    exclude: Collection[int] = (),
) -> dict[int, list[tuple[int, int, int]]]:
    """provider id -> [(resource class id, capacity, used)] for the classes in
    ``only`` (all when None) but not in ``exclude``.

    SELECT inv.resource_provider_id, inv.resource_class_id, inv.total, inv.reserved,
           inv.allocation_ratio, COALESCE(usage.used, 0)
    FROM inventories AS inv
    LEFT JOIN (SELECT resource_provider_id, resource_class_id, SUM(used) AS used
               FROM allocations WHERE resource_provider_id IN (:providers)
               GROUP BY resource_provider_id, resource_class_id) AS usage
      ON usage.resource_provider_id = inv.resource_provider_id
     AND usage.resource_class_id = inv.resource_class_id
    WHERE inv.resource_provider_id IN (:providers)
      [AND inv.resource_class_id IN (:only)]
      [AND inv.resource_class_id IN (SELECT id FROM resource_classes WHERE id NOT IN (:exclude))]

    (Excluded classes are turned into the list of the other ones so that
    the resource-class indexes serve the query.)
    """
    if not provider_ids or (only is not None and not only):
        return {}
    usage_query = sa.select(
        allocations.c.resource_provider_id,
        allocations.c.resource_class_id,
        sa.func.sum(allocations.c.used).label("used"),
    )
    in_providers = _id_filter(allocations.c.resource_provider_id, provider_ids)
    if in_providers is not None:
        usage_query = usage_query.where(in_providers)
    if only is not None:
        usage_query = usage_query.where(allocations.c.resource_class_id.in_(sorted(only)))
    if exclude:
        usage_query = usage_query.where(allocations.c.resource_class_id.in_(_other_classes(exclude)))
    usage = usage_query.group_by(allocations.c.resource_provider_id, allocations.c.resource_class_id).subquery("usage")
    inv = inventories
    statement = sa.select(
        inv.c.resource_provider_id,
        inv.c.resource_class_id,
        inv.c.total,
        inv.c.reserved,
        inv.c.allocation_ratio,
        sa.func.coalesce(usage.c.used, 0),
    ).select_from(
        inv.outerjoin(
            usage,
            sa.and_(
                usage.c.resource_provider_id == inv.c.resource_provider_id,
                usage.c.resource_class_id == inv.c.resource_class_id,
            ),
        )
    )
    in_providers = _id_filter(inv.c.resource_provider_id, provider_ids)
    if in_providers is not None:
        statement = statement.where(in_providers)
    if only is not None:
        statement = statement.where(inv.c.resource_class_id.in_(sorted(only)))
    if exclude:
        statement = statement.where(inv.c.resource_class_id.in_(_other_classes(exclude)))
    wanted = provider_ids if isinstance(provider_ids, (set, frozenset, dict)) else set(provider_ids)
    found: dict[int, list[tuple[int, int, int]]] = {}
    for rp_id, rc, total, reserved, ratio, used in conn.execute(statement).all():
        if rp_id in wanted:
            found.setdefault(rp_id, []).append((rc, int((total - reserved) * ratio), int(used)))
    return found


def summary_traits(conn: Connection, provider_ids: Collection[int]) -> dict[int, list[str]]:
    """provider id -> sorted trait names.

    SELECT rpt.resource_provider_id, traits.name
    FROM resource_provider_traits AS rpt JOIN traits ON traits.id = rpt.trait_id
    WHERE rpt.resource_provider_id IN (:providers)
    """
    if not provider_ids:
        return {}
    rpt = resource_provider_traits
    statement = sa.select(rpt.c.resource_provider_id, traits.c.name).select_from(
        rpt.join(traits, traits.c.id == rpt.c.trait_id)
    )
    in_providers = _id_filter(rpt.c.resource_provider_id, provider_ids)
    if in_providers is not None:
        statement = statement.where(in_providers)
    wanted = provider_ids if isinstance(provider_ids, (set, frozenset, dict)) else set(provider_ids)
    found: dict[int, list[str]] = {}
    for rp_id, name in conn.execute(statement).all():
        if rp_id in wanted:
            found.setdefault(rp_id, []).append(name)
    for names in found.values():
        names.sort()
    return found


def class_names(conn: Connection, class_ids: Iterable[int], standard_classes: dict[str, int]) -> dict[int, str]:
    """Resource class id -> name (standard ones from the cache).

    SELECT id, name FROM resource_classes WHERE id IN (:ids)
    """
    reverse = {ident: name for name, ident in standard_classes.items()}
    found = {}
    rest = []
    for ident in set(class_ids):
        if ident in reverse:
            found[ident] = reverse[ident]
        else:
            rest.append(ident)
    if rest:
        statement = sa.select(resource_classes.c.id, resource_classes.c.name).where(resource_classes.c.id.in_(sorted(rest)))
        found.update({ident: name for ident, name in conn.execute(statement)})
    return found


# ------------------------------------------------------------- the search


@dataclass
class Answer:
    """Candidates and everything needed to render them."""

    candidates: list[Candidate]
    providers: dict[int, ProviderRow]
    # providers to summarise, in a stable order
    summarised: list[int]
    inventories: dict[int, list[tuple[int, int, int]]]
    traits: dict[int, list[str]]
    class_names: dict[int, str]


def _summary_inventories(
    conn: Connection, summarised: list[int], facts: Facts, requested: set[int], all_classes: bool
) -> tuple[dict[int, list[tuple[int, int, int]]], set[int]]:
    """Summaries' inventories, and the classes they (or the request) name:
    classes read for the whole cloud come from ``facts``; the database is
    asked only for the rest."""
    known = facts.complete_classes if all_classes else facts.complete_classes & requested
    if all_classes and facts.every_class:
        found: dict[int, list[tuple[int, int, int]]] = {}
    elif all_classes:
        found = summary_inventories(conn, summarised, exclude=known)
    else:
        found = summary_inventories(conn, summarised, only=requested - known)
    classes = set(requested)
    for rows in found.values():
        classes.update([rc for rc, _capacity, _used in rows])
    for rc in sorted(known):
        rows = facts.inventory.get(rc)
        if not rows:
            continue
        classes.add(rc)
        for rp in summarised:
            row = rows.get(rp)
            if row is not None:
                entry = (rc, int(row[0]), row[1])
                listed = found.get(rp)
                if listed is None:
                    found[rp] = [entry]
                else:
                    listed.append(entry)
    return found, classes


def find_candidates(
    conn: Connection,
    request: CandidateRequest,
    *,
    standard_classes: dict[str, int],
    standard_traits: dict[str, int],
    randomize: bool = False,
    all_classes_in_summaries: bool = True,
    with_traits: bool = True,
) -> Answer:
    """The whole search, inside one read transaction (:class:`UnknownNames` on bad names)."""
    groups, names = resolve_request(conn, request, standard_classes, standard_traits)
    empty = Answer([], {}, [], {}, {}, {})
    if any(group.impossible for group in groups):
        return empty
    # A search over the whole cloud describes most providers in the end:
    # read them all once, first (their roots serve the search as well).
    everyone = all_providers(conn) if all(group.tree_root is None for group in groups) else None
    facts = gather_facts(conn, request, groups, names, every_class=all_classes_in_summaries, providers=everyone)
    per_group: dict[str, Iterable[GroupRequest]] = {}
    parent_of: dict[int, int | None] = {}
    if len(groups) == 1:
        # Consumed lazily by the merge: a limit ends the search early.
        per_group[groups[0].suffix] = group_requests(groups[0], facts)
    else:
        for group in groups:
            found = list(group_requests(group, facts))
            if not found:
                return empty
            per_group[group.suffix] = found
        # Only anchors every group can reach matter from here on.
        anchors = set.intersection(*({r.anchor for r in found} for found in per_group.values()))
        if not anchors:
            return empty
        if request.same_subtrees:
            roots = {facts.root_of[rp] for found in per_group.values() for r in found if r.anchor in anchors for rp in r.providers}
            parent_of = {rp: row.parent_id for rp, row in providers_of_trees(conn, roots).items()}
    merge = Merge(
        groups=groups,
        group_policy=request.group_policy,
        same_subtrees=request.same_subtrees,
        parent_of=parent_of,
        nested_aware=request.nested_aware,
    )
    chosen = select(merge_candidates(merge, per_group, facts), request.limit, randomize)
    if not chosen:
        return empty
    used = used_providers(chosen)
    # When every group asks for resources the mappings name exactly the
    # providers used; groups without resources name others too.
    named = used if all(group.resources for group in groups) else named_providers(chosen)
    root_of = facts.root_of
    named_roots = {root_of[rp] for rp in named}
    if everyone is not None:
        providers = {rp: row for rp, row in everyone.items() if row[2] in named_roots}
    else:
        providers = providers_of_trees(conn, named_roots)
    tree_roots, single = summary_providers(used, root_of, request.nested_aware)
    if tree_roots == named_roots and not single:
        summarised = sorted(providers)
    else:
        summarised = sorted(rp for rp, row in providers.items() if row.root_id in tree_roots or rp in single)
    requested_classes = {rc for group in groups for rc in group.resources}
    inventories_found, used_classes = _summary_inventories(conn, summarised, facts, requested_classes, all_classes_in_summaries)
    traits_found = summary_traits(conn, summarised) if with_traits else {}
    return Answer(
        candidates=chosen,
        providers=providers,
        summarised=summarised,
        inventories=inventories_found,
        traits=traits_found,
        class_names=class_names(conn, used_classes, standard_classes),
    )
