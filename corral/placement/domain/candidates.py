"""Allocation candidates: the request model and candidate assembly.

A request is a set of *request groups* keyed by suffix.  The unsuffixed
group ("") may be satisfied by several providers of one tree plus sharing
providers; a suffixed (granular) group must be satisfied by one provider.
Request-wide parameters (limit, group_policy, root_required,
same_subtree) apply to the whole answer.

Nothing here speaks HTTP or SQL: the database layer hands over compact
facts about the providers that can serve each resource of each group, and
the functions below combine them into allocation requests.
"""

from __future__ import annotations

import itertools
import operator
import random
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

from corral.placement.domain.class_index import ClassIndex, InventoryRow

# The trait that marks a provider whose inventory is shared with every
# provider in the same aggregate.
SHARING_TRAIT = "MISC_SHARES_VIA_AGGREGATE"


@dataclass
class RequestGroup:
    """One ``resources[S]``/``required[S]``/``member_of[S]``/``in_tree[S]`` set."""

    suffix: str = ""
    # resource class name -> amount
    resources: dict[str, int] = field(default_factory=dict)
    # Each set is an any-of; the sets are AND'ed together.
    required_traits: list[frozenset[str]] = field(default_factory=list)
    forbidden_traits: set[str] = field(default_factory=set)
    # Each set is an any-of of aggregate UUIDs; the sets are AND'ed together.
    member_of: list[frozenset[str]] = field(default_factory=list)
    forbidden_aggs: set[str] = field(default_factory=set)
    in_tree: str | None = None

    @property
    def use_same_provider(self) -> bool:
        return self.suffix != ""

    def trait_names(self) -> set[str]:
        names = set(self.forbidden_traits)
        for any_of in self.required_traits:
            names.update(any_of)
        return names

    def aggregate_uuids(self) -> set[str]:
        uuids = set(self.forbidden_aggs)
        for any_of in self.member_of:
            uuids.update(any_of)
        return uuids


@dataclass
class CandidateRequest:
    """A parsed ``GET /allocation_candidates`` query."""

    groups: dict[str, RequestGroup]
    limit: int | None = None
    group_policy: str | None = None
    root_required: set[str] = field(default_factory=set)
    root_forbidden: set[str] = field(default_factory=set)
    same_subtrees: list[set[str]] = field(default_factory=list)
    # Providers of nested trees take part (microversion 1.29 and later).
    nested_aware: bool = True

    def trait_names(self) -> set[str]:
        names = self.root_required | self.root_forbidden
        for group in self.groups.values():
            names |= group.trait_names()
        return names

    def resource_class_names(self) -> set[str]:
        names: set[str] = set()
        for group in self.groups.values():
            names.update(group.resources)
        return names

    def aggregate_uuids(self) -> set[str]:
        uuids: set[str] = set()
        for group in self.groups.values():
            uuids |= group.aggregate_uuids()
        return uuids


@dataclass
class ProviderFilter:
    """The filters of ``GET /resource_providers`` (all optional, AND'ed)."""

    name: str | None = None
    uuid: str | None = None
    in_tree: str | None = None
    resources: dict[str, int] = field(default_factory=dict)
    required_traits: list[frozenset[str]] = field(default_factory=list)
    forbidden_traits: set[str] = field(default_factory=set)
    member_of: list[frozenset[str]] = field(default_factory=list)
    forbidden_aggs: set[str] = field(default_factory=set)


# ---------------------------------------------------------------- assembly
#
# Everything below works on internal integer ids.  The database layer
# resolves names to ids (``ResolvedGroup``) and gathers ``Facts``; the
# functions produce ``Candidate`` tuples that the API layer renders.


@dataclass
class ResolvedGroup:
    """A request group with names resolved to internal ids.

    An any-of set that names only unknown aggregates becomes empty, and so
    does ``tree_root`` for an unknown ``in_tree`` provider: the group then
    matches nothing (``impossible``).
    """

    suffix: str
    # resource class id -> amount, in resource class id order
    resources: dict[int, int]
    required: list[frozenset[int]]
    forbidden: frozenset[int]
    member_of: list[frozenset[int]]
    forbidden_aggs: frozenset[int]
    tree_root: int | None = None
    impossible: bool = False

    @property
    def use_same_provider(self) -> bool:
        return self.suffix != ""


