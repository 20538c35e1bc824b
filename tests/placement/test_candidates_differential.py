"""Differential test: the candidate engine against a brute-force reference.

Random small clouds (trees up to three levels, sharing providers,
aggregates, traits, usage) and random requests (unsuffixed and suffixed
groups, forbidden and any-of traits, required and forbidden aggregates,
in_tree, group_policy, same_subtree, root_required, resourceless groups,
pre-1.29 behaviour) are answered by the engine on a real database and by
:class:`Reference`, which enumerates every anchor and every provider
choice straight from the definitions.  ``CORRAL_DIFF_SEEDS`` raises the
number of clouds.
"""

from __future__ import annotations

import itertools
import os
import random
from dataclasses import dataclass

from corral.core.db import truncate_all
from corral.core.errors import BadRequest
from corral.placement.api import query
from corral.placement.api.app import load_standard_names
from corral.placement.db.candidates import find_candidates
from corral.placement.db.tables import metadata
from tests.placement.test_candidates_cloud import Cloud, make_uuid

SEEDS = int(os.environ.get("CORRAL_DIFF_SEEDS", "60"))
QUERIES_PER_CLOUD = 8
CLASSES = ("VCPU", "MEMORY_MB", "DISK_GB")
TRAITS = ("CUSTOM_A", "CUSTOM_B", "CUSTOM_C")
AGGS = ("agg1", "agg2", "agg3")
SHARING = "MISC_SHARES_VIA_AGGREGATE"


# ------------------------------------------------------------ random input


def random_cloud(rng: random.Random) -> Cloud:
    cloud = Cloud(known_traits=set(TRAITS))
    counter = itertools.count()

    def add(parent: str | None, depth: int) -> None:
        name = f"p{next(counter)}"
        cloud.provider(name, parent=parent)
        for rc in rng.sample(CLASSES, rng.choice((0, 1, 2, 2, 3))):
            total = rng.randint(2, 8)
            max_unit = total if rng.random() < 0.7 else rng.randint(1, total)
            cloud.inventory(
                name, rc, total,
                reserved=rng.choice((0, 0, 1)),
                min_unit=rng.choice((1, 1, 1, 2)),
                max_unit=max_unit,
                step_size=rng.choice((1, 1, 1, 2)),
                allocation_ratio=rng.choice((1.0, 1.5, 2.0)),
            )
            if rng.random() < 0.3:
                cloud.allocate(name, rc, rng.randint(1, total - 1))
        for trait in TRAITS:
            if rng.random() < 0.3:
                cloud.trait(name, trait)
        for agg in AGGS:
            if rng.random() < 0.2:
                cloud.aggregate(name, agg)
        if depth < 3:
            for _ in range(rng.choice((0, 0, 1, 2))):
                add(name, depth + 1)

    for _ in range(rng.randint(1, 3)):
        add(None, 1)
    for index in range(rng.choice((0, 1, 2))):
        name = f"s{index}"
        cloud.provider(name)
        cloud.trait(name, SHARING)
        cloud.inventory(name, rng.choice(CLASSES), rng.randint(2, 10))
        cloud.aggregate(name, rng.choice(AGGS))
    return cloud


def random_traits_param(rng: random.Random, allow_any: bool) -> str:
    parts = []
    for trait in rng.sample(TRAITS, rng.randint(1, 2)):
        parts.append(("!" if rng.random() < 0.4 else "") + trait)
    if allow_any and rng.random() < 0.3:
        return "in:" + ",".join(rng.sample(TRAITS, 2))
    return ",".join(parts)


def random_member_of(rng: random.Random, forbidden_ok: bool) -> str:
    roll = rng.random()
    aggs = [make_uuid(a) for a in rng.sample(AGGS + ("ghost",), 2)]
    if forbidden_ok and roll < 0.3:
        return "!" + aggs[0]
    if forbidden_ok and roll < 0.4:
        return "!in:" + ",".join(aggs)
    if roll < 0.7:
        return aggs[0]
    return "in:" + ",".join(aggs)


