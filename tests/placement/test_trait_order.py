"""Traits are listed in the order they were created, as upstream lists them.

Upstream Placement reads traits by id and never sorts them by name: a
provider's traits, ``GET /traits`` and the provider summaries of
allocation candidates all come in creation order.
"""

from __future__ import annotations

# Created in this order, which is not the alphabetical one.
CUSTOM = ["CUSTOM_ZEBRA", "CUSTOM_APPLE", "CUSTOM_MANGO"]
# Standard traits exist before any custom one.
STANDARD = ["HW_CPU_X86_AVX", "COMPUTE_NET_ATTACH_INTERFACE"]


def _create_traits(placement) -> None:
    client = placement.client("1.6")
    for name in CUSTOM:
        assert client.put(f"/traits/{name}").status_code == 201


def _provider_with_traits(placement, names: list[str]) -> str:
    client = placement.client("1.20")
    rp = client.post("/resource_providers", json={"name": "cn1"}).json()["uuid"]
    client.put(f"/resource_providers/{rp}/inventories",
               json={"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 8}}}).raise_for_status()
    client.put(f"/resource_providers/{rp}/traits",
               json={"resource_provider_generation": 1, "traits": names}).raise_for_status()
    return rp


def _standard_in_creation_order(placement) -> list[str]:
    """The two standard traits in the order the service itself lists all traits."""
    every = placement.client("1.6").get("/traits").json()["traits"]
    return [name for name in every if name in STANDARD]


def test_provider_traits_come_in_creation_order(placement) -> None:
    _create_traits(placement)
    # Sent in yet another order, with a standard trait at the end.
    rp = _provider_with_traits(placement, ["CUSTOM_MANGO", "CUSTOM_ZEBRA", "CUSTOM_APPLE", *STANDARD])
    listed = placement.client("1.6").get(f"/resource_providers/{rp}/traits").json()["traits"]
    assert listed == _standard_in_creation_order(placement) + CUSTOM


def test_trait_list_comes_in_creation_order(placement) -> None:
    _create_traits(placement)
    client = placement.client("1.6")
    every = client.get("/traits").json()["traits"]
    assert every[-3:] == CUSTOM
    assert client.get("/traits?name=startswith:CUSTOM_").json()["traits"] == CUSTOM
    assert client.get("/traits?name=in:CUSTOM_MANGO,CUSTOM_APPLE,CUSTOM_ZEBRA").json()["traits"] == CUSTOM
    _provider_with_traits(placement, ["CUSTOM_MANGO", "CUSTOM_ZEBRA"])
    assert client.get("/traits?associated=true").json()["traits"] == ["CUSTOM_ZEBRA", "CUSTOM_MANGO"]
    unassociated = client.get("/traits?associated=false").json()["traits"]
    assert [name for name in unassociated if name.startswith("CUSTOM_")] == ["CUSTOM_APPLE"]


def test_candidate_summaries_list_traits_in_creation_order(placement) -> None:
    _create_traits(placement)
    rp = _provider_with_traits(placement, ["CUSTOM_MANGO", "CUSTOM_APPLE", "CUSTOM_ZEBRA", *STANDARD])
    body = placement.client("1.17").get("/allocation_candidates?resources=VCPU:1").json()
    assert body["provider_summaries"][rp]["traits"] == _standard_in_creation_order(placement) + CUSTOM


def test_candidate_summaries_keep_creation_order_after_a_trait_change(placement) -> None:
    # The search has a snapshot already; the change is applied to it, not read afresh.
    _create_traits(placement)
    rp = _provider_with_traits(placement, ["CUSTOM_APPLE"])
    client = placement.client("1.17")
    assert client.get("/allocation_candidates?resources=VCPU:1").json()["provider_summaries"][rp]["traits"] == [
        "CUSTOM_APPLE"]
    placement.client("1.6").put(f"/resource_providers/{rp}/traits", json={
        "resource_provider_generation": 2, "traits": ["CUSTOM_MANGO", "CUSTOM_APPLE", "CUSTOM_ZEBRA"],
    }).raise_for_status()
    body = client.get("/allocation_candidates?resources=VCPU:1").json()
    assert body["provider_summaries"][rp]["traits"] == CUSTOM
