"""Granular request groups: group_policy, same_subtree, root_required, limit, mappings."""

from __future__ import annotations

import pytest

from tests.placement.test_candidates_cloud import Cloud


@pytest.fixture
def tree(placement):
    """cn (CUSTOM_ROOT) -> numa0 (VCPU 4) -> pf0 (VF 4, CUSTOM_PHYSNET_A)
                       -> numa1 (VCPU 4) -> pf1 (VF 4, CUSTOM_PHYSNET_A)
                                         -> pf2 (VF 2, CUSTOM_PHYSNET_B)
    cn2 (no trait) -> VCPU 4, VF 4 on itself."""
    cloud = Cloud()
    cloud.provider("cn")
    cloud.trait("cn", "CUSTOM_ROOT")
    cloud.provider("numa0", parent="cn")
    cloud.inventory("numa0", "VCPU", 4)
    cloud.provider("pf0", parent="numa0")
    cloud.inventory("pf0", "SRIOV_NET_VF", 4)
    cloud.trait("pf0", "CUSTOM_PHYSNET_A")
    cloud.provider("numa1", parent="cn")
    cloud.inventory("numa1", "VCPU", 4)
    cloud.provider("pf1", parent="numa1")
    cloud.inventory("pf1", "SRIOV_NET_VF", 4)
    cloud.trait("pf1", "CUSTOM_PHYSNET_A")
    cloud.provider("pf2", parent="numa1")
    cloud.inventory("pf2", "SRIOV_NET_VF", 2)
    cloud.trait("pf2", "CUSTOM_PHYSNET_B")
    cloud.provider("cn2")
    cloud.inventory("cn2", "VCPU", 4)
    cloud.inventory("cn2", "SRIOV_NET_VF", 4)
    cloud.write(placement.state.db)
    return cloud


def candidates(placement, tree, qs: str, version: str = "1.39") -> list[dict]:
    response = placement.client(version).get("/allocation_candidates?" + qs)
    assert response.status_code == 200, response.text
    by_uuid = {tree.uuid(name): name for name in tree.order}
    result = []
    for entry in response.json()["allocation_requests"]:
        result.append(
            {
                "allocations": {by_uuid[u]: r["resources"] for u, r in entry["allocations"].items()},
                "mappings": {s: sorted(by_uuid[u] for u in us) for s, us in entry.get("mappings", {}).items()},
            }
        )
    return result


def used_sets(found: list[dict]) -> set[frozenset[str]]:
    return {frozenset(c["allocations"]) for c in found}


def test_granular_groups_and_policy(placement, tree) -> None:
    qs = "resources1=SRIOV_NET_VF:1&resources2=SRIOV_NET_VF:1"
    isolated = candidates(placement, tree, qs + "&group_policy=isolate")
    shared = candidates(placement, tree, qs + "&group_policy=none")
    # Isolation: two different providers of one tree.
    assert used_sets(isolated) == {
        frozenset({"pf0", "pf1"}), frozenset({"pf0", "pf2"}), frozenset({"pf1", "pf2"}),
    }
    # 'none' also allows both groups on one provider (amounts folded together).
    assert frozenset({"pf0"}) in used_sets(shared)
    assert frozenset({"cn2"}) in used_sets(shared)
    both_on_pf2 = next(c for c in shared if c["allocations"] == {"pf2": {"SRIOV_NET_VF": 2}})
    assert both_on_pf2["mappings"] == {"1": ["pf2"], "2": ["pf2"]}
    # Folding respects capacity: pf2 has only 2 VFs.
    big = candidates(placement, tree, "resources1=SRIOV_NET_VF:2&resources2=SRIOV_NET_VF:1&group_policy=none")
    assert frozenset({"pf2"}) not in used_sets(big)
    assert frozenset({"pf1"}) in used_sets(big)


def test_granular_traits_are_per_provider(placement, tree) -> None:
    found = candidates(
        placement, tree,
        "resources1=SRIOV_NET_VF:1&required1=CUSTOM_PHYSNET_A&resources2=SRIOV_NET_VF:1&required2=CUSTOM_PHYSNET_B"
        "&group_policy=isolate",
    )
    assert used_sets(found) == {frozenset({"pf0", "pf2"}), frozenset({"pf1", "pf2"})}
    for candidate in found:
        assert candidate["mappings"]["2"] == ["pf2"]


def test_unnumbered_with_granular(placement, tree) -> None:
    found = candidates(placement, tree, "resources=VCPU:2&resources_NET=SRIOV_NET_VF:1&required_NET=CUSTOM_PHYSNET_B")
    assert used_sets(found) == {frozenset({"numa0", "pf2"}), frozenset({"numa1", "pf2"})}
    found = candidates(placement, tree, "resources=VCPU:2&resources_NET=SRIOV_NET_VF:1")
    assert frozenset({"cn2"}) in used_sets(found)