@dataclass
class Facts:
    """What the database knows that matters to one request."""

    # resource class id -> provider id -> inventory of that class (never modified)
    inventory: dict[int, dict[int, InventoryRow]]
    # provider id -> root provider id
    root_of: dict[int, int]
    # provider id -> its traits
    traits_of: dict[int, frozenset[int]]
    # provider id -> the aggregates it is in
    aggs_of: dict[int, frozenset[int]]
    # providers with the sharing trait
    sharing: frozenset[int]
    # sharing provider id -> roots of every tree sharing an aggregate with it
    anchors_of: dict[int, frozenset[int]]
    # resource class id -> provider id -> used (only providers with usage)
    used_by: dict[int, dict[int, int]] = field(default_factory=dict)
    # resource class id -> its index (see ClassIndex)
    indexes: dict[int, ClassIndex] = field(default_factory=dict)
    # root_required: traits every anchor root must have / must not have
    root_required: frozenset[int] = frozenset()
    root_forbidden: frozenset[int] = frozenset()
    _anchor_ok: dict[int, bool] = field(default_factory=dict)

    def anchor_ok(self, root: int) -> bool:
        if not (self.root_required or self.root_forbidden):
            return True
        known = self._anchor_ok.get(root)
        if known is None:
            traits = self.traits_of.get(root, frozenset())
            known = self.root_required <= traits and not (traits & self.root_forbidden)
            self._anchor_ok[root] = known
        return known


# What one provider gives to a candidate: ((resource class id, amount), ...)
# in class order.  The same tuples are shared by every candidate that asks
# the same of a provider, which keeps the answer small and quick to render.
Resources = tuple[tuple[int, int], ...]
# (provider id, resources) per provider, in provider order
Allocations = tuple[tuple[int, Resources], ...]


class GroupRequest(NamedTuple):
    """One way to satisfy one group."""

    anchor: int
    allocations: Allocations
    providers: frozenset[int]


class Candidate(NamedTuple):
    """One allocation request satisfying every group."""

    anchor: int
    allocations: Allocations
    # (suffix, providers) in request-group order
    mappings: tuple[tuple[str, frozenset[int]], ...]
    # the providers the allocations use
    used: frozenset[int]

    def providers(self) -> frozenset[int]:
        return self.used


def providers_in_aggregates(member_of: list[frozenset[int]], aggs_of: dict[int, frozenset[int]]) -> set[int]:
    """Providers that are, themselves, in at least one aggregate of every any-of set."""
    return {rp for rp, aggs in aggs_of.items() if all(any_of & aggs for any_of in member_of)}


def providers_in_any(aggregates: frozenset[int], aggs_of: dict[int, frozenset[int]]) -> set[int]:
    return {rp for rp, aggs in aggs_of.items() if aggs & aggregates}


def _traits_ok(providers: Iterable[int], group: ResolvedGroup, traits_of: dict[int, frozenset[int]]) -> bool:
    """The providers have none of the forbidden traits and, together, every required one."""
    union: set[int] = set()
    for rp in providers:
        traits = traits_of.get(rp)
        if traits:
            if traits & group.forbidden:
                return False
            union |= traits
    return all(any_of & union for any_of in group.required)


def _fitting(group: ResolvedGroup, rc: int, amount: int, facts: Facts) -> Iterator[tuple[int, int]]:
    """(provider, root) of every provider with room for ``amount`` of ``rc``."""
    tree_root = group.tree_root
    root_of = facts.root_of
    for rp, (capacity, used, min_unit, max_unit, step) in facts.inventory.get(rc, {}).items():
        if used + amount > capacity or amount < min_unit or amount > max_unit or amount % step:
            continue
        root = root_of[rp]
        if tree_root is None or root == tree_root:
            yield rp, root


