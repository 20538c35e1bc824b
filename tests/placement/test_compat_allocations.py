"""Allocations answer as upstream Placement does: consumer ids in paths, messages."""

from __future__ import annotations

import uuid


def _provider_with_inventory(placement) -> str:
    rp = placement.client("1.20").post("/resource_providers", json={"name": "rp"}).json()["uuid"]
    placement.client("1.20").put(f"/resource_providers/{rp}/inventories", json={
        "resource_provider_generation": 0, "inventories": {"VCPU": {"total": 8}, "DISK_GB": {"total": 100}}})
    return rp


def _detail(response) -> str:
    return response.json()["errors"][0]["detail"]


def test_dashless_consumer_uuid_is_the_same_consumer(placement) -> None:
    rp = _provider_with_inventory(placement)
    client = placement.client("1.28")
    consumer = str(uuid.uuid4())
    body = {"allocations": {rp: {"resources": {"VCPU": 1}}}, "project_id": "p", "user_id": "u",
            "consumer_generation": None}
    assert client.put(f"/allocations/{consumer}", json=body).status_code == 204
    body["consumer_generation"] = 1
    body["allocations"][rp]["resources"]["VCPU"] = 2
    again = client.put(f"/allocations/{consumer.replace('-', '')}", json=body)
    assert again.status_code == 204, again.text
    shown = client.get(f"/allocations/{consumer}").json()
    assert shown["allocations"][rp]["resources"] == {"VCPU": 2} and shown["consumer_generation"] == 2


def test_consumer_ids_that_are_not_uuids(placement) -> None:
    client = placement.client("1.28")
    assert client.get("/allocations/not-a-uuid").json() == {"allocations": {}}
    deleted = client.delete("/allocations/not-a-uuid")
    assert deleted.status_code == 404 and "No allocations for consumer 'not-a-uuid'" in _detail(deleted)
    put = client.put("/allocations/not-a-uuid", json={"allocations": {}, "project_id": "p", "user_id": "u",
                                                      "consumer_generation": None})
    assert put.status_code == 400 and "Malformed consumer_uuid: not-a-uuid" in _detail(put)


def test_unknown_resource_class_messages(placement) -> None:
    rp = _provider_with_inventory(placement)
    consumer = str(uuid.uuid4())
    put = placement.client("1.0").put(f"/allocations/{consumer}", json={
        "allocations": [{"resource_provider": {"uuid": rp}, "resources": {"COWS": 12}}]})
    assert put.status_code == 400
    assert f"Unable to allocate inventory for consumer {consumer}" in _detail(put)
    assert "No such resource class COWS" in _detail(put)
    post = placement.client("1.13").post("/allocations", json={
        consumer: {"allocations": {rp: {"resources": {"CUSTOM_PONY": 1}}}, "project_id": "p", "user_id": "u"}})
    assert post.status_code == 400 and "No such resource class CUSTOM_PONY" in _detail(post)
    assert placement.client("1.28").get(f"/allocations/{consumer}").json() == {"allocations": {}}


def test_inventory_in_use_names_every_class_in_class_order(placement) -> None:
    rp = _provider_with_inventory(placement)
    consumer = str(uuid.uuid4())
    assert placement.client("1.8").put(f"/allocations/{consumer}", json={
        "allocations": [{"resource_provider": {"uuid": rp}, "resources": {"DISK_GB": 10, "VCPU": 1}}],
        "project_id": "p", "user_id": "u"}).status_code == 204
    client = placement.client("1.23")
    in_use = f"Inventory for 'VCPU, DISK_GB' on resource provider '{rp}' in use"
    delete_all = client.delete(f"/resource_providers/{rp}/inventories")
    assert delete_all.status_code == 409 and in_use in _detail(delete_all)
    assert delete_all.json()["errors"][0]["code"] == "placement.inventory.inuse"
    put_none = client.put(f"/resource_providers/{rp}/inventories",
                          json={"resource_provider_generation": 2, "inventories": {}})
    assert put_none.status_code == 409 and f"update conflict: {in_use}" in _detail(put_none)
    delete_one = client.delete(f"/resource_providers/{rp}/inventories/VCPU")
    assert delete_one.status_code == 409
    assert f"Unable to delete inventory of class VCPU: Inventory for 'VCPU' on resource provider '{rp}'" in _detail(
        delete_one)


