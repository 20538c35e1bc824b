"""Inventories: set, replace, show, update, delete, validation and generations."""

from __future__ import annotations

import pytest


@pytest.fixture
def rp(placement):
    return placement.client("1.20").post("/resource_providers", json={"name": "cn1"}).json()


def test_post_get_put_delete_one(placement, rp) -> None:
    client = placement.client("1.23")
    base = f"/resource_providers/{rp['uuid']}/inventories"
    created = client.post(base, json={"resource_class": "VCPU", "total": 8, "resource_provider_generation": 0})
    assert created.status_code == 201, created.text
    assert created.headers["location"].endswith(f"{base}/VCPU")
    assert created.json() == {"total": 8, "reserved": 0, "min_unit": 1, "max_unit": 2147483647, "step_size": 1,
                              "allocation_ratio": 1.0, "resource_provider_generation": 1}
    again = client.post(base, json={"resource_class": "VCPU", "total": 8, "resource_provider_generation": 1})
    assert again.status_code == 409
    shown = client.get(f"{base}/VCPU")
    assert shown.status_code == 200 and shown.json()["total"] == 8
    assert client.get(f"{base}/MEMORY_MB").status_code == 404
    updated = client.put(f"{base}/VCPU", json={"total": 16, "allocation_ratio": 2.0, "resource_provider_generation": 1})
    assert updated.status_code == 200 and updated.json()["resource_provider_generation"] == 2
    assert updated.json()["allocation_ratio"] == 2.0
    stale = client.put(f"{base}/VCPU", json={"total": 4, "resource_provider_generation": 1})
    assert stale.status_code == 409 and stale.json()["errors"][0]["code"] == "placement.concurrent_update"
    assert client.put(f"{base}/DISK_GB", json={"total": 4, "resource_provider_generation": 2}).status_code == 400
    assert client.delete(f"{base}/VCPU").status_code == 204
    assert client.delete(f"{base}/VCPU").status_code == 404
    assert client.get(base).json() == {"inventories": {}, "resource_provider_generation": 3}


def test_replace_all_and_delete_all(placement, rp) -> None:
    client = placement.client("1.26")
    base = f"/resource_providers/{rp['uuid']}/inventories"
    body = {"resource_provider_generation": 0,
            "inventories": {"VCPU": {"total": 4}, "MEMORY_MB": {"total": 1024, "reserved": 1024}}}
    replaced = client.put(base, json=body)
    assert replaced.status_code == 200, replaced.text
    assert set(replaced.json()["inventories"]) == {"VCPU", "MEMORY_MB"}
    assert replaced.json()["resource_provider_generation"] == 1
    # Before 1.26 reserved must stay below total.
    body["resource_provider_generation"] = 1
    assert placement.client("1.25").put(base, json=body).status_code == 400
    assert placement.client("1.4").delete(base).status_code == 405
    assert client.delete(base).status_code == 204
    assert client.get(base).json()["inventories"] == {}


@pytest.mark.parametrize(
    "record",
    [{"total": 0}, {"total": -1}, {"total": 2147483648}, {"total": 4, "reserved": 5}, {"total": 4, "min_unit": 0},
     {"total": 4, "step_size": 0}, {"total": 4, "max_unit": 0}, {"total": "4"}, {"total": 4, "color": "red"},
     {"reserved": 1}, {"total": 4, "allocation_ratio": "x"}, {"total": 4, "allocation_ratio": -1.0}],
)
def test_bad_inventories_are_400_and_change_nothing(placement, rp, record) -> None:
    client = placement.client("1.26")
    base = f"/resource_providers/{rp['uuid']}/inventories"
    response = client.put(base, json={"resource_provider_generation": 0, "inventories": {"VCPU": record}})
    assert response.status_code == 400, response.text
    assert client.get(base).json() == {"inventories": {}, "resource_provider_generation": 0}


def test_unknown_class_and_provider(placement, rp) -> None:
    client = placement.client("1.26")
    base = f"/resource_providers/{rp['uuid']}/inventories"
    unknown = client.put(base, json={"resource_provider_generation": 0, "inventories": {"CUSTOM_NOPE": {"total": 1}}})
    assert unknown.status_code == 400 and "CUSTOM_NOPE" in unknown.json()["errors"][0]["detail"]
    assert client.put(base, json={"resource_provider_generation": 0, "inventories": {"vcpu": {"total": 1}}}).status_code == 400
    missing = placement.client("1.23").get("/resource_providers/00000000-0000-0000-0000-000000000001/inventories")
    assert missing.status_code == 404
    assert missing.json()["errors"][0]["code"] == "placement.undefined_code"
    assert client.put(base, data=b"[", headers={"content-type": "application/json"}).status_code == 400