def _providers_by_anchor(group: ResolvedGroup, rc: int, amount: int, facts: Facts) -> dict[int, list[int]]:
    """anchor root -> providers that may supply ``amount`` of ``rc`` to a candidate anchored there."""
    in_aggs = providers_in_aggregates(group.member_of, facts.aggs_of) if group.member_of else None
    bad = providers_in_any(group.forbidden_aggs, facts.aggs_of) if group.forbidden_aggs else None
    anchor_ok = facts.anchor_ok
    sharing = facts.sharing
    plain = in_aggs is None and bad is None and not (facts.root_required or facts.root_forbidden)
    if group.tree_root is None:
        by_root = _by_root(rc, amount, facts)
        return by_root if plain else _filtered(by_root, facts, in_aggs, bad)
    by_anchor: dict[int, list[int]] = {}
    for rp, root in _fitting(group, rc, amount, facts):
        if plain and rp not in sharing:
            found = by_anchor.get(root)
            if found is None:
                by_anchor[root] = [rp]
            else:
                found.append(rp)
            continue
        anchors = [root]
        if rp in sharing and group.tree_root is None and (in_aggs is None or rp in in_aggs):
            anchors.extend(a for a in facts.anchors_of.get(rp, ()) if a != root)
        for anchor in anchors:
            if not anchor_ok(anchor):
                continue
            if in_aggs is not None and rp not in in_aggs and anchor not in in_aggs:
                continue
            if bad is not None and (rp in bad or anchor in bad):
                continue
            found = by_anchor.get(anchor)
            if found is None:
                by_anchor[anchor] = [rp]
            else:
                found.append(rp)
    return by_anchor


def _filtered(
    by_anchor: dict[int, list[int]], facts: Facts, in_aggs: set[int] | None, bad: set[int] | None
) -> dict[int, list[int]]:
    """``by_anchor`` less the anchors and providers that aggregates or root
    traits rule out: a forbidden aggregate excludes its members and every
    tree anchored at one; with ``member_of`` a provider qualifies if it is
    a member or its own root is (a sharing provider serving another tree
    must be a member itself)."""
    anchor_ok = facts.anchor_ok
    root_of = facts.root_of
    found: dict[int, list[int]] = {}
    for anchor, providers in by_anchor.items():
        if (bad is not None and anchor in bad) or not anchor_ok(anchor):
            continue
        if bad is None and in_aggs is None:
            found[anchor] = providers
            continue
        anchor_in = in_aggs is not None and anchor in in_aggs
        kept = []
        for rp in providers:
            if bad is not None and rp in bad:
                continue
            if in_aggs is not None and rp not in in_aggs and (not anchor_in or root_of[rp] != anchor):
                continue
            kept.append(rp)
        if kept:
            found[anchor] = kept
    return found


def _misfits(index: ClassIndex, rc: int, amount: int, facts: Facts) -> set[int]:
    """Providers of ``rc`` that cannot give ``amount``: too small, unit
    rules, or too much used."""
    rows = facts.inventory[rc]
    misfits = index.below(amount)
    for rp in index.special:
        _capacity, _used, min_unit, _max_unit, step = rows[rp]
        if amount < min_unit or amount % step:
            misfits.add(rp)
    for rp, used in facts.used_by.get(rc, {}).items():
        row = rows.get(rp)
        if row is not None and used + amount > row[0]:
            misfits.add(rp)
    return misfits


def _fitting_set(group: ResolvedGroup, rc: int, amount: int, facts: Facts) -> set[int]:
    """Every provider (of ``group``'s tree, if any) with room for ``amount`` of ``rc``."""
    index = facts.indexes.get(rc)
    if index is None or group.tree_root is not None:
        return {rp for rp, _root in _fitting(group, rc, amount, facts)}
    return facts.inventory[rc].keys() - _misfits(index, rc, amount, facts)


