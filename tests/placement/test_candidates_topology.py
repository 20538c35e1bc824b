"""The in-memory topology behind GET /allocation_candidates follows every write.

Each API process keeps providers, inventories, traits and aggregates in
memory and reads them again when a topology write has happened; usage is
read for every search.  Every kind of write, made through this process or
another one, must show in the very next answer.
"""

from __future__ import annotations

import uuid as uuidlib

import pytest

from corral.core.server import ThreadedServer
from corral.placement.api.app import build_state, make_app
from tests.support.http import ApiClient

VERSION = "1.39"


def candidates(client: ApiClient, qs: str) -> dict:
    response = client.get("/allocation_candidates?" + qs)
    assert response.status_code == 200, response.text
    return response.json()


def providers_offered(body: dict) -> set[str]:
    return {uuid for request in body["allocation_requests"] for uuid in request["allocations"]}


def new_provider(client: ApiClient, name: str, parent: str | None = None) -> str:
    uuid = str(uuidlib.uuid5(uuidlib.NAMESPACE_DNS, name))
    body = {"name": name, "uuid": uuid}
    if parent:
        body["parent_provider_uuid"] = parent
    assert client.post("/resource_providers", json=body).status_code == 200
    return uuid


def generation(client: ApiClient, uuid: str) -> int:
    return client.get(f"/resource_providers/{uuid}").json()["generation"]


def set_inventory(client: ApiClient, uuid: str, **totals: int) -> None:
    body = {
        "resource_provider_generation": generation(client, uuid),
        "inventories": {rc: {"total": total} for rc, total in totals.items()},
    }
    assert client.put(f"/resource_providers/{uuid}/inventories", json=body).status_code == 200


@pytest.fixture
def client(placement) -> ApiClient:
    return placement.client(VERSION)


def test_usage_is_fresh_while_the_snapshot_is_reused(placement, client) -> None:
    cn = new_provider(client, "cn1")
    set_inventory(client, cn, VCPU=4)
    assert providers_offered(candidates(client, "resources=VCPU:3")) == {cn}
    loads = placement.state.topology.loads
    consumer = str(uuidlib.uuid4())
    claim = {
        "allocations": {cn: {"resources": {"VCPU": 2}}},
        "project_id": "p", "user_id": "u", "consumer_generation": None, "consumer_type": "INSTANCE",
    }
    assert client.put(f"/allocations/{consumer}", json=claim).status_code == 204
    body = candidates(client, "resources=VCPU:2")
    assert body["provider_summaries"][cn]["resources"]["VCPU"] == {"capacity": 4, "used": 2}
    assert candidates(client, "resources=VCPU:3")["allocation_requests"] == []
    # Allocations are not topology changes: the snapshot was not read again.
    assert placement.state.topology.loads == loads
    assert client.delete(f"/allocations/{consumer}").status_code == 204
    body = candidates(client, "resources=VCPU:3")
    assert providers_offered(body) == {cn}
    assert body["provider_summaries"][cn]["resources"]["VCPU"] == {"capacity": 4, "used": 0}


def test_inventory_changes_show_at_once(placement, client) -> None:
    cn = new_provider(client, "cn1")
    set_inventory(client, cn, VCPU=4)
    assert providers_offered(candidates(client, "resources=VCPU:3")) == {cn}
    set_inventory(client, cn, VCPU=2)
    assert candidates(client, "resources=VCPU:3")["allocation_requests"] == []
    put_one = client.put(
        f"/resource_providers/{cn}/inventories/VCPU",
        json={"total": 8, "resource_provider_generation": generation(client, cn)},
    )
    assert put_one.status_code == 200
    assert providers_offered(candidates(client, "resources=VCPU:7")) == {cn}
    assert client.delete(f"/resource_providers/{cn}/inventories/VCPU").status_code == 204
    assert candidates(client, "resources=VCPU:1")["allocation_requests"] == []


def test_providers_created_moved_and_deleted_show_at_once(placement, client) -> None:
    cn1 = new_provider(client, "cn1")
    cn2 = new_provider(client, "cn2")
    set_inventory(client, cn1, VCPU=4)
    numa = new_provider(client, "numa", parent=cn1)
    set_inventory(client, numa, MEMORY_MB=1024)
    body = candidates(client, "resources=VCPU:1,MEMORY_MB:512")
    assert providers_offered(body) == {cn1, numa}
    assert body["provider_summaries"][numa]["root_provider_uuid"] == cn1
    # Moved under cn2 (1.37 allows re-parenting to another tree).
    moved = client.put(f"/resource_providers/{numa}", json={"name": "numa", "parent_provider_uuid": cn2})
    assert moved.status_code == 200, moved.text
    assert candidates(client, "resources=VCPU:1,MEMORY_MB:512")["allocation_requests"] == []
    set_inventory(client, cn2, VCPU=2)
    body = candidates(client, "resources=VCPU:1,MEMORY_MB:512")
    assert providers_offered(body) == {cn2, numa}
    assert body["provider_summaries"][numa]["root_provider_uuid"] == cn2
    assert client.delete(f"/resource_providers/{numa}").status_code == 204
    assert candidates(client, "resources=MEMORY_MB:1")["allocation_requests"] == []


