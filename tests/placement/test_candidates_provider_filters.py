"""The GET /resource_providers filters (provider ids from a parsed query)."""

from __future__ import annotations

import pytest

from corral.core.errors import BadRequest
from corral.placement.api import query
from corral.placement.db.provider_filters import matching_provider_ids
from tests.placement.test_candidates_cloud import make_uuid, seed_tree


@pytest.fixture
def seed(placement):
    cloud = seed_tree()
    cloud.trait("cn1", "HW_CPU_X86_AVX2")
    cloud.trait("cn2", "HW_CPU_X86_SSE")
    cloud.allocate("numa2_1", "VCPU", 6)
    ids = cloud.write(placement.state.db)
    return ids


def matching(placement, ids, qs: str, version: tuple[int, int] = (1, 39)) -> set[str] | None:
    wanted = query.parse_provider_filter(query.query_pairs(qs), version)
    state = placement.state
    with state.db.read() as conn:
        found = matching_provider_ids(
            conn, wanted, standard_classes=state.standard_classes, standard_traits=state.standard_traits
        )
    if found is None:
        return None
    by_id = {v: k for k, v in ids.items()}
    return {by_id[rp] for rp in found}


def test_no_filter_means_all(placement, seed) -> None:
    assert matching(placement, seed, "") is None


def test_forbidden_aggregates_apply_to_the_provider_itself(placement, seed) -> None:
    every = set(seed)
    assert matching(placement, seed, "member_of=!" + make_uuid("aggA")) == every - {"cn1"}
    assert matching(placement, seed, "member_of=!" + make_uuid("aggB")) == every - {"cn2", "ss1"}
    assert matching(placement, seed, "member_of=!" + make_uuid("aggC")) == every - {"numa1_1", "ss2"}
    a, b = make_uuid("aggA"), make_uuid("aggB")
    assert matching(placement, seed, f"member_of=!in:{a},{b}") == every - {"cn1", "cn2", "ss1"}
    assert matching(placement, seed, f"member_of=in:{a},{b}") == {"cn1", "cn2", "ss1"}
    assert matching(placement, seed, f"member_of=in:{a},{b}&member_of=!{b}") == {"cn1"}
    assert matching(placement, seed, "member_of=" + make_uuid("nothing")) == set()


def test_other_filters(placement, seed) -> None:
    assert matching(placement, seed, "name=numa1_2") == {"numa1_2"}
    assert matching(placement, seed, "uuid=" + make_uuid("ss1")) == {"ss1"}
    assert matching(placement, seed, "in_tree=" + make_uuid("numa2_2")) == {"cn2", "numa2_1", "numa2_2"}
    assert matching(placement, seed, "in_tree=" + make_uuid("missing")) == set()
    assert matching(placement, seed, "resources=VCPU:3") == {"numa1_1", "numa1_2", "numa2_2"}
    assert matching(placement, seed, "resources=VCPU:2,MEMORY_MB:1") == set()
    assert matching(placement, seed, "required=HW_CPU_X86_AVX2") == {"cn1"}
    assert matching(placement, seed, "required=in:HW_CPU_X86_AVX2,HW_CPU_X86_SSE") == {"cn1", "cn2"}
    assert matching(placement, seed, "required=!HW_CPU_X86_AVX2&resources=MEMORY_MB:1") == {"cn2"}


def test_unknown_names(placement, seed) -> None:
    with pytest.raises(BadRequest) as info:
        matching(placement, seed, "resources=CUSTOM_NOPE:1")
    assert "Invalid resource class in resources parameter" in info.value.message
    with pytest.raises(BadRequest) as info:
        matching(placement, seed, "required=CUSTOM_NOPE")
    assert 'Invalid trait(s) in "required" parameter' in info.value.message
