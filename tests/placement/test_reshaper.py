"""POST /reshaper: inventories and allocations move together or not at all."""

from __future__ import annotations

import uuid


def _service(placement, version="1.30"):
    """A client with only the service role: reshaping is for services, not admins."""
    return placement.client(version).with_headers(X_Roles="service")


def _setup(placement):
    client = _service(placement)
    root = placement.client("1.20").post("/resource_providers", json={"name": "cn"}).json()["uuid"]
    child = placement.client("1.20").post("/resource_providers", json={"name": "numa0", "parent_provider_uuid": root}).json()["uuid"]
    client.put(f"/resource_providers/{root}/inventories",
               json={"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 8}, "DISK_GB": {"total": 100}}})
    consumer = str(uuid.uuid4())
    body = {"allocations": {root: {"resources": {"VCPU": 2, "DISK_GB": 10}}}, "project_id": "p", "user_id": "u",
            "consumer_generation": None}
    assert client.put(f"/allocations/{consumer}", json=body).status_code == 204
    return client, root, child, consumer


def _reshape_body(root, child, consumer, root_generation=2, consumer_generation=1):
    return {
        "inventories": {
            root: {"resource_provider_generation": root_generation, "inventories": {"DISK_GB": {"total": 100}}},
            child: {"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 8}}},
        },
        "allocations": {
            consumer: {
                "allocations": {root: {"resources": {"DISK_GB": 10}}, child: {"resources": {"VCPU": 2}}},
                "project_id": "p", "user_id": "u", "consumer_generation": consumer_generation,
            }
        },
    }


def test_reshape_moves_inventory_and_allocations(placement) -> None:
    client, root, child, consumer = _setup(placement)
    assert _service(placement, "1.29").post("/reshaper", json=_reshape_body(root, child, consumer)).status_code == 404
    response = client.post("/reshaper", json=_reshape_body(root, child, consumer))
    assert response.status_code == 204, response.text
    assert set(client.get(f"/resource_providers/{root}/inventories").json()["inventories"]) == {"DISK_GB"}
    assert client.get(f"/resource_providers/{child}/usages").json()["usages"] == {"VCPU": 2}
    shown = client.get(f"/allocations/{consumer}").json()
    assert shown["allocations"][child]["resources"] == {"VCPU": 2}
    assert shown["consumer_generation"] == 2


def test_failed_reshape_changes_nothing(placement) -> None:
    client, root, child, consumer = _setup(placement)
    before = client.get(f"/allocations/{consumer}").json()
    stale_provider = client.post("/reshaper", json=_reshape_body(root, child, consumer, root_generation=1))
    assert stale_provider.status_code == 409
    stale_consumer = client.post("/reshaper", json=_reshape_body(root, child, consumer, consumer_generation=7))
    assert stale_consumer.status_code == 409
    # Moving the inventory but not the allocation leaves VCPU in use on the root.
    body = _reshape_body(root, child, consumer)
    body["allocations"] = {}
    in_use = _service(placement).post("/reshaper", json=body)
    assert in_use.status_code == 409
    assert client.post("/reshaper", json={"inventories": {}}).status_code == 400
    unknown = dict(_reshape_body(root, child, consumer))
    unknown["inventories"] = {"00000000-0000-0000-0000-0000000000aa": {"resource_provider_generation": 0, "inventories": {}}}
    missing = _service(placement).post("/reshaper", json=unknown)
    assert missing.status_code == 404
    assert missing.json()["errors"][0]["code"] == "placement.resource_provider.not_found"
    assert client.get(f"/allocations/{consumer}").json() == before
    assert set(client.get(f"/resource_providers/{root}/inventories").json()["inventories"]) == {"VCPU", "DISK_GB"}
    assert client.get(f"/resource_providers/{child}/inventories").json()["inventories"] == {}


def test_admins_without_the_service_role_may_not_reshape(placement) -> None:
    client, root, child, consumer = _setup(placement)
    for body in (_reshape_body(root, child, consumer), {}):
        refused = placement.client("1.39").post("/reshaper", json=body)
        assert refused.status_code == 403
        assert refused.json()["errors"][0] == {
            "status": 403, "title": "Forbidden",
            "detail": "Access was denied to this resource.\n\n "
                      "Policy does not allow placement:reshaper:reshape to be performed.  ",
            "code": "placement.undefined_code", "request_id": refused.headers["x-openstack-request-id"],
        }
    # The policy is checked before the body is read.
    empty = placement.client("1.39").post("/reshaper", data="", headers={"content-type": "application/json"})
    assert empty.status_code == 403
    as_service = _service(placement, "1.39").post("/reshaper", data="", headers={"content-type": "application/json"})
    assert as_service.status_code == 400
