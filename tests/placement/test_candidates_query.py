"""Query-string parsing for allocation candidates and provider filters."""

from __future__ import annotations

import pytest

from corral.core.errors import BadRequest
from corral.placement.api import query

AGG1 = "11111111-1111-1111-1111-111111111111"
AGG2 = "22222222-2222-2222-2222-222222222222"
AGG3 = "33333333-3333-3333-3333-333333333333"
RP1 = "44444444-4444-4444-4444-444444444444"


def parse(qs: str, version: tuple[int, int] = (1, 39)):
    return query.parse_candidate_request(query.query_pairs(qs), version)


def bad(qs: str, version: tuple[int, int] = (1, 39), fragment: str = "") -> BadRequest:
    with pytest.raises(BadRequest) as info:
        parse(qs, version)
    assert fragment in info.value.message
    return info.value


def test_resources_parsed() -> None:
    request = parse("resources=VCPU:2,MEMORY_MB:1024")
    group = request.groups[""]
    assert group.resources == {"VCPU": 2, "MEMORY_MB": 1024}
    assert not group.use_same_provider


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("", "Got: empty string"),
        ("VCPU", "Badly formed resources parameter"),
        ("VCPU:x", "expected positive integer amount. Got: x"),
        ("VCPU:0", "requires amount >= 1. Got: 0"),
        ("VCPU:1:2", "Badly formed"),
    ],
)
def test_bad_resources(value: str, fragment: str) -> None:
    bad(f"resources={value}", fragment=fragment)


def test_resources_required_before_granular() -> None:
    bad("limit=2", (1, 16), "'resources' is a required property")


def test_unknown_key_before_and_after_granular() -> None:
    bad("resources=VCPU:1&foo=1", (1, 24), "Additional properties are not allowed ('foo' was unexpected)")
    bad("resources=VCPU:1&resourcesX=VCPU:1", (1, 25), "does not match any of the regexes")
    parse("resources=VCPU:1&resourcesX=VCPU:1&group_policy=none", (1, 33))


def test_parameters_appear_at_their_microversions() -> None:
    bad("resources=VCPU:1&limit=1", (1, 15), "'limit' was unexpected")
    assert parse("resources=VCPU:1&limit=3", (1, 16)).limit == 3
    bad("resources=VCPU:1&required=HW_CPU_X86_SSE", (1, 16), "'required' was unexpected")
    bad("resources=VCPU:1&member_of=" + AGG1, (1, 20), "'member_of' was unexpected")
    bad("resources=VCPU:1&in_tree=" + RP1, (1, 30), "does not match any of the regexes")
    assert parse("resources=VCPU:1&in_tree=" + RP1, (1, 31)).groups[""].in_tree == RP1
    bad("resources=VCPU:1&root_required=HW_CPU_X86_SSE", (1, 34), "'root_required' does not match")
    bad("resources=VCPU:1&same_subtree=_A", (1, 35), "'same_subtree' does not match")


@pytest.mark.parametrize("limit", ["0", "-1", "x", ""])
def test_bad_limit(limit: str) -> None:
    bad(f"resources=VCPU:1&limit={limit}", (1, 16))


def test_required_traits_and_forbidden() -> None:
    group = parse("resources=VCPU:1&required=A,!B", (1, 22)).groups[""]
    assert group.required_traits == [frozenset({"A"})]
    assert group.forbidden_traits == {"B"}
    bad("resources=VCPU:1&required=A,!B", (1, 21), "HW_CPU_X86_VMX,CUSTOM_MAGIC. Got: A,!B")
    bad("resources=VCPU:1&required=A,", (1, 22), "Got an empty trait in")
    bad("resources=VCPU:1&required=!", (1, 22), "Got an empty trait in")
    bad("resources=VCPU:1&required=A,!A", (1, 22), "Conflicting required and forbidden traits")


def test_required_any_of_and_repeats() -> None:
    group = parse("resources=VCPU:1&required=in:A,B&required=C&required=!D").groups[""]
    assert group.required_traits == [frozenset({"A", "B"}), frozenset({"C"})]
    assert group.forbidden_traits == {"D"}
    # Before 1.39 only the last 'required' counts and 'in:' is refused.
    group = parse("resources=VCPU:1&required=A&required=B", (1, 38)).groups[""]
    assert group.required_traits == [frozenset({"B"})]
    bad("resources=VCPU:1&required=in:A,B", (1, 38), "only supported since microversion 1.39")
    bad("resources=VCPU:1&required=in:A,!B", fragment="does not support forbidden traits")
    bad("resources=VCPU:1&required=in:A,", fragment="Got an empty trait in")
    # An any-of is in conflict only when every member is forbidden.
    parse("resources=VCPU:1&required=in:A,B&required=!A")
    bad("resources=VCPU:1&required=in:A,B&required=!A,!B", fragment="Conflicting")