def test_same_subtree(placement, tree) -> None:
    qs = "resources_C=VCPU:1&resources_N=SRIOV_NET_VF:1&group_policy=none&same_subtree=_C,_N"
    found = candidates(placement, tree, qs)
    assert used_sets(found) == {
        frozenset({"numa0", "pf0"}), frozenset({"numa1", "pf1"}), frozenset({"numa1", "pf2"}), frozenset({"cn2"}),
    }
    # A resourceless group anchors the subtree: the NUMA node with a PHYSNET_B PF.
    qs = (
        "resources_C=VCPU:1&resources_N=SRIOV_NET_VF:1&required_N=CUSTOM_PHYSNET_B"
        "&required_ROOT=CUSTOM_ROOT&group_policy=none&same_subtree=_C,_N"
    )
    # _ROOT is resourceless and not in same_subtree: refused.
    response = placement.client("1.39").get("/allocation_candidates?" + qs)
    assert response.status_code == 400
    found = candidates(placement, tree, qs + "&same_subtree=_ROOT,_C")
    assert used_sets(found) == {frozenset({"numa1", "pf2"})}
    assert found[0]["mappings"]["_ROOT"] == ["cn"]


def test_root_required(placement, tree) -> None:
    found = candidates(placement, tree, "resources=VCPU:1&root_required=CUSTOM_ROOT")
    assert used_sets(found) == {frozenset({"numa0"}), frozenset({"numa1"})}
    found = candidates(placement, tree, "resources=VCPU:1&root_required=!CUSTOM_ROOT")
    assert used_sets(found) == {frozenset({"cn2"})}
    found = candidates(placement, tree, "resources1=VCPU:1&root_required=!CUSTOM_ROOT")
    assert used_sets(found) == {frozenset({"cn2"})}


def test_in_tree_on_groups(placement, tree) -> None:
    cn2 = tree.uuid("cn2")
    found = candidates(placement, tree, f"resources=VCPU:1&resources1=SRIOV_NET_VF:1&in_tree1={cn2}")
    assert used_sets(found) == {frozenset({"cn2"})}
    found = candidates(placement, tree, f"resources1=VCPU:1&in_tree1={tree.uuid('pf2')}")
    assert used_sets(found) == {frozenset({"numa0"}), frozenset({"numa1"})}


def test_limit_keeps_summaries_of_chosen_trees(placement, tree) -> None:
    response = placement.client("1.39").get("/allocation_candidates?resources=VCPU:1&limit=1")
    body = response.json()
    assert len(body["allocation_requests"]) == 1
    chosen = next(iter(body["allocation_requests"][0]["allocations"]))
    roots = {s["root_provider_uuid"] for s in body["provider_summaries"].values()}
    assert roots == {body["provider_summaries"][chosen]["root_provider_uuid"]}


def test_randomized_limit(placement, tree) -> None:
    placement.state.conf.set_override("randomize_allocation_candidates", True, group="placement")
    try:
        seen = set()
        for _ in range(30):
            body = placement.client("1.39").get("/allocation_candidates?resources=VCPU:1&limit=1").json()
            assert len(body["allocation_requests"]) == 1
            seen.add(next(iter(body["allocation_requests"][0]["allocations"])))
        # Three candidates: thirty draws find more than one of them.
        assert len(seen) > 1
    finally:
        placement.state.conf.clear_override("randomize_allocation_candidates", group="placement")


def test_nested_candidates_hidden_before_1_29(placement, tree) -> None:
    found = candidates(placement, tree, "resources=VCPU:1,SRIOV_NET_VF:1", "1.28")
    assert used_sets(found) == {frozenset({"cn2"})}
    found = candidates(placement, tree, "resources=VCPU:1,SRIOV_NET_VF:1", "1.29")
    assert frozenset({"numa0", "pf0"}) in used_sets(found)
    assert frozenset({"numa0", "pf2"}) in used_sets(found)


def test_sharing_provider_serves_every_anchor_with_granular_groups(placement) -> None:
    """The unsuffixed group's disk from a sharing provider combines with a
    granular group on each compute node of the aggregate, not just one."""
    cloud = Cloud()
    cloud.provider("ss")
    cloud.inventory("ss", "DISK_GB", 1000)
    cloud.trait("ss", "MISC_SHARES_VIA_AGGREGATE")
    cloud.aggregate("ss", "storage")
    for name in ("cn1", "cn2"):
        cloud.provider(name)
        cloud.inventory(name, "VCPU", 8)
        cloud.aggregate(name, "storage")
    cloud.write(placement.state.db)
    found = candidates(placement, cloud, "resources=DISK_GB:10&resources_N=VCPU:1&group_policy=none")
    assert used_sets(found) == {frozenset({"ss", "cn1"}), frozenset({"ss", "cn2"})}
    assert candidates(placement, cloud, "resources=DISK_GB:10") == [
        {"allocations": {"ss": {"DISK_GB": 10}}, "mappings": {"": ["ss"]}}
    ]
