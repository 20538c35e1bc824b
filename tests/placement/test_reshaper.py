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
    assert missing.status_code == 400
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


def _detail(response) -> tuple[int, str | None, str]:
    error = response.json()["errors"][0]
    return response.status_code, error.get("code"), error["detail"].split("\n\n ", 1)[1].strip()


def _generation(client, provider: str) -> int:
    return client.get(f"/resource_providers/{provider}").json()["generation"]


def test_generations_after_a_reshape_are_upstreams(placement) -> None:
    """Interim inventories, allocations and final inventories each count, as upstream counts them."""
    client, root, child, consumer = _setup(placement)
    assert (_generation(client, root), _generation(client, child)) == (2, 0)
    assert client.post("/reshaper", json=_reshape_body(root, child, consumer)).status_code == 204
    # Upstream 16.0.0 on the same requests: 2 -> 5 and 0 -> 3.
    assert (_generation(client, root), _generation(client, child)) == (5, 3)
    # Moving back: the child keeps no inventory (no interim step) but its consumer leaves it.
    back = {
        "inventories": {
            root: {"resource_provider_generation": 5,
                   "inventories": {"DISK_GB": {"total": 100}, "VCPU": {"total": 8}}},
            child: {"resource_provider_generation": 3, "inventories": {}},
        },
        "allocations": {
            consumer: {"allocations": {}, "project_id": "p", "user_id": "u", "consumer_generation": 2},
            str(uuid.uuid4()): {"allocations": {root: {"resources": {"VCPU": 2, "DISK_GB": 10}}},
                                "project_id": "p", "user_id": "u", "consumer_generation": None},
        },
    }
    assert client.post("/reshaper", json=back).status_code == 204
    assert (_generation(client, root), _generation(client, child)) == (8, 5)
    assert client.get(f"/resource_providers/{child}/inventories").json()["inventories"] == {}
    # Inventories alone: the interim and the final step.
    alone = {"inventories": {root: {"resource_provider_generation": 8,
                                    "inventories": {"DISK_GB": {"total": 200}, "VCPU": {"total": 8}}}},
             "allocations": {}}
    assert client.post("/reshaper", json=alone).status_code == 204
    assert _generation(client, root) == 10


def test_unknown_provider_and_stale_generation_as_upstream_words_them(placement) -> None:
    client, root, child, consumer = _setup(placement)
    missing = "39bafc00-3fff-444d-b87a-2ead3f866e05"
    body = _reshape_body(root, child, consumer)
    body["inventories"][missing] = {"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 1}}}
    assert _detail(client.post("/reshaper", json=body)) == (
        400, "placement.resource_provider.not_found",
        f"Resource provider {missing} in inventories not found: No resource provider with uuid {missing} found",
    )
    stale = client.post("/reshaper", json=_reshape_body(root, child, consumer, root_generation=1))
    assert _detail(stale) == (
        409, "placement.concurrent_update",
        f"resource provider generation conflict for provider {root}: actual: 2, given: 1",
    )
    # Providers are checked in the body's order: the first problem is the one reported.
    first_missing = {"inventories": {missing: body["inventories"][missing],
                                     root: {"resource_provider_generation": 1, "inventories": {}}},
                     "allocations": {}}
    assert _detail(client.post("/reshaper", json=first_missing))[0] == 400
    first_stale = {"inventories": {root: {"resource_provider_generation": 1, "inventories": {}},
                                   missing: body["inventories"][missing]},
                   "allocations": {}}
    assert _detail(client.post("/reshaper", json=first_stale))[0] == 409
    assert _generation(client, root) == 2


def test_checks_come_in_upstreams_order(placement) -> None:
    """Consumer generations, then missing providers, then capacity; Corral's own rule comes last."""
    client, root, child, consumer = _setup(placement)
    new = str(uuid.uuid4())

    def body(vcpu_total: int, allocations: dict) -> dict:
        return {"inventories": {root: {"resource_provider_generation": 2,
                                       "inventories": {"VCPU": {"total": vcpu_total}, "DISK_GB": {"total": 100}}}},
                "allocations": allocations}

    def alloc(consumer_uuid: str, generation, resources: dict, provider: str | None = None) -> dict:
        return {consumer_uuid: {"allocations": {provider or root: {"resources": resources}},
                                "project_id": "p", "user_id": "u", "consumer_generation": generation}}

    # Shrinking VCPU below what is used, together with a claim that does not fit:
    # upstream's capacity conflict is what is reported, not Corral's below-usage rule.
    too_much = client.post("/reshaper", json=body(1, alloc(new, None, {"VCPU": 1})))
    assert _detail(too_much) == (
        409, "placement.undefined_code",
        f"Unable to allocate inventory: Unable to create allocation for 'VCPU' on resource provider '{root}'. "
        "The requested amount would exceed the capacity.",
    )
    # A stale consumer generation comes before the capacity conflict...
    stale = client.post("/reshaper", json=body(1, {**alloc(new, None, {"VCPU": 50}), **alloc(consumer, 9, {"VCPU": 1})}))
    assert _detail(stale) == (409, "placement.concurrent_update", "consumer generation conflict - expected 1 but got 9")
    # ... and before a provider of the allocations that does not exist, and an unknown class.
    missing = "39bafc00-3fff-444d-b87a-2ead3f866e05"
    both = body(8, {**alloc(new, None, {"VCPU": 1}, missing), **alloc(consumer, 9, {"VCPU": 1})})
    assert _detail(client.post("/reshaper", json=both))[2] == "consumer generation conflict - expected 1 but got 9"
    unknown_class = body(8, alloc(new, 7, {"VCPU": 1}))
    unknown_class["inventories"][root]["inventories"]["CUSTOM_NOPE"] = {"total": 1}
    assert _detail(client.post("/reshaper", json=unknown_class))[2] == "consumer generation conflict - expected null but got 7"
    unknown_class["allocations"] = {}
    assert _detail(client.post("/reshaper", json=unknown_class)) == (
        400, "placement.undefined_code", "malformed reshaper data: No such resource class CUSTOM_NOPE.")
    assert _detail(client.post("/reshaper", json=body(8, alloc(new, None, {"VCPU": 1}, missing)))) == (
        400, "placement.undefined_code", f"Allocation for resource provider '{missing}' that does not exist.")
    # Removing a class still in use: upstream's in-use conflict, with its prefix.
    gone = {"inventories": {root: {"resource_provider_generation": 2, "inventories": {"VCPU": {"total": 1}}}},
            "allocations": {}}
    assert _detail(client.post("/reshaper", json=gone)) == (
        409, "placement.inventory.inuse",
        f"update conflict: Inventory for 'DISK_GB' on resource provider '{root}' in use.")
    # Only a reshape upstream accepts meets Corral's refusal of capacity below usage.
    below = client.post("/reshaper", json=body(1, {}))
    assert below.status_code == 409 and _detail(below)[1] == "placement.inventory.inuse"
    assert "below the 2 already allocated" in _detail(below)[2]
    assert _generation(client, root) == 2
    assert client.get(f"/allocations/{consumer}").json()["consumer_generation"] == 1
    assert client.get(f"/allocations/{new}").json()["allocations"] == {}
