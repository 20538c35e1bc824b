"""Traits, resource classes, aggregates and usages answer as upstream Placement does."""

from __future__ import annotations

import uuid


def _provider(placement) -> str:
    return placement.client("1.20").post("/resource_providers", json={"name": "rp"}).json()["uuid"]


def _detail(response) -> str:
    return response.json()["errors"][0]["detail"]


def test_bodiless_answers_have_no_content_type(placement) -> None:
    created = placement.client("1.19").post("/resource_providers", json={"name": "old"})
    assert created.status_code == 201 and "content-type" not in created.headers
    trait = placement.client("1.6").put("/traits/CUSTOM_TRAIT_1")
    assert trait.status_code == 201 and "content-type" not in trait.headers
    assert placement.client("1.6").get("/traits").headers["content-type"] == "application/json"


def test_put_existing_trait_and_class_still_send_location(placement) -> None:
    client = placement.client("1.7")
    assert client.put("/traits/CUSTOM_TRAIT_1").status_code == 201
    again = client.put("/traits/CUSTOM_TRAIT_1")
    assert again.status_code == 204 and again.headers["location"].endswith("/traits/CUSTOM_TRAIT_1")
    assert client.put("/resource_classes/CUSTOM_COW").status_code == 201
    again = client.put("/resource_classes/CUSTOM_COW")
    assert again.status_code == 204 and again.headers["location"].endswith("/resource_classes/CUSTOM_COW")


def test_resource_class_put_and_delete_messages(placement) -> None:
    client = placement.client("1.7")
    standard = client.put("/resource_classes/VCPU")
    assert standard.status_code == 400 and "Failed validating 'pattern'" in _detail(standard)
    too_long = client.put("/resource_classes/CUSTOM_" + "S" * 250)
    assert too_long.status_code == 400 and "Failed validating 'maxLength'" in _detail(too_long)
    rp = _provider(placement)
    assert client.put("/resource_classes/CUSTOM_GOLD").status_code == 201
    placement.client("1.20").put(f"/resource_providers/{rp}/inventories", json={
        "resource_provider_generation": 0, "inventories": {"CUSTOM_GOLD": {"total": 1}}})
    in_use = client.delete("/resource_classes/CUSTOM_GOLD")
    assert in_use.status_code == 409 and "Error in delete resource class" in _detail(in_use)
    standard = client.delete("/resource_classes/VCPU")
    assert standard.status_code == 400 and "Error in delete resource class" in _detail(standard)


def test_trait_query_and_generation_messages(placement) -> None:
    client = placement.client("1.6")
    bad_name = client.get("/traits?name=in_abc")
    assert bad_name.status_code == 400
    assert '?name=[in|startswith]:[name1,name2|prefix]. Got: "in_abc"' in _detail(bad_name)
    bad_associated = client.get("/traits?associated=maybe")
    assert 'The query parameter "associated" only accepts "true" or "false"' in _detail(bad_associated)
    rp = _provider(placement)
    stale = client.put(f"/resource_providers/{rp}/traits", json={"traits": [], "resource_provider_generation": 5})
    assert stale.status_code == 409
    assert "Resource provider's generation already changed" in _detail(stale)
    unknown = client.put(f"/resource_providers/{rp}/traits",
                         json={"traits": ["CUSTOM_NOPE"], "resource_provider_generation": 0})
    assert unknown.status_code == 400 and "No such trait CUSTOM_NOPE" in _detail(unknown)


def test_aggregates_missing_provider_first_and_request_order(placement) -> None:
    missing = placement.client("1.1").put(f"/resource_providers/{uuid.uuid4()}/aggregates", json={})
    assert missing.status_code == 404
    rp = _provider(placement)
    wanted = sorted((str(uuid.uuid4()) for _ in range(3)), reverse=True)
    client = placement.client("1.19")
    put = client.put(f"/resource_providers/{rp}/aggregates",
                     json={"aggregates": wanted, "resource_provider_generation": 0})
    assert put.status_code == 200 and put.json()["aggregates"] == wanted
    stale = client.put(f"/resource_providers/{rp}/aggregates",
                       json={"aggregates": [], "resource_provider_generation": 0})
    assert stale.status_code == 409 and "Resource provider's generation already changed" in _detail(stale)