def _by_root(rc: int, amount: int, facts: Facts) -> dict[int, list[int]]:
    """:func:`_providers_by_anchor` without filters: the class's index less
    the providers that cannot give ``amount`` (too small, unit rules, or
    too much used)."""
    index = facts.indexes.get(rc)
    if index is None:
        return {}
    misfits = _misfits(index, rc, amount, facts)
    if not misfits:
        return index.by_anchor
    by_anchor = dict(index.by_anchor)
    affected = set()
    root_of = facts.root_of
    for rp in misfits:
        affected.add(root_of[rp])
        if rp in facts.sharing:
            affected.update(facts.anchors_of.get(rp, ()))
    for anchor in affected:
        kept = [rp for rp in by_anchor[anchor] if rp not in misfits]
        if kept:
            by_anchor[anchor] = kept
        else:
            del by_anchor[anchor]
    return by_anchor


def unnumbered_requests(group: ResolvedGroup, facts: Facts) -> Iterator[GroupRequest]:
    """The unsuffixed group: resources from one tree plus sharing providers.

    Each resource class comes whole from one provider; a combination is
    anchored at a root.  Aggregates on a root span its tree: a provider
    passes ``member_of`` when it or its anchor is a member, and fails a
    forbidden aggregate when it or its anchor is a member.  Traits are
    those of the providers the combination uses, together.
    """
    if group.impossible or not group.resources:
        return
    by_rc: list[tuple[int, int, dict[int, list[int]]]] = []
    for rc, amount in group.resources.items():
        by_anchor = _providers_by_anchor(group, rc, amount, facts)
        if not by_anchor:
            return
        by_rc.append((rc, amount, by_anchor))
    common = set(by_rc[0][2])
    for _rc, _amount, by_anchor in by_rc[1:]:
        common.intersection_update(by_anchor)
    check_traits = bool(group.required or group.forbidden)
    traits_of = facts.traits_of
    keys = [(rc, amount) for rc, amount, _ in by_rc]
    everything = tuple(keys)
    maps = [by_anchor for _rc, _amount, by_anchor in by_rc]
    shared: dict[Resources, Resources] = {}
    # Which classes share a provider in a combination (its "pattern": the
    # position of the first class each provider serves) decides how the
    # amounts are split; the split is worked out once per pattern.
    splits: dict[tuple[int, ...], tuple[tuple[int, Resources], ...]] = {}
    make = tuple.__new__
    if len(maps) == 1 and not check_traits:
        # One class: each provider with room is a request of its own.
        (only,) = maps
        for anchor in sorted(common):
            for rp in only[anchor]:
                yield make(GroupRequest, (anchor, ((rp, everything),), frozenset((rp,))))
        return
    first = operator.itemgetter(0)
    anchors = sorted(common)
    # Each anchor's providers per class, gathered without a Python loop per anchor.
    per_anchor = zip(*[map(by_anchor.__getitem__, anchors) for by_anchor in maps])
    for anchor, choices in zip(anchors, per_anchor):
        if max(map(len, choices)) == 1:
            # One provider per class (a flat tree): no product to build.
            combo = tuple(map(first, choices))
            if not check_traits and combo.count(combo[0]) == len(combo):
                # ... and the same one for every class.
                yield make(GroupRequest, (anchor, ((combo[0], everything),), frozenset(combo)))
                continue
            combos: Iterable[tuple[int, ...]] = (combo,)
        else:
            combos = itertools.product(*choices)
        for combo in combos:
            providers = frozenset(combo)
            if check_traits and not _traits_ok(providers, group, traits_of):
                continue
            if len(providers) == 1:
                allocations: Allocations = ((combo[0], everything),)
            else:
                pattern = tuple(map(combo.index, combo))
                split = splits.get(pattern)
                if split is None:
                    split = splits[pattern] = _split(pattern, keys, shared)
                allocations = tuple(sorted([(combo[first], part) for first, part in split]))
            yield make(GroupRequest, (anchor, allocations, providers))


def _split(pattern: tuple[int, ...], keys: list[tuple[int, int]], shared: dict[Resources, Resources]) -> tuple[tuple[int, Resources], ...]:
    """(position of a provider's first class, what it gives) for each provider of a combination pattern."""
    by_first: dict[int, list[tuple[int, int]]] = {}
    for first, key in zip(pattern, keys):
        by_first.setdefault(first, []).append(key)
    return tuple((first, shared.setdefault(tuple(part), tuple(part))) for first, part in by_first.items())