def test_member_of_forms() -> None:
    group = parse(f"resources=VCPU:1&member_of=in:{AGG1},{AGG2}&member_of={AGG3}").groups[""]
    assert group.member_of == [frozenset({AGG1, AGG2}), frozenset({AGG3})]
    group = parse(f"resources=VCPU:1&member_of=!{AGG1}&member_of=!in:{AGG2},{AGG3}", (1, 32)).groups[""]
    assert group.member_of == []
    assert group.forbidden_aggs == {AGG1, AGG2, AGG3}


def test_forbidden_in_list_is_equivalent_to_several_forbidden_params() -> None:
    one = parse(f"resources=VCPU:1&member_of=!in:{AGG1},{AGG2},{AGG3}").groups[""]
    three = parse(f"resources=VCPU:1&member_of=!{AGG1}&member_of=!{AGG2}&member_of=!{AGG3}").groups[""]
    assert one.forbidden_aggs == three.forbidden_aggs == {AGG1, AGG2, AGG3}


def test_member_of_errors() -> None:
    bad(f"resources=VCPU:1&member_of=in:{AGG1},!{AGG2}", fragment=f"valid UUID(s). Got: !{AGG2}")
    bad(f"resources=VCPU:1&member_of=!{AGG1}", (1, 31), "Forbidden member_of parameters are not supported")
    bad(f"resources=VCPU:1&member_of=!in:{AGG1},{AGG2}", (1, 31), "not supported in the specified microversion")
    bad(f"resources=VCPU:1&member_of={AGG1},{AGG2}", fragment="must be prefixed with the 'in:' or '!in:'")
    bad("resources=VCPU:1&member_of=not-a-uuid", fragment="valid UUID(s). Got: not-a-uuid")
    bad(f"resources=VCPU:1&member_of={AGG1}&member_of={AGG2}", (1, 23), "Multiple member_of parameters")
    assert len(parse(f"resources=VCPU:1&member_of={AGG1}&member_of={AGG2}", (1, 24)).groups[""].member_of) == 2


def test_granular_groups() -> None:
    request = parse("resources=VCPU:1&resources1=SRIOV_NET_VF:1&required1=CUSTOM_A"
                    f"&member_of1=!{AGG1}&in_tree1={RP1}&group_policy=isolate", (1, 32))
    assert set(request.groups) == {"", "1"}
    numbered = request.groups["1"]
    assert numbered.use_same_provider
    assert numbered.resources == {"SRIOV_NET_VF": 1}
    assert numbered.required_traits == [frozenset({"CUSTOM_A"})]
    assert numbered.forbidden_aggs == {AGG1}
    assert numbered.in_tree == RP1
    assert request.group_policy == "isolate"


def test_suffixes_by_microversion() -> None:
    bad("resources_A=VCPU:1", (1, 32), "does not match any of the regexes")
    bad("resources0=VCPU:1", (1, 25), "does not match any of the regexes")
    assert set(parse("resources_A-1=VCPU:1", (1, 33)).groups) == {"_A-1"}
    bad("resources" + "x" * 65 + "=VCPU:1", (1, 33), "does not match any of the regexes")
    bad("resources=VCPU:1&resources1=VCPU:1", (1, 24), "'resources1' was unexpected")


def test_group_policy() -> None:
    bad("resources1=VCPU:1&resources2=VCPU:1", (1, 25), 'The "group_policy" parameter is required')
    parse("resources1=VCPU:1&resources2=VCPU:1&group_policy=none", (1, 25))
    parse("resources=VCPU:1&resources2=VCPU:1", (1, 25))
    bad("resources1=VCPU:1&group_policy=bogus", (1, 25), "is not one of ['none', 'isolate']")


def test_orphans_before_same_subtree() -> None:
    bad("resources=VCPU:1&required1=CUSTOM_A", (1, 25), "orphaned traits keys: required1")
    bad(f"resources=VCPU:1&member_of1={AGG1}", (1, 25), "orphaned member_of keys: member_of1")
    bad(f"resources=VCPU:1&in_tree1={RP1}", (1, 31), "All request groups must specify resources.")
    bad("group_policy=none", (1, 25), "At least one request group")


