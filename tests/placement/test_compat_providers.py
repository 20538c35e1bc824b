"""Resource providers and inventories answer as upstream Placement does.

Status codes, Location headers and the message fragments upstream's own
functional tests match on.
"""

from __future__ import annotations

import uuid


def _provider(placement, name="rp"):
    response = placement.client("1.20").post("/resource_providers", json={"name": name})
    assert response.status_code == 200, response.text
    return response.json()["uuid"]


def _detail(response) -> str:
    return response.json()["errors"][0]["detail"]


def test_dashless_uuid_names_the_same_provider(placement) -> None:
    client = placement.client("1.20")
    dashed = str(uuid.uuid4())
    assert client.post("/resource_providers", json={"name": "a", "uuid": dashed}).status_code == 200
    again = client.post("/resource_providers", json={"name": "b", "uuid": dashed.replace("-", "")})
    assert again.status_code == 409
    assert f"Conflicting resource provider uuid: {dashed} already exists" in _detail(again)
    upper = str(uuid.uuid4()).upper().replace("-", "")
    created = client.post("/resource_providers", json={"name": "c", "uuid": upper})
    assert created.status_code == 200 and created.json()["uuid"] == str(uuid.UUID(upper))


def test_validation_errors_carry_the_schema_path(placement) -> None:
    client = placement.client("1.20")
    bad_uuid = client.post("/resource_providers", json={"name": "x", "uuid": "this is not a uuid"})
    assert bad_uuid.status_code == 400 and "Failed validating 'format'" in _detail(bad_uuid)
    long_name = client.post("/resource_providers", json={"name": "n" * 201})
    assert long_name.status_code == 400 and "Failed validating 'maxLength'" in _detail(long_name)


def test_parent_errors(placement) -> None:
    client = placement.client("1.20")
    same = str(uuid.uuid4())
    selfish = client.post("/resource_providers", json={"name": "child", "uuid": same, "parent_provider_uuid": same})
    assert selfish.status_code == 400
    assert "parent provider UUID cannot be same as UUID" in _detail(selfish)
    assert f'Unable to create resource provider "child", {same}:' in _detail(selfish)
    rp = _provider(placement)
    orphan = client.put(f"/resource_providers/{rp}", json={"name": "rp", "parent_provider_uuid": str(uuid.uuid4())})
    assert orphan.status_code == 400 and "parent provider UUID does not exist" in _detail(orphan)


def test_delete_missing_provider_message(placement) -> None:
    missing = str(uuid.uuid4())
    response = placement.client("1.20").delete(f"/resource_providers/{missing}")
    assert response.status_code == 404
    assert f"No resource provider with uuid {missing} found for delete" in _detail(response)


def test_post_inventory_needs_no_generation_and_location_is_absolute(placement) -> None:
    rp = _provider(placement)
    base = f"/resource_providers/{rp}/inventories"
    created = placement.client("1.20").post(base, json={"resource_class": "DISK_GB", "total": 2048})
    assert created.status_code == 201, created.text
    assert created.json()["resource_provider_generation"] == 1
    assert created.headers["location"] == f"{placement.url}{base}/DISK_GB"