def _single_provider_ok(rp: int, group: ResolvedGroup, facts: Facts, in_aggs: set[int] | None, bad: set[int]) -> bool:
    if in_aggs is not None and rp not in in_aggs:
        return False
    if rp in bad:
        return False
    if group.tree_root is not None and facts.root_of.get(rp) != group.tree_root:
        return False
    traits = facts.traits_of.get(rp, set())
    if traits & group.forbidden:
        return False
    return all(any_of & traits for any_of in group.required)


def numbered_requests(group: ResolvedGroup, facts: Facts) -> Iterator[GroupRequest]:
    """A suffixed group: one provider supplies everything the group asks.

    Aggregates and traits are those of the provider itself.  A sharing
    provider also anchors at every tree it shares an aggregate with.  A
    group without resources (1.36) matches providers selected by its
    required traits or aggregates; without either it matches nothing.
    """
    if group.impossible:
        return
    in_aggs = providers_in_aggregates(group.member_of, facts.aggs_of) if group.member_of else None
    bad = providers_in_any(group.forbidden_aggs, facts.aggs_of) if group.forbidden_aggs else set()
    if group.resources:
        pools = [_fitting_set(group, rc, amount, facts) for rc, amount in group.resources.items()]
        pool = set.intersection(*pools) if len(pools) > 1 else pools[0]
    elif group.required:
        pool = {rp for rp, traits in facts.traits_of.items() if all(any_of & traits for any_of in group.required)}
        if in_aggs is not None:
            pool &= in_aggs
    elif in_aggs is not None:
        pool = set(in_aggs)
    else:
        pool = set()
    resources_of = tuple(sorted(group.resources.items()))
    # Without filters every provider of the pool qualifies and every anchor is fine.
    filtered = bool(
        in_aggs is not None or bad or group.tree_root is not None or group.forbidden or group.required
    )
    any_anchor = not (facts.root_required or facts.root_forbidden)
    root_of = facts.root_of
    sharing = facts.sharing
    anchor_ok = facts.anchor_ok
    make = tuple.__new__
    for rp in sorted(pool):
        if filtered and not _single_provider_ok(rp, group, facts, in_aggs, bad):
            continue
        root = root_of[rp]
        allocations: Allocations = ((rp, resources_of),) if resources_of else ()
        providers = frozenset((rp,))
        if rp not in sharing:
            if any_anchor or anchor_ok(root):
                yield make(GroupRequest, (root, allocations, providers))
            continue
        anchors = [root]
        anchors.extend(sorted(a for a in facts.anchors_of.get(rp, ()) if a != root))
        for anchor in anchors:
            if anchor_ok(anchor):
                yield make(GroupRequest, (anchor, allocations, providers))


def group_requests(group: ResolvedGroup, facts: Facts) -> Iterator[GroupRequest]:
    """Every way to satisfy ``group``, lazily (anchor by anchor)."""
    if group.use_same_provider:
        return numbered_requests(group, facts)
    return unnumbered_requests(group, facts)


def in_same_subtree(providers: set[int], parent_of: dict[int, int | None]) -> bool:
    """One of the providers is an ancestor (or self) of all the others."""
    if len(providers) <= 1:
        return True
    common: set[int] | None = None
    for rp in providers:
        line = {rp}
        parent = parent_of.get(rp)
        while parent is not None:
            line.add(parent)
            parent = parent_of.get(parent)
        common = line if common is None else common & line
    return bool(common and common & providers)


@dataclass
class Merge:
    """Request-wide rules applied while combining the groups' requests."""

    groups: list[ResolvedGroup]
    group_policy: str | None = None
    same_subtrees: list[set[str]] = field(default_factory=list)
    # provider id -> parent id (providers of the trees in play)
    parent_of: dict[int, int | None] = field(default_factory=dict)
    # Before 1.29 a candidate may use only one provider per tree.
    nested_aware: bool = True


