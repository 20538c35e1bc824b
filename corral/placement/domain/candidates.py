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

from dataclasses import dataclass, field

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
