"""GET /allocation_candidates over HTTP: response shapes per microversion and 400s."""

from __future__ import annotations

import pytest

from tests.placement.test_candidates_cloud import Cloud, make_uuid, seed_tree

AGG = make_uuid("agg1")


@pytest.fixture
def simple(placement):
    """cn1: VCPU 8, MEMORY_MB 2048 (2 VCPU used), trait HW_CPU_X86_AVX2, aggregate agg1.
    cn2: VCPU 4, MEMORY_MB 1024, DISK_GB 100."""
    cloud = Cloud()
    cloud.provider("cn1")
    cloud.inventory("cn1", "VCPU", 8)
    cloud.inventory("cn1", "MEMORY_MB", 2048)
    cloud.trait("cn1", "HW_CPU_X86_AVX2")
    cloud.aggregate("cn1", "agg1")
    cloud.allocate("cn1", "VCPU", 2)
    cloud.provider("cn2")
    cloud.inventory("cn2", "VCPU", 4)
    cloud.inventory("cn2", "MEMORY_MB", 1024)
    cloud.inventory("cn2", "DISK_GB", 100)
    cloud.write(placement.state.db)
    return cloud


def get(placement, qs: str, version: str = "1.39"):
    return placement.client(version).get("/allocation_candidates?" + qs)


def test_not_before_1_10(placement, simple) -> None:
    assert get(placement, "resources=VCPU:1", "1.9").status_code == 404


def test_list_shape_before_1_12(placement, simple) -> None:
    response = get(placement, "resources=VCPU:1", "1.10")
    assert response.status_code == 200
    body = response.json()
    uuids = sorted(a["allocations"][0]["resource_provider"]["uuid"] for a in body["allocation_requests"])
    assert uuids == sorted([simple.uuid("cn1"), simple.uuid("cn2")])
    assert body["allocation_requests"][0]["allocations"][0]["resources"] == {"VCPU": 1}
    # Only the requested classes, no traits, no tree information.
    assert body["provider_summaries"][simple.uuid("cn1")] == {"resources": {"VCPU": {"capacity": 8, "used": 2}}}
    assert "cache-control" not in response.headers


def test_dict_shape_and_headers(placement, simple) -> None:
    response = get(placement, "resources=VCPU:1,MEMORY_MB:512", "1.12")
    body = response.json()
    entry = next(a for a in body["allocation_requests"] if simple.uuid("cn1") in a["allocations"])
    assert entry == {"allocations": {simple.uuid("cn1"): {"resources": {"VCPU": 1, "MEMORY_MB": 512}}}}
    assert get(placement, "resources=VCPU:1", "1.15").headers["cache-control"] == "no-cache"
    assert "last-modified" in get(placement, "resources=VCPU:1", "1.15").headers


def test_summaries_by_microversion(placement, simple) -> None:
    cn2 = simple.uuid("cn2")
    at_1_16 = get(placement, "resources=DISK_GB:1", "1.16").json()["provider_summaries"][cn2]
    assert at_1_16 == {"resources": {"DISK_GB": {"capacity": 100, "used": 0}}}
    cn1 = simple.uuid("cn1")
    at_1_17 = get(placement, "resources=VCPU:1", "1.17").json()["provider_summaries"][cn1]
    assert at_1_17 == {"resources": {"VCPU": {"capacity": 8, "used": 2}}, "traits": ["HW_CPU_X86_AVX2"]}
    at_1_27 = get(placement, "resources=DISK_GB:1", "1.27").json()["provider_summaries"][cn2]
    assert set(at_1_27["resources"]) == {"VCPU", "MEMORY_MB", "DISK_GB"}
    at_1_29 = get(placement, "resources=DISK_GB:1", "1.29").json()["provider_summaries"][cn2]
    assert at_1_29["parent_provider_uuid"] is None
    assert at_1_29["root_provider_uuid"] == cn2


def test_mappings_from_1_34(placement, simple) -> None:
    body = get(placement, "resources=VCPU:1", "1.33").json()
    assert "mappings" not in body["allocation_requests"][0]
    body = get(placement, "resources=VCPU:1&resources_X=DISK_GB:10", "1.34").json()
    assert body["allocation_requests"] == [
        {
            "allocations": {simple.uuid("cn2"): {"resources": {"VCPU": 1, "DISK_GB": 10}}},
            "mappings": {"": [simple.uuid("cn2")], "_X": [simple.uuid("cn2")]},
        }
    ]


