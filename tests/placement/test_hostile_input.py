"""Values no database can take, nesting and numbers beyond 64 bits: 4xx in Placement's body, nothing changed."""

from __future__ import annotations

import uuid

import pytest

from corral.core.http import Route
from corral.placement.api.routes import ROUTES
from tests.placement.conftest import PlacementServer

HUGE = [2**63, 2**64 - 1]
# Beyond the INTEGER columns generations live in, within 64 bits and beyond
# (upstream, measured on SQLite, answers 409 to every one).
HUGE_GENERATIONS = [2**31, 2**40, *HUGE, 2**64, 10**30]


def _error(response, status: int) -> dict:  # type: ignore[no-untyped-def]
    assert response.status_code == status, response.text
    (error,) = response.json()["errors"]
    assert error["status"] == status
    return error


def _provider(placement: PlacementServer, name: str = "rp") -> str:
    client = placement.client("1.39")
    provider = client.post("/resource_providers", json={"name": name}).json()["uuid"]
    response = client.put(f"/resource_providers/{provider}/inventories", json={
        "resource_provider_generation": 0, "inventories": {"VCPU": {"total": 8}}})
    assert response.status_code == 200, response.text
    return provider


def test_nul_in_a_body_is_400_and_nothing_is_created(placement: PlacementServer) -> None:
    client = placement.client("1.39")
    _error(client.post("/resource_providers", json={"name": "a\x00b"}), 400)
    assert client.get("/resource_providers").json()["resource_providers"] == []


@pytest.mark.parametrize("path", [
    "/resource_providers?name=%00", "/traits?name=in:A%00", "/usages?project_id=%00", "/resource_classes/CUSTOM_%00",
    "/allocation_candidates?resources=VCPU:1&member_of=%00",
])
def test_nul_in_a_path_or_query_is_400(placement: PlacementServer, path: str) -> None:
    _error(placement.client("1.39").get(path), 400)


def test_nul_in_the_token_is_400_and_stores_no_project(placement: PlacementServer) -> None:
    provider = _provider(placement)
    consumer = str(uuid.uuid4())
    client = placement.client("1.39", token="admin:proj\x00ect").with_headers(X_Roles="admin")
    body = {"allocations": {provider: {"resources": {"VCPU": 1}}}, "project_id": "p", "user_id": "u",
            "consumer_generation": None, "consumer_type": "INSTANCE"}
    _error(client.put(f"/allocations/{consumer}", json=body), 400)
    assert placement.client("1.39").get(f"/allocations/{consumer}").json()["allocations"] == {}


def _write_routes() -> list[tuple[str, str]]:
    found = []
    for route in ROUTES:
        assert isinstance(route, Route)
        for method in route.methods:
            if method in ("POST", "PUT", "PATCH"):
                found.append((method, route.path))
    return found


@pytest.mark.parametrize("depth", [129, 5000])
def test_deeply_nested_json_is_400_on_every_write(placement: PlacementServer, depth: int) -> None:
    provider = _provider(placement)
    client = placement.client("1.39").with_headers(X_Roles="admin,service")
    writes = _write_routes()
    assert len(writes) >= 10
    for method, template in writes:
        path = template.replace("{uuid}", provider).replace("{consumer_uuid}", str(uuid.uuid4()))
        path = path.replace("{resource_class}", "VCPU").replace("{name}", "CUSTOM_DEEP")
        response = client.request(method, path, data=b"[" * depth + b"]" * depth,
                                  headers={"content-type": "application/json"})
        _error(response, 400)
    assert len(client.get("/resource_providers").json()["resource_providers"]) == 1


def test_malformed_json_nested_past_the_standard_library_is_400(placement: PlacementServer) -> None:
    # Valid nesting for orjson (under 1024 levels) that the json module cannot follow.
    response = placement.client("1.39").post("/resource_providers", data=b"[" * 1010 + b"}",
                                             headers={"content-type": "application/json"})
    _error(response, 400)


