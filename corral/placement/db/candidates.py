"""The search behind ``GET /allocation_candidates``.

Few round trips: one query checks that this process's snapshot of the
provider topology (:mod:`corral.placement.db.topology`: providers,
inventories, traits, aggregates) is current, one sums the usage, and one
resolves names that are neither standard nor in the snapshot (custom
resource classes and traits) when the request has some.  Everything else
happens in :mod:`corral.placement.domain.candidates`, over plain integer
structures.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from corral.placement.db.tables import (
    allocations,
    placement_aggregates,
    resource_classes,
    resource_providers,
    traits,
)
from corral.placement.db.topology import ProviderRow, SummaryRows, Topology, plain_rows
from corral.placement.db.topology_cache import TopologyCache
from corral.placement.domain.candidates import (
    Candidate,
    CandidateRequest,
    ClassIndex,
    Facts,
    GroupRequest,
    InventoryRow,
    Merge,
    RequestGroup,
    ResolvedGroup,
    every_candidate,
    group_requests,
    merge_candidates,
    select,
    summary_providers,
    used_providers,
)

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
    topology: Topology,
    standard_classes: dict[str, int],
    standard_traits: dict[str, int],
) -> tuple[list[ResolvedGroup], Names]:
    """Ids for the request's names: classes and traits from the start-up
    cache or the database, aggregates and ``in_tree`` providers from the
    topology (an aggregate no provider is in can match nothing, exactly
    like one that does not exist)."""
    names = resolve_names(
        conn,
        request.resource_class_names(),
        request.trait_names(),
        standard_classes=standard_classes,
        standard_traits=standard_traits,
    )
    known_aggregates = topology.aggregate_ids
    names.aggregates = {uuid: known_aggregates[uuid] for uuid in request.aggregate_uuids() if uuid in known_aggregates}
    for group in request.groups.values():
        rp_id = topology.ids_by_uuid.get(group.in_tree) if group.in_tree is not None else None
        if rp_id is not None:
            names.tree_roots[group.in_tree] = topology.root_of[rp_id]
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


def usage_by_class(conn: Connection, class_ids: Collection[int] | None) -> dict[int, dict[int, int]]:
    """resource class id -> provider id -> used, for ``class_ids`` (every class when None)."""
    if class_ids is not None and not class_ids:
        return {}
    used_by: dict[int, dict[int, int]] = {}
    for rp_id, rc, used in plain_rows(conn, _usage(class_ids)):
        found = used_by.get(rc)
        if found is None:
            found = used_by[rc] = {}
        found[rp_id] = int(used)
    return used_by


def build_facts(
    topology: Topology, groups: list[ResolvedGroup], used_by: dict[int, dict[int, int]], names: Names,
    request: CandidateRequest,
) -> Facts:
    """The inventories of the requested classes with their usage, and the
    topology's traits and aggregates.  A class asked for only by groups
    restricted to trees (``in_tree``) keeps only those trees' inventories."""
    trees_by_class: dict[int, set[int | None]] = {}
    for group in groups:
        for rc in group.resources:
            trees_by_class.setdefault(rc, set()).add(group.tree_root)
    inventory: dict[int, dict[int, InventoryRow]] = {}
    indexes: dict[int, ClassIndex] = {}
    for rc, trees in trees_by_class.items():
        everywhere = topology.inventory.get(rc)
        if not everywhere:
            continue
        rows = everywhere
        if None in trees:
            index = topology.index_of(rc)
            if index is not None:
                indexes[rc] = index
        else:
            members = topology.members_of
            rows = {rp: everywhere[rp] for root in trees for rp in members.get(root, ()) if rp in everywhere}
        used = used_by.get(rc)
        if used:
            if rows is everywhere:
                # The snapshot is shared: usage goes into a copy.
                rows = dict(everywhere)
            for rp_id, amount in used.items():
                row = rows.get(rp_id)
                if row is not None:
                    rows[rp_id] = (row[0], amount, row[2], row[3], row[4])
        inventory[rc] = rows
    return Facts(
        inventory=inventory,
        root_of=topology.root_of,
        traits_of=topology.traits_of,
        aggs_of=topology.aggs_of,
        sharing=topology.sharing,
        anchors_of=topology.anchors_of,
        used_by=used_by,
        indexes=indexes,
        root_required=frozenset(names.traits[t] for t in request.root_required),
        root_forbidden=frozenset(names.traits[t] for t in request.root_forbidden),
    )


# ------------------------------------------------------------- the answer