def merge_candidates(merge: Merge, per_group: dict[str, Iterable[GroupRequest]], facts: Facts) -> Iterator[Candidate]:
    """Combine one request per group, anchor by anchor, lazily and without repeats.

    With a single group the requests are consumed as they come, so that a
    ``limit`` stops the search early.

    The same allocation can only come up under two anchors when every
    provider it uses is a sharing provider (any other provider belongs to
    one tree), so only those are remembered to drop repeats.
    """
    if len(merge.groups) == 1:
        yield from _single_group(merge, per_group[merge.groups[0].suffix], facts)
        return
    suffixes = [group.suffix for group in merge.groups]
    granular = [i for i, group in enumerate(merge.groups) if group.use_same_provider]
    isolate = merge.group_policy == "isolate" and len(granular) > 1
    subtree_positions = [
        [i for i, suffix in enumerate(suffixes) if suffix in subtree] for subtree in merge.same_subtrees
    ]
    by_anchor: dict[int, list[list[GroupRequest]]] = {}
    for position, suffix in enumerate(suffixes):
        for request in per_group[suffix]:
            lists = by_anchor.get(request.anchor)
            if lists is None:
                lists = by_anchor[request.anchor] = [[] for _ in suffixes]
            lists[position].append(request)
    sharing = facts.sharing
    seen: set[tuple[object, ...]] | None = set() if sharing else None
    root_of = facts.root_of
    inventory = facts.inventory
    shared: dict[Resources, Resources] = {}
    one_per_tree = not merge.nested_aware
    make = tuple.__new__
    # itemgetter and chain, not comprehensions: no call per candidate.
    first, second, third = operator.itemgetter(0), operator.itemgetter(1), operator.itemgetter(2)
    chain = itertools.chain.from_iterable
    # The resource tuples live as long as the requests above: their ids are stable keys.
    merged: dict[tuple[int, ...], tuple[Resources, bool]] = {}
    for anchor in sorted(by_anchor):
        lists = by_anchor[anchor]
        if not all(lists):
            continue
        for combo in itertools.product(*lists):
            if isolate and len({next(iter(combo[i].providers)) for i in granular}) != len(granular):
                continue
            if subtree_positions and not all(
                in_same_subtree(set().union(*(combo[i].providers for i in positions)), merge.parent_of)
                for positions in subtree_positions
            ):
                continue
            parts = list(chain(map(second, combo)))
            used = frozenset(map(first, parts))
            if len(used) == len(parts):
                # Every provider serves one group: nothing to add together.
                parts.sort()
                allocations: Allocations = tuple(parts)
            else:
                allocations, folded = _combined(parts, used, shared, merged)
                if folded and not _within_capacity(allocations, inventory):
                    continue
            if one_per_tree and len({root_of[rp] for rp in used}) != len(used):
                continue
            mappings = tuple(zip(suffixes, map(third, combo)))
            if seen is not None and used <= sharing:
                key = (allocations, mappings)
                if key in seen:
                    continue
                seen.add(key)
            yield make(Candidate, (anchor, allocations, mappings, used))


def every_candidate(merge: Merge, per_group: dict[str, Iterable[GroupRequest]], facts: Facts) -> list[Candidate]:
    """:func:`merge_candidates`, all of them at once (no limit to stop at),
    a single group's without the generator in between."""
    if len(merge.groups) == 1:
        return list(_single_group(merge, per_group[merge.groups[0].suffix], facts))
    return list(merge_candidates(merge, per_group, facts))


def _single_group(merge: Merge, requests: Iterable[GroupRequest], facts: Facts) -> Iterator[Candidate]:
    """A single group's requests as candidates, lazily.

    One generator expression, no function of its own per candidate: with
    tens of thousands of them, generators in between cost as much as the
    search.  Only candidates that may have to be dropped are checked.
    """
    suffix = merge.groups[0].suffix
    sharing = facts.sharing
    root_of = facts.root_of
    one_per_tree = not merge.nested_aware
    seen: set[tuple[object, ...]] = set()

    def keep(allocations: Allocations, providers: frozenset[int]) -> bool:
        if one_per_tree and len({root_of[rp] for rp in providers}) != len(providers):
            return False
        if sharing and providers <= sharing:
            # Served by sharing providers alone: may come up under several anchors.
            key = (allocations, providers)
            if key in seen:
                return False
            seen.add(key)
        return True

    make = tuple.__new__
    return (
        make(Candidate, (anchor, allocations, ((suffix, providers),), providers))
        for anchor, allocations, providers in requests
        if not (one_per_tree or (sharing and providers <= sharing)) or keep(allocations, providers)
    )