def random_query(rng: random.Random, cloud: Cloud) -> tuple[str, tuple[int, int]]:
    modern = rng.random() < 0.8
    version = (1, 39) if modern else (1, 28)
    params: list[tuple[str, str]] = []
    suffixes: list[str] = []
    if rng.random() < 0.8:
        suffixes.append("")
    for index in range(rng.choice((0, 0, 1, 2)) if suffixes else rng.choice((1, 1, 2))):
        suffixes.append(str(index + 1))
    same_subtree: list[str] = []
    for suffix in suffixes:
        resourceless = modern and suffix and rng.random() < 0.15
        if not resourceless:
            classes = rng.sample(CLASSES, rng.choice((1, 1, 2)))
            params.append((f"resources{suffix}", ",".join(f"{rc}:{rng.choice((1, 1, 2, 3))}" for rc in classes)))
        if rng.random() < 0.25 or resourceless:
            params.append((f"required{suffix}", random_traits_param(rng, modern)))
        if rng.random() < 0.25:
            params.append((f"member_of{suffix}", random_member_of(rng, modern)))
        if modern and rng.random() < 0.1:
            params.append((f"in_tree{suffix}", cloud.uuid(rng.choice(cloud.order))))
        if resourceless or (modern and suffix and rng.random() < 0.2):
            same_subtree.append(suffix)
    if not any(key.startswith("resources") for key, _ in params):
        params.append(("resources", "VCPU:1"))
        suffixes.append("")
    if sum(1 for s in suffixes if s) > 1 or rng.random() < 0.3:
        params.append(("group_policy", rng.choice(("none", "isolate"))))
    if same_subtree:
        if len(same_subtree) == 1:
            with_resources = [s for s in suffixes if s and s not in same_subtree and (f"resources{s}", "") != ""]
            same_subtree += [s for s in with_resources if any(k == f"resources{s}" for k, _ in params)][:1]
        params.append(("same_subtree", ",".join(f"{s}" for s in same_subtree)))
    if modern and rng.random() < 0.15:
        params.append(("root_required", ("!" if rng.random() < 0.5 else "") + rng.choice(TRAITS)))
    return "&".join(f"{k}={v}" for k, v in params), version


# ------------------------------------------------------------ the reference


@dataclass
class Model:
    parent: dict[str, str | None]
    root: dict[str, str]
    inv: dict[tuple[str, str], dict]
    used: dict[tuple[str, str], int]
    traits: dict[str, set[str]]
    aggs: dict[str, set[str]]


def model_of(cloud: Cloud) -> Model:
    parent = {name: cloud.providers[name]["parent"] for name in cloud.order}
    root = {}
    for name in cloud.order:
        top = name
        while parent[top] is not None:
            top = parent[top]
        root[name] = top
    inv = {(i["provider"], i["rc"]): i for i in cloud.inventories}
    used: dict[tuple[str, str], int] = {}
    for name, rc, amount in cloud.allocations:
        used[(name, rc)] = used.get((name, rc), 0) + amount
    traits = {name: set() for name in cloud.order}
    for name, trait in cloud.traits:
        traits[name].add(trait)
    aggs = {name: set() for name in cloud.order}
    for name, agg in cloud.aggregates:
        aggs[name].add(make_uuid(agg))
    return Model(parent, root, inv, used, traits, aggs)