def test_inventory_messages(placement) -> None:
    rp = _provider(placement)
    client = placement.client("1.25")
    base = f"/resource_providers/{rp}/inventories"
    full = client.post(base, json={"resource_class": "VCPU", "total": 4, "reserved": 4})
    assert full.status_code == 400 and "Unable to create inventory for resource provider" in _detail(full)
    unknown = client.post(base, json={"resource_class": "NO_CLASS_14", "total": 4})
    assert unknown.status_code == 400 and "No such resource class NO_CLASS_14" in _detail(unknown)
    new_style = placement.client("1.26").put(
        base, json={"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 4, "reserved": 5}}}
    )
    assert new_style.status_code == 400 and "greater than total" in _detail(new_style)
    missing = client.delete(f"{base}/IPV4_ADDRESS")
    assert missing.status_code == 404 and "No inventory of class IPV4_ADDRESS found for delete" in _detail(missing)


def test_update_one_inventory_checks_in_upstream_order(placement) -> None:
    rp = _provider(placement)
    client = placement.client("1.25")
    base = f"/resource_providers/{rp}/inventories"
    assert client.post(base, json={"resource_class": "VCPU", "total": 4}).status_code == 201
    stale_and_bad = client.put(f"{base}/VCPU", json={"resource_provider_generation": 0, "total": 4, "reserved": 9})
    assert stale_and_bad.status_code == 409
    bad = client.put(f"{base}/VCPU", json={"resource_provider_generation": 1, "total": 4, "reserved": 9})
    assert bad.status_code == 400
    assert f"Unable to update inventory for resource provider {rp}" in _detail(bad)
    absent = client.put(f"{base}/MEMORY_MB", json={"resource_provider_generation": 1, "total": 4})
    assert absent.status_code == 400
    assert "No inventory record with resource class for resource provider" in _detail(absent)
    unknown = client.put(f"{base}/CUSTOM_NOPE", json={"resource_provider_generation": 1, "total": 4})
    assert unknown.status_code == 404 and "No such resource class CUSTOM_NOPE" in _detail(unknown)


def test_only_the_written_inventory_is_checked_at_this_microversion(placement) -> None:
    rp = _provider(placement)
    base = f"/resource_providers/{rp}/inventories"
    # Reserved equal to total is fine from 1.26 on ...
    full = placement.client("1.26").post(base, json={"resource_class": "MEMORY_MB", "total": 8, "reserved": 8})
    assert full.status_code == 201
    # ... and does not stop older clients writing other classes; a stale generation in a POST is ignored.
    old = placement.client("1.0")
    added = old.post(base, json={"resource_class": "DISK_GB", "total": 8, "resource_provider_generation": 99})
    assert added.status_code == 201, added.text
    assert added.json()["resource_provider_generation"] == 2
    assert old.post(base, json={"resource_class": "VCPU", "total": 8}).status_code == 201
    updated = old.put(f"{base}/VCPU", json={"total": 16, "resource_provider_generation": 3})
    assert updated.status_code == 200, updated.text
    assert old.delete(f"{base}/DISK_GB").status_code == 204


def test_more_upstream_wording(placement) -> None:
    client = placement.client("1.20")
    rp = _provider(placement, "first")
    _provider(placement, "second")
    renamed = client.put(f"/resource_providers/{rp}", json={"name": "second"})
    assert renamed.status_code == 409 and "Conflicting resource provider second already exists." in _detail(renamed)
    broken = client.post("/resource_providers", data=b"{", headers={"content-type": "application/json"})
    assert broken.status_code == 400
    assert "Malformed JSON: Expecting property name enclosed in double quotes" in _detail(broken)
    flat = client.post("/resource_providers", json={})
    # Upstream's text bodies carry the message on one line.
    assert "\n" not in _detail(flat).split("\n\n", 1)[1]
    unknown = client.delete(f"/resource_providers/{rp}/inventories/NOPE")
    assert unknown.status_code == 404
    assert "No inventory of class NOPE found for delete: No such resource class NOPE." in _detail(unknown)
    too_early = placement.client("1.4").delete(f"/resource_providers/{rp}/inventories")
    assert too_early.status_code == 405 and "allow" not in too_early.headers


def test_empty_names_and_repeated_query_parameters(placement) -> None:
    client = placement.client("1.20")
    empty = client.post("/resource_providers", json={"name": ""})
    assert empty.status_code == 400 and "Object action create failed because: name is required" in _detail(empty)
    rp = _provider(placement)
    # Upstream only refuses an empty name when creating.
    assert client.put(f"/resource_providers/{rp}", json={"name": ""}).status_code == 200
    assert client.get("/usages?project_id=x&project_id=y").status_code == 200


def test_children_are_checked_before_allocations_on_delete(placement) -> None:
    client = placement.client("1.20")
    rp = _provider(placement, "parent")
    assert client.post("/resource_providers", json={"name": "child", "parent_provider_uuid": rp}).status_code == 200
    client.put(f"/resource_providers/{rp}/inventories",
               json={"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 4}}})
    assert client.put(f"/allocations/{uuid.uuid4()}", json={
        "allocations": {rp: {"resources": {"VCPU": 1}}}, "project_id": "p", "user_id": "u"}).status_code == 204
    refused = client.delete(f"/resource_providers/{rp}")
    assert refused.status_code == 409 and "It has child resource providers." in _detail(refused)


def test_unknown_inventory_names_are_unknown_classes(placement) -> None:
    rp = _provider(placement)
    base = f"/resource_providers/{rp}/inventories"
    client = placement.client("1.20")
    stale = client.put(base, json={"resource_provider_generation": 9, "inventories": {"BAD-NAME": {"total": 1}}})
    assert stale.status_code == 409
    unknown = client.put(base, json={"resource_provider_generation": 0, "inventories": {"BAD-NAME": {"total": 1}}})
    assert unknown.status_code == 400 and "No such resource class BAD-NAME." in _detail(unknown)
    junk = client.put(base, json={"resource_provider_generation": 0, "inventories": {"BAD-NAME": "x"}})
    assert junk.status_code == 400