def test_resourceless_groups_from_same_subtree() -> None:
    request = parse("resources_A=VCPU:1&required_B=CUSTOM_X&same_subtree=_A,_B&group_policy=none", (1, 36))
    assert request.same_subtrees == [{"_A", "_B"}]
    assert request.groups["_B"].resources == {}
    bad("required_B=CUSTOM_X&same_subtree=_B", (1, 36), "There must be at least one resources")
    bad("resources=VCPU:1&required_B=CUSTOM_X", (1, 36), "should be specified in `same_subtree`")
    bad("resources_A=VCPU:1&same_subtree=_A,_C", (1, 36), "Real suffixes should be specified")
    bad("resources_A=VCPU:1&same_subtree=_A,", (1, 36), "Empty string (unsuffixed group)")
    error = bad("resources_A=VCPU:1&same_subtree=_A,_C", (1, 36))
    assert error.code == "placement.query.bad_value"


def test_root_required() -> None:
    request = parse("resources=VCPU:1&root_required=A,!B", (1, 35))
    assert request.root_required == {"A"}
    assert request.root_forbidden == {"B"}
    error = bad("resources=VCPU:1&root_required=A&root_required=B", (1, 35), "may be specified only once")
    assert error.code == "placement.query.duplicate_key"
    bad("resources=VCPU:1&root_required=A,!A", (1, 35), "Conflicting required and forbidden traits found in root_required")
    bad("resources=VCPU:1&root_required=in:A,B", (1, 39), "only supported since microversion 1.39")


def test_in_tree() -> None:
    bad("resources=VCPU:1&in_tree=nope", (1, 31), "Expected 'in_tree' parameter to be a format of uuid")
    assert parse("resources=VCPU:1&in_tree=" + RP1.replace("-", ""), (1, 31)).groups[""].in_tree


def test_nested_awareness_follows_microversion() -> None:
    assert not parse("resources=VCPU:1", (1, 28)).nested_aware
    assert parse("resources=VCPU:1", (1, 29)).nested_aware


# ---------------------------------------------------------- provider filters


def provider_filter(qs: str, version: tuple[int, int] = (1, 39)):
    return query.parse_provider_filter(query.query_pairs(qs), version)


def test_provider_filter_all_fields() -> None:
    result = provider_filter(
        f"name=cn1&uuid={RP1}&member_of=in:{AGG1},{AGG2}&member_of=!{AGG3}"
        f"&in_tree={RP1}&resources=VCPU:1&required=A,!B&required=in:C,D"
    )
    assert result.name == "cn1"
    assert result.uuid == RP1
    assert result.in_tree == RP1
    assert result.member_of == [frozenset({AGG1, AGG2})]
    assert result.forbidden_aggs == {AGG3}
    assert result.resources == {"VCPU": 1}
    assert result.required_traits == [frozenset({"A"}), frozenset({"C", "D"})]
    assert result.forbidden_traits == {"B"}


@pytest.mark.parametrize(
    ("qs", "version", "fragment"),
    [
        (f"member_of={AGG1}", (1, 2), "'member_of' was unexpected"),
        ("resources=VCPU:1", (1, 3), "'resources' was unexpected"),
        (f"in_tree={RP1}", (1, 13), "'in_tree' was unexpected"),
        ("required=A", (1, 17), "'required' was unexpected"),
        ("uuid=nope", (1, 0), "is not a 'uuid'"),
        ("in_tree=nope", (1, 14), "is not a 'uuid'"),
        (f"member_of=!{AGG1}", (1, 31), "Forbidden member_of parameters"),
        (f"member_of=in:{AGG1},!{AGG2}", (1, 39), "valid UUID(s)"),
        ("required=!A", (1, 21), "Got: !A"),
        ("limit=1", (1, 39), "'limit' was unexpected"),
    ],
)
def test_provider_filter_errors(qs: str, version: tuple[int, int], fragment: str) -> None:
    with pytest.raises(BadRequest) as info:
        provider_filter(qs, version)
    assert fragment in info.value.message


def test_uuid_spellings() -> None:
    assert query.is_uuid_like(AGG1)
    assert query.is_uuid_like(AGG1.replace("-", ""))
    assert query.is_uuid_like(AGG1.upper())
    assert not query.is_uuid_like("1234")
    assert not query.is_uuid_like("!" + AGG1)