class Reference:
    """Every anchor, every provider choice, filtered by the written rules."""

    def __init__(self, model: Model) -> None:
        self.m = model
        self.providers = list(model.parent)
        self.roots = [p for p in self.providers if model.parent[p] is None]

    def capacity(self, p: str, rc: str) -> float:
        i = self.m.inv[(p, rc)]
        return (i["total"] - i["reserved"]) * i["allocation_ratio"]

    def fits(self, p: str, rc: str, amount: int) -> bool:
        i = self.m.inv.get((p, rc))
        if i is None:
            return False
        return (
            self.m.used.get((p, rc), 0) + amount <= self.capacity(p, rc)
            and i["min_unit"] <= amount <= i["max_unit"]
            and amount % i["step_size"] == 0
        )

    def sharing(self, p: str) -> bool:
        return SHARING in self.m.traits[p]

    def anchors(self, p: str) -> set[str]:
        return {self.m.root[q] for q in self.providers if self.m.aggs[q] & self.m.aggs[p]}

    def in_aggs(self, p: str, member_of: list[frozenset[str]]) -> bool:
        return all(self.m.aggs[p] & any_of for any_of in member_of)

    def anchor_ok(self, anchor: str, request) -> bool:
        traits = self.m.traits[anchor]
        return request.root_required <= traits and not (request.root_forbidden & traits)

    def tree_root(self, group) -> str | None:
        if group.in_tree is None:
            return None
        for p in self.providers:
            if make_uuid_of(p) == group.in_tree:
                return self.m.root[p]
        return "<none>"

    def traits_ok(self, providers, group) -> bool:
        union = set()
        for p in providers:
            if self.m.traits[p] & group.forbidden_traits:
                return False
            union |= self.m.traits[p]
        return all(any_of & union for any_of in group.required_traits)

    def unnumbered(self, group, anchor: str, request) -> list[tuple]:
        tree = self.tree_root(group)
        bad = {p for p in self.providers if self.m.aggs[p] & group.forbidden_aggs}
        options = []
        for rc, amount in sorted(group.resources.items()):
            choices = []
            for p in self.providers:
                if not self.fits(p, rc, amount):
                    continue
                if tree is not None:
                    if not (self.m.root[p] == tree == anchor):
                        continue
                elif anchor != self.m.root[p]:
                    if not (self.sharing(p) and anchor in self.anchors(p)):
                        continue
                    if group.member_of and not self.in_aggs(p, group.member_of):
                        continue
                if group.member_of and not (self.in_aggs(p, group.member_of) or self.in_aggs(anchor, group.member_of)):
                    continue
                if p in bad or anchor in bad:
                    continue
                choices.append((p, rc, amount))
            options.append(choices)
        found = []
        for combo in itertools.product(*options):
            providers = {p for p, _rc, _amount in combo}
            if self.traits_ok(providers, group):
                found.append((combo, frozenset(providers)))
        return found

    def numbered(self, group, anchor: str, request) -> list[tuple]:
        tree = self.tree_root(group)
        found = []
        for p in self.providers:
            if not group.resources and not (group.required_traits or group.member_of):
                continue
            if not all(self.fits(p, rc, amount) for rc, amount in group.resources.items()):
                continue
            if not self.traits_ok([p], group):
                continue
            if group.member_of and not self.in_aggs(p, group.member_of):
                continue
            if self.m.aggs[p] & group.forbidden_aggs:
                continue
            if tree is not None and self.m.root[p] != tree:
                continue
            if anchor != self.m.root[p] and not (self.sharing(p) and anchor in self.anchors(p)):
                continue
            combo = tuple((p, rc, amount) for rc, amount in sorted(group.resources.items()))
            found.append((combo, frozenset((p,))))
        return found

    def same_subtree(self, providers: set[str]) -> bool:
        def line(p):
            out = {p}
            while self.m.parent[p] is not None:
                p = self.m.parent[p]
                out.add(p)
            return out

        common = set.intersection(*(line(p) for p in providers))
        return bool(common & providers)

    def answer(self, request) -> tuple[set, set]:
        groups = list(request.groups.values())
        results = set()
        summarised = set()
        for anchor in self.roots:
            if not self.anchor_ok(anchor, request):
                continue
            per_group = []
            for group in groups:
                if group.use_same_provider:
                    per_group.append(self.numbered(group, anchor, request))
                else:
                    per_group.append(self.unnumbered(group, anchor, request))
            for combo in itertools.product(*per_group):
                granular = [combo[i][1] for i, g in enumerate(groups) if g.use_same_provider]
                if request.group_policy == "isolate" and len(granular) > 1:
                    if len(set().union(*granular)) != len(granular):
                        continue
                ok = True
                for subtree in request.same_subtrees:
                    members = set().union(*(combo[i][1] for i, g in enumerate(groups) if g.suffix in subtree))
                    if not self.same_subtree(members):
                        ok = False
                amounts: dict[tuple[str, str], int] = {}
                for part, _members in combo:
                    for p, rc, amount in part:
                        amounts[(p, rc)] = amounts.get((p, rc), 0) + amount
                if len(groups) > 1:
                    for (p, rc), amount in amounts.items():
                        cap = int(self.capacity(p, rc))
                        if self.m.used.get((p, rc), 0) + amount > cap or amount > self.m.inv[(p, rc)]["max_unit"]:
                            ok = False
                used_providers = {p for p, _rc in amounts}
                if not request.nested_aware and len({self.m.root[p] for p in used_providers}) != len(used_providers):
                    ok = False
                if not ok:
                    continue
                mappings = frozenset((g.suffix, combo[i][1]) for i, g in enumerate(groups))
                results.add((frozenset(amounts.items()), mappings))
                if request.nested_aware:
                    trees = {self.m.root[p] for p in used_providers}
                    summarised |= {p for p in self.providers if self.m.root[p] in trees}
                else:
                    summarised |= used_providers
        return results, summarised


_UUID_NAMES: dict[str, str] = {}


def make_uuid_of(name: str) -> str:
    found = _UUID_NAMES.get(name)
    if found is None:
        found = _UUID_NAMES[name] = make_uuid(name)
    return found


# ------------------------------------------------------------------ the test


def engine_answer(placement, ids: dict[str, int], request) -> tuple[set, set]:
    by_id = {v: k for k, v in ids.items()}
    state = placement.state
    with state.db.read() as conn:
        answer = find_candidates(
            conn, request, standard_classes=state.standard_classes, standard_traits=state.standard_traits
        )
    classes = answer.class_names
    results = set()
    for candidate in answer.candidates:
        amounts = frozenset(
            ((by_id[rp], classes[rc]), amount) for rp, resources in candidate.allocations for rc, amount in resources
        )
        mappings = frozenset((suffix, frozenset(by_id[rp] for rp in members)) for suffix, members in candidate.mappings)
        results.add((amounts, mappings))
    assert len(results) == len(answer.candidates), "duplicate candidates"
    return results, {by_id[rp] for rp in answer.summarised}


def test_engine_matches_reference(placement) -> None:
    checked = 0
    for seed in range(SEEDS):
        rng = random.Random(seed)
        cloud = random_cloud(rng)
        if seed:
            truncate_all(placement.state.db, metadata)
            load_standard_names(placement.state)
        ids = cloud.write(placement.state.db)
        reference = Reference(model_of(cloud))
        for _ in range(QUERIES_PER_CLOUD):
            qs, version = random_query(rng, cloud)
            try:
                request = query.parse_candidate_request(query.query_pairs(qs), version)
            except BadRequest:  # the generator made an invalid request: skip it
                continue
            expected = reference.answer(request)
            got = engine_answer(placement, ids, request)
            assert got[0] == expected[0], f"seed {seed}: {qs} at {version}"
            assert got[1] == expected[1], f"seed {seed}: summaries for {qs} at {version}"
            checked += 1
    assert checked >= SEEDS * QUERIES_PER_CLOUD // 2