def test_traits_and_aggregates_show_at_once(placement, client) -> None:
    cn = new_provider(client, "cn1")
    set_inventory(client, cn, VCPU=4)
    traits = {"traits": ["HW_CPU_X86_AVX2"], "resource_provider_generation": generation(client, cn)}
    assert client.put(f"/resource_providers/{cn}/traits", json=traits).status_code == 200
    body = candidates(client, "resources=VCPU:1&required=HW_CPU_X86_AVX2")
    assert providers_offered(body) == {cn}
    assert body["provider_summaries"][cn]["traits"] == ["HW_CPU_X86_AVX2"]
    assert client.delete(f"/resource_providers/{cn}/traits").status_code == 204
    assert candidates(client, "resources=VCPU:1&required=HW_CPU_X86_AVX2")["allocation_requests"] == []

    agg = str(uuidlib.uuid4())
    aggregates = {"aggregates": [agg], "resource_provider_generation": generation(client, cn)}
    assert client.put(f"/resource_providers/{cn}/aggregates", json=aggregates).status_code == 200
    assert providers_offered(candidates(client, f"resources=VCPU:1&member_of={agg}")) == {cn}
    assert candidates(client, f"resources=VCPU:1&member_of=!{agg}")["allocation_requests"] == []
    aggregates = {"aggregates": [], "resource_provider_generation": generation(client, cn)}
    assert client.put(f"/resource_providers/{cn}/aggregates", json=aggregates).status_code == 200
    assert candidates(client, f"resources=VCPU:1&member_of={agg}")["allocation_requests"] == []


def test_aggregates_set_without_a_generation_show_at_once(placement, client) -> None:
    """Before 1.19 aggregates are set without a provider generation."""
    cn = new_provider(client, "cn1")
    set_inventory(client, cn, VCPU=4)
    agg = str(uuidlib.uuid4())
    assert candidates(client, f"resources=VCPU:1&member_of={agg}")["allocation_requests"] == []
    assert placement.client("1.1").put(f"/resource_providers/{cn}/aggregates", json=[agg]).status_code == 200
    assert providers_offered(candidates(client, f"resources=VCPU:1&member_of={agg}")) == {cn}


def test_a_renamed_resource_class_shows_at_once(placement, client) -> None:
    old = placement.client("1.2")
    assert old.post("/resource_classes", json={"name": "CUSTOM_GOLD"}).status_code == 201
    cn = new_provider(client, "cn1")
    set_inventory(client, cn, CUSTOM_GOLD=2)
    assert candidates(client, "resources=CUSTOM_GOLD:1")["provider_summaries"][cn]["resources"] == {
        "CUSTOM_GOLD": {"capacity": 2, "used": 0}
    }
    assert old.put("/resource_classes/CUSTOM_GOLD", json={"name": "CUSTOM_SILVER"}).status_code == 200
    body = candidates(client, "resources=CUSTOM_SILVER:1")
    assert body["provider_summaries"][cn]["resources"] == {"CUSTOM_SILVER": {"capacity": 2, "used": 0}}
    assert body["allocation_requests"] == [
        {"allocations": {cn: {"resources": {"CUSTOM_SILVER": 1}}}, "mappings": {"": [cn]}}
    ]


def test_writes_through_another_process_show_at_once(placement, client) -> None:
    """Two applications on one database, as two API processes would be."""
    other_state = build_state(placement.conf)
    server = ThreadedServer(make_app(placement.conf, other_state)).start()
    try:
        other = ApiClient(server.url, {"X-Auth-Token": "admin", "OpenStack-API-Version": f"placement {VERSION}"})
        cn = new_provider(client, "cn1")
        set_inventory(client, cn, VCPU=4)
        assert providers_offered(candidates(other, "resources=VCPU:4")) == {cn}
        set_inventory(other, cn, VCPU=2)
        assert candidates(client, "resources=VCPU:4")["allocation_requests"] == []
        cn2 = new_provider(other, "cn2")
        set_inventory(other, cn2, VCPU=8)
        assert providers_offered(candidates(client, "resources=VCPU:4")) == {cn2}
    finally:
        server.stop()
        other_state.db.dispose()