def _combined(
    parts: list[tuple[int, Resources]],
    used: frozenset[int],
    shared: dict[Resources, Resources],
    merged: dict[tuple[int, ...], tuple[Resources, bool]],
) -> tuple[Allocations, bool]:
    """The groups' allocations (``parts``, some provider more than once) as
    one, by provider; and whether some amounts of one class on one provider
    were added together."""
    if len(used) == 1:
        # Every group served by the same provider (a flat tree, often).
        (rp,) = used
        together, folded = _merged([resources for _rp, resources in parts], shared, merged)
        return ((rp, together),), folded
    by_provider: dict[int, list[Resources]] = {}
    for rp, resources in parts:
        found = by_provider.get(rp)
        if found is None:
            by_provider[rp] = [resources]
        else:
            found.append(resources)
    allocations = []
    folded = False
    for rp in sorted(by_provider):
        pieces = by_provider[rp]
        if len(pieces) == 1:
            allocations.append((rp, pieces[0]))
        else:
            together, added = _merged(pieces, shared, merged)
            folded = folded or added
            allocations.append((rp, together))
    return tuple(allocations), folded


def _merged(
    pieces: list[Resources], shared: dict[Resources, Resources], merged: dict[tuple[int, ...], tuple[Resources, bool]]
) -> tuple[Resources, bool]:
    """Several groups' resources on one provider, added together (worked out
    once per combination of resource tuples, which candidates share)."""
    key = tuple(map(id, pieces))
    found = merged.get(key)
    if found is None:
        together: dict[int, int] = {}
        folded = False
        for resources in pieces:
            for rc, amount in resources:
                if rc in together:
                    together[rc] += amount
                    folded = True
                else:
                    together[rc] = amount
        result = tuple(sorted(together.items()))
        found = merged[key] = (shared.setdefault(result, result), folded)
    return found


def _within_capacity(allocations: Allocations, inventory: dict[int, dict[int, InventoryRow]]) -> bool:
    # Groups were checked one by one; amounts folded together from several
    # groups onto one provider must still fit (capacity and max_unit only).
    for rp, resources in allocations:
        for rc, amount in resources:
            capacity, used, _min_unit, max_unit, _step = inventory[rc][rp]
            if used + amount > int(capacity) or amount > max_unit:
                return False
    return True


def select(candidates: Iterable[Candidate], limit: int | None, randomize: bool) -> list[Candidate]:
    """Apply ``limit``: the first ones found, or a random choice among all."""
    if limit is None:
        chosen = list(candidates)
        if randomize:
            random.shuffle(chosen)
        return chosen
    if not randomize:
        # A limit beyond any answer's size (and islice's range) is no limit.
        return list(itertools.islice(candidates, min(limit, sys.maxsize)))
    # Reservoir sampling: memory bounded by the limit, not by the answer.
    reservoir: list[Candidate] = []
    for seen, candidate in enumerate(candidates):
        if seen < limit:
            reservoir.append(candidate)
        else:
            slot = random.randint(0, seen)
            if slot < limit:
                reservoir[slot] = candidate
    random.shuffle(reservoir)
    return reservoir


def summary_providers(used: set[int], root_of: dict[int, int], nested_aware: bool) -> tuple[set[int], set[int]]:
    """(roots whose whole trees are summarised, extra single providers), given
    the providers the candidates use.

    From 1.29 every provider of every tree a candidate uses is summarised;
    before, only the providers the candidates use.
    """
    if nested_aware:
        return {root_of[rp] for rp in used}, set()
    return set(), used


def used_providers(candidates: list[Candidate]) -> set[int]:
    """Every provider some candidate allocates from."""
    return set().union(*[candidate[3] for candidate in candidates])