def test_project_and_user_are_refused_before_1_8(placement) -> None:
    rp = _provider_with_inventory(placement)
    body = {"allocations": [{"resource_provider": {"uuid": rp}, "resources": {"VCPU": 1}}],
            "project_id": "p", "user_id": "u"}
    early = placement.client("1.7").put(f"/allocations/{uuid.uuid4()}", json=body)
    assert early.status_code == 400 and "Additional properties are not allowed" in _detail(early)
    assert placement.client("1.8").put(f"/allocations/{uuid.uuid4()}", json=body).status_code == 204


def test_mappings_follow_upstreams_schema(placement) -> None:
    rp = _provider_with_inventory(placement)
    client = placement.client("1.34")
    body = {"allocations": {rp: {"resources": {"VCPU": 1}}}, "project_id": "p", "user_id": "u",
            "consumer_generation": None, "mappings": {}}
    assert client.put(f"/allocations/{uuid.uuid4()}", json=body).status_code == 400
    body["mappings"] = {"group-1": [rp, rp]}
    assert client.put(f"/allocations/{uuid.uuid4()}", json=body).status_code == 204


def test_stale_consumer_generation_message_says_none(placement) -> None:
    rp = _provider_with_inventory(placement)
    client = placement.client("1.28")
    consumer = str(uuid.uuid4())
    body = {"allocations": {rp: {"resources": {"VCPU": 1}}}, "project_id": "p", "user_id": "u",
            "consumer_generation": None}
    assert client.put(f"/allocations/{consumer}", json=body).status_code == 204
    again = client.put(f"/allocations/{consumer}", json=body)
    assert again.status_code == 409 and "consumer generation conflict - expected 1 but got None" in _detail(again)


def test_emptying_allocations_bumps_the_providers_left(placement) -> None:
    rp = _provider_with_inventory(placement)
    client = placement.client("1.28")
    consumer = str(uuid.uuid4())
    body = {"allocations": {rp: {"resources": {"VCPU": 1}}}, "project_id": "p", "user_id": "u",
            "consumer_generation": None}
    assert client.put(f"/allocations/{consumer}", json=body).status_code == 204
    before = client.get(f"/resource_providers/{rp}").json()["generation"]
    emptied = client.put(f"/allocations/{consumer}", json={**body, "allocations": {}, "consumer_generation": 1})
    assert emptied.status_code == 204
    assert client.get(f"/resource_providers/{rp}").json()["generation"] == before + 1
    # DELETE, like upstream's, leaves the generation alone.
    assert client.put(f"/allocations/{consumer}", json={**body, "consumer_generation": None}).status_code == 204
    after_put = client.get(f"/resource_providers/{rp}").json()["generation"]
    assert client.delete(f"/allocations/{consumer}").status_code == 204
    assert client.get(f"/resource_providers/{rp}").json()["generation"] == after_put


def test_inventory_constraint_message(placement) -> None:
    rp = _provider_with_inventory(placement)
    placement.client("1.20").put(f"/resource_providers/{rp}/inventories/VCPU",
                                 json={"resource_provider_generation": 1, "total": 8, "max_unit": 2})
    refused = placement.client("1.20").put(f"/allocations/{uuid.uuid4()}", json={
        "allocations": {rp: {"resources": {"VCPU": 4}}}, "project_id": "p", "user_id": "u"})
    assert refused.status_code == 409
    assert (f"Unable to create allocation for 'VCPU' on resource provider '{rp}'. "
            "The requested amount would violate inventory constraints.") in _detail(refused)