def test_filters(placement, simple) -> None:
    def providers(qs: str, version: str = "1.39") -> set[str]:
        body = get(placement, qs, version).json()
        return {uuid for a in body["allocation_requests"] for uuid in a["allocations"]}

    cn1, cn2 = simple.uuid("cn1"), simple.uuid("cn2")
    assert providers("resources=VCPU:1&required=HW_CPU_X86_AVX2") == {cn1}
    assert providers("resources=VCPU:1&required=!HW_CPU_X86_AVX2") == {cn2}
    assert providers("resources=VCPU:1&required=in:HW_CPU_X86_AVX2,HW_CPU_X86_SSE") == {cn1}
    assert providers(f"resources=VCPU:1&member_of={AGG}", "1.21") == {cn1}
    assert providers(f"resources=VCPU:1&member_of=!{AGG}", "1.32") == {cn2}
    assert providers(f"resources=VCPU:1&member_of=!in:{AGG},{make_uuid('other')}", "1.32") == {cn2}
    assert providers(f"resources=VCPU:1&in_tree={cn2}", "1.31") == {cn2}
    assert providers(f"resources=VCPU:1&in_tree={make_uuid('missing')}", "1.31") == set()
    assert providers("resources=VCPU:7") == set()
    assert providers("resources=VCPU:1&root_required=HW_CPU_X86_AVX2", "1.35") == {cn1}


def test_limit(placement, simple) -> None:
    body = get(placement, "resources=VCPU:1&limit=1", "1.16").json()
    assert len(body["allocation_requests"]) == 1
    chosen = next(iter(body["allocation_requests"][0]["allocations"]))
    assert list(body["provider_summaries"]) == [chosen]


@pytest.mark.parametrize(
    ("qs", "version", "fragment"),
    [
        ("resources=VCPU:1&member_of=!" + AGG, "1.31", "Forbidden member_of parameters are not supported"),
        (f"resources=VCPU:1&member_of=in:{AGG},!{make_uuid('b')}", "1.32", "valid UUID(s)"),
        ("resources=VCPU:x", "1.39", "expected positive integer amount"),
        ("resources=CUSTOM_UNKNOWN:1", "1.39", "No such resource class CUSTOM_UNKNOWN"),
        ("resources=VCPU:1&required=CUSTOM_NOPE", "1.39", "No such trait(s): CUSTOM_NOPE"),
        ("resources=VCPU:1&required=!HW_CPU_X86_AVX2", "1.21", "HW_CPU_X86_VMX,CUSTOM_MAGIC"),
        ("resources1=VCPU:1&resources2=VCPU:1", "1.25", "group_policy"),
        ("resources_A=VCPU:1", "1.32", "does not match any of the regexes"),
        ("resources=VCPU:1&bogus=1", "1.39", "does not match any of the regexes"),
        ("", "1.10", "'resources' is a required property"),
    ],
)
def test_bad_requests(placement, simple, qs: str, version: str, fragment: str) -> None:
    response = get(placement, qs, version)
    assert response.status_code == 400, response.text
    assert fragment in response.json()["errors"][0]["detail"]


def test_error_code_for_duplicate_root_required(placement, simple) -> None:
    response = get(placement, "resources=VCPU:1&root_required=A&root_required=B", "1.35")
    assert response.status_code == 400
    assert response.json()["errors"][0]["code"] == "placement.query.duplicate_key"


def test_seed_tree_over_http(placement) -> None:
    cloud = seed_tree()
    cloud.write(placement.state.db)
    agg_b = make_uuid("aggB")
    body = get(placement, f"resources=VCPU:1,MEMORY_MB:1,DISK_GB:1&member_of=!{agg_b}", "1.32").json()
    used = {uuid for a in body["allocation_requests"] for uuid in a["allocations"]}
    assert used == {cloud.uuid(n) for n in ("cn1", "numa1_1", "numa1_2", "ss2")}
    summary = body["provider_summaries"][cloud.uuid("numa1_1")]
    assert summary["parent_provider_uuid"] == cloud.uuid("cn1")
    assert summary["root_provider_uuid"] == cloud.uuid("cn1")
    # The whole tree is summarised, including the compute node.
    assert cloud.uuid("cn1") in body["provider_summaries"]
    numbered = get(placement, f"resources1=MEMORY_MB:1&member_of1=!{agg_b}", "1.32").json()
    assert [list(a["allocations"]) for a in numbered["allocation_requests"]] == [[cloud.uuid("cn1")]]


def test_collection_pause_nests_and_resumes() -> None:
    import gc

    from corral.placement.api.handlers.allocation_candidates import gc_paused

    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