@pytest.mark.parametrize("amount", [*HUGE, 2**64, 10**30])
def test_huge_amounts_in_queries_find_nothing(placement: PlacementServer, amount: int) -> None:
    _provider(placement)
    client = placement.client("1.39")
    listed = client.get(f"/resource_providers?resources=VCPU:{amount}")
    assert listed.status_code == 200, listed.text
    assert listed.json()["resource_providers"] == []
    candidates = client.get(f"/allocation_candidates?resources=VCPU:{amount}")
    assert candidates.status_code == 200, candidates.text
    assert candidates.json()["allocation_requests"] == []


@pytest.mark.parametrize("limit", [2**63, 2**64, 10**30])
def test_huge_candidate_limits_are_no_limit(placement: PlacementServer, limit: int) -> None:
    _provider(placement)
    response = placement.client("1.39").get(f"/allocation_candidates?resources=VCPU:1&limit={limit}")
    assert response.status_code == 200, response.text
    assert len(response.json()["allocation_requests"]) == 1


def test_huge_generations_are_stale_generations(placement: PlacementServer) -> None:
    """Upstream compares them and finds no match: 409, as for any stale generation."""
    provider = _provider(placement)
    client = placement.client("1.39")
    service = client.with_headers(X_Roles="admin,service")
    for generation in HUGE_GENERATIONS:
        inventory = {"resource_provider_generation": generation, "inventories": {"VCPU": {"total": 2}}}
        _error(client.put(f"/resource_providers/{provider}/inventories", json=inventory), 409)
        one = {"resource_provider_generation": generation, "total": 2}
        _error(client.put(f"/resource_providers/{provider}/inventories/VCPU", json=one), 409)
        traits = {"resource_provider_generation": generation, "traits": ["HW_CPU_X86_AVX"]}
        _error(client.put(f"/resource_providers/{provider}/traits", json=traits), 409)
        aggregates = {"resource_provider_generation": generation, "aggregates": [str(uuid.uuid4())]}
        _error(client.put(f"/resource_providers/{provider}/aggregates", json=aggregates), 409)
        reshape = {"inventories": {provider: inventory}, "allocations": {}}
        _error(service.post("/reshaper", json=reshape), 409)
    shown = client.get(f"/resource_providers/{provider}/inventories").json()
    assert shown["inventories"]["VCPU"]["total"] == 8 and shown["resource_provider_generation"] == 1


def test_huge_consumer_generations_are_stale(placement: PlacementServer) -> None:
    provider = _provider(placement)
    consumer = str(uuid.uuid4())
    client = placement.client("1.39")
    body = {"allocations": {provider: {"resources": {"VCPU": 1}}}, "project_id": "p", "user_id": "u",
            "consumer_generation": None, "consumer_type": "INSTANCE"}
    assert client.put(f"/allocations/{consumer}", json=body).status_code == 204
    for generation in HUGE_GENERATIONS:
        _error(client.put(f"/allocations/{consumer}", json={**body, "consumer_generation": generation}), 409)
        _error(client.post("/allocations", json={consumer: {**body, "consumer_generation": generation}}), 409)


@pytest.mark.parametrize("total", [*HUGE, 1e308])
def test_huge_inventory_values_are_400(placement: PlacementServer, total: float) -> None:
    provider = _provider(placement)
    client = placement.client("1.39")
    inventory = {"resource_provider_generation": 1, "inventories": {"VCPU": {"total": total}}}
    _error(client.put(f"/resource_providers/{provider}/inventories", json=inventory), 400)
    assert client.get(f"/resource_providers/{provider}/inventories").json()["inventories"]["VCPU"]["total"] == 8


def test_huge_allocation_amounts_exceed_capacity(placement: PlacementServer) -> None:
    """Upstream finds no room for them: 409, and nothing is allocated."""
    provider = _provider(placement)
    client = placement.client("1.39")
    for amount in (2**31, 2**40, *HUGE, 2**64, 10**30, 1e308):
        consumer = str(uuid.uuid4())
        body = {"allocations": {provider: {"resources": {"VCPU": amount}}}, "project_id": "p", "user_id": "u",
                "consumer_generation": None, "consumer_type": "INSTANCE"}
        _error(client.put(f"/allocations/{consumer}", json=body), 409)
        _error(client.post("/allocations", json={consumer: body}), 409)
    assert client.get(f"/resource_providers/{provider}/usages").json()["usages"] == {"VCPU": 0}