def test_usage_query_messages_carry_the_schema_path(placement) -> None:
    client = placement.client("1.9")
    empty = client.get("/usages?project_id=")
    assert empty.status_code == 400 and "Failed validating 'minLength'" in _detail(empty)
    long = client.get("/usages?project_id=" + "p" * 300)
    assert long.status_code == 400 and "Failed validating 'maxLength'" in _detail(long)


def test_inventory_stale_generation_wins_over_bad_capacity(placement) -> None:
    rp = _provider(placement)
    response = placement.client("1.20").put(f"/resource_providers/{rp}/inventories", json={
        "resource_provider_generation": 7, "inventories": {"VCPU": {"total": 1, "reserved": 5}}})
    assert response.status_code == 409
    missing = placement.client("1.20").put(f"/resource_providers/{uuid.uuid4()}/inventories", json=[])
    assert missing.status_code == 404


def test_provider_traits_accept_repeats_and_report_unknown_names(placement) -> None:
    rp = _provider(placement)
    client = placement.client("1.6")
    assert client.put("/traits/CUSTOM_A").status_code == 201
    repeated = client.put(f"/resource_providers/{rp}/traits",
                          json={"traits": ["CUSTOM_A", "CUSTOM_A"], "resource_provider_generation": 0})
    assert repeated.status_code == 200 and repeated.json()["traits"] == ["CUSTOM_A"]
    lower = client.put(f"/resource_providers/{rp}/traits", json={"traits": ["lower"], "resource_provider_generation": 1})
    assert lower.status_code == 400 and "No such trait lower" in _detail(lower)
    missing = client.get("/traits/CUSTOM_B")
    assert missing.status_code == 404 and "No such trait(s): CUSTOM_B." in _detail(missing)


def test_renaming_a_class_to_its_own_name_is_fine(placement) -> None:
    client = placement.client("1.2")
    assert client.post("/resource_classes", json={"name": "CUSTOM_Y"}).status_code == 201
    same = client.put("/resource_classes/CUSTOM_Y", json={"name": "CUSTOM_Y"})
    assert same.status_code == 200 and same.json()["name"] == "CUSTOM_Y"


def test_bare_404_has_no_repeated_detail(placement) -> None:
    too_early = placement.client("1.5").get("/traits")
    assert too_early.status_code == 404
    assert _detail(too_early) == "The resource could not be found.\n\n   "


def test_usage_consumer_type_pattern_is_upstreams(placement) -> None:
    client = placement.client("1.38")
    bad = client.get("/usages?project_id=p&consumer_type=bad")
    assert bad.status_code == 400 and "'^[A-Z0-9_]+$|^all|^unknown$'" in _detail(bad)
    # Upstream's "^all" is not anchored at the end: such a type just matches nothing.
    loose = client.get("/usages?project_id=p&consumer_type=allx")
    assert loose.status_code == 200 and loose.json()["usages"] == {}


def test_unchanged_traits_leave_the_generation_alone(placement) -> None:
    rp = _provider(placement)
    client = placement.client("1.6")
    assert client.delete(f"/resource_providers/{rp}/traits").status_code == 204
    same = client.put(f"/resource_providers/{rp}/traits", json={"traits": [], "resource_provider_generation": 0})
    assert same.status_code == 200 and same.json()["resource_provider_generation"] == 0
    changed = client.put(f"/resource_providers/{rp}/traits",
                         json={"traits": ["HW_CPU_X86_AVX"], "resource_provider_generation": 0})
    assert changed.json()["resource_provider_generation"] == 1
    assert client.delete(f"/resource_providers/{rp}/traits").status_code == 204
    assert client.get(f"/resource_providers/{rp}/traits").json()["resource_provider_generation"] == 2