@dataclass
class Answer:
    """Candidates and everything needed to render them."""

    candidates: list[Candidate]
    # provider id -> (uuid, parent id, root id), for at least every provider named
    providers: dict[int, ProviderRow]
    # provider id -> uuid, for at least every provider named
    uuids: dict[int, str]
    # providers to summarise, in id order
    summarised: list[int]
    # provider id -> ((resource class id, capacity, used), ...); the rows of a
    # provider with nothing used are ``unused_rows[rp]`` itself
    inventories: dict[int, SummaryRows]
    unused_rows: dict[int, SummaryRows]
    # kept with the topology snapshot, for the API layer
    derived: dict[Any, Any]
    # provider id -> trait names, in the order the traits were created
    traits: dict[int, list[str]]
    class_names: dict[int, str]


EMPTY_ANSWER = Answer([], {}, {}, [], {}, {}, {}, {}, {})


def summary_rows(
    topology: Topology,
    summarised: list[int],
    used_by: dict[int, dict[int, int]],
    requested: set[int],
    all_classes: bool,
) -> dict[int, SummaryRows]:
    """provider id -> (class, capacity, used) of every class (``all_classes``)
    or of the requested ones, from the snapshot and the usage."""
    capacities = topology.capacities
    with_usage: set[int] = set().union(*used_by.values()) if used_by else set()
    no_usage: dict[int, int] = {}
    found: dict[int, SummaryRows] = {}
    for rp in summarised:
        rows = capacities.get(rp)
        if rows is None:
            continue
        if rp in with_usage:
            rows = tuple([(rc, capacity, used_by.get(rc, no_usage).get(rp, 0)) for rc, capacity, _none in rows])
        if not all_classes:
            rows = tuple([row for row in rows if row[0] in requested])
        found[rp] = rows
    return found


def _parents_in_trees(topology: Topology, roots: Iterable[int]) -> dict[int, int | None]:
    providers = topology.providers
    return {rp: providers[rp].parent_id for root in roots for rp in topology.members_of.get(root, ())}


def _requests_per_group(
    groups: list[ResolvedGroup], facts: Facts
) -> dict[str, Iterable[GroupRequest]] | None:
    """Each group's requests (lazily for a single group, so that a limit ends
    the search early); None when some group has none."""
    if len(groups) == 1:
        return {groups[0].suffix: group_requests(groups[0], facts)}
    per_group: dict[str, Iterable[GroupRequest]] = {}
    for group in groups:
        found = list(group_requests(group, facts))
        if not found:
            return None
        per_group[group.suffix] = found
    return per_group


def find_candidates(
    conn: Connection,
    request: CandidateRequest,
    *,
    standard_classes: dict[str, int],
    standard_traits: dict[str, int],
    randomize: bool = False,
    all_classes_in_summaries: bool = True,
    with_traits: bool = True,
    topology_cache: TopologyCache | None = None,
) -> Answer:
    """The whole search, inside one read transaction (:class:`UnknownNames` on bad names).

    Without a ``topology_cache`` the topology is read afresh.
    """
    topology = (topology_cache or TopologyCache()).snapshot(conn)
    groups, names = resolve_request(conn, request, topology, standard_classes, standard_traits)
    if any(group.impossible for group in groups):
        return EMPTY_ANSWER
    requested_classes = {rc for group in groups for rc in group.resources}
    used_by = usage_by_class(conn, None if all_classes_in_summaries else requested_classes)
    facts = build_facts(topology, groups, used_by, names, request)
    per_group = _requests_per_group(groups, facts)
    if per_group is None:
        return EMPTY_ANSWER
    parent_of: dict[int, int | None] = {}
    if request.same_subtrees and len(groups) > 1:
        # Only anchors every group can reach matter.
        anchors = set.intersection(*({r.anchor for r in found} for found in per_group.values()))
        roots = {facts.root_of[rp] for found in per_group.values() for r in found if r.anchor in anchors for rp in r.providers}
        parent_of = _parents_in_trees(topology, roots)
    merge = Merge(
        groups=groups,
        group_policy=request.group_policy,
        same_subtrees=request.same_subtrees,
        parent_of=parent_of,
        nested_aware=request.nested_aware,
    )
    if request.limit is None:
        candidates: Iterable[Candidate] = every_candidate(merge, per_group, facts)
    else:
        candidates = merge_candidates(merge, per_group, facts)
    chosen = select(candidates, request.limit, randomize)
    if not chosen:
        return EMPTY_ANSWER
    used = used_providers(chosen)
    tree_roots, single = summary_providers(used, topology.root_of, request.nested_aware)
    summarised = sorted({rp for root in tree_roots for rp in topology.members_of[root]} | single)
    return Answer(
        candidates=chosen,
        providers=topology.providers,
        uuids=topology.uuids,
        summarised=summarised,
        inventories=summary_rows(topology, summarised, used_by, requested_classes, all_classes_in_summaries),
        unused_rows=topology.capacities,
        derived=topology.derived,
        traits=topology.trait_names_of if with_traits else {},
        class_names=topology.class_names,
    )
