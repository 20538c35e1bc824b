"""Values no database can take, nesting and numbers beyond 64 bits: 4xx in Ironic's body, nothing changed."""

from __future__ import annotations

import json

import pytest

from corral.baremetal.api.routes import ROUTES
from corral.core.edge import MAX_JSON_DEPTH
from tests.baremetal.conftest import BaremetalServer


def _fault(response, status: int) -> str:  # type: ignore[no-untyped-def]
    assert response.status_code == status, response.text
    inner = json.loads(response.json()["error_message"])
    assert inner["faultcode"] == "Client"
    return str(inner["faultstring"])


def _node(baremetal: BaremetalServer, name: str = "node-1") -> str:
    response = baremetal.client().post("/v1/nodes", json={"driver": "fake-hardware", "name": name})
    assert response.status_code == 201, response.text
    return str(response.json()["uuid"])


def _nested(depth: int) -> object:
    document: object = "bottom"
    for _ in range(depth):
        document = {"d": document}
    return document


def test_nul_in_a_node_is_400_and_nothing_is_created(baremetal: BaremetalServer) -> None:
    client = baremetal.client()
    for body in ({"driver": "fake-hardware", "extra": {"k": "a\x00b"}},
                 {"driver": "fake-hardware", "properties": {"a\x00": 1}},
                 {"driver": "fake-\x00hardware"}):
        assert "NUL" in _fault(client.post("/v1/nodes", json=body), 400)
    assert client.get("/v1/nodes").json()["nodes"] == []


def test_nul_in_a_patch_is_400_and_changes_nothing(baremetal: BaremetalServer) -> None:
    node = _node(baremetal)
    client = baremetal.client()
    patch = [{"op": "add", "path": "/extra/k", "value": "\x00"}]
    _fault(client.patch(f"/v1/nodes/{node}", json=patch), 400)
    assert client.get(f"/v1/nodes/{node}").json()["extra"] == {}


@pytest.mark.parametrize("path", ["/v1/nodes/a%00b", "/v1/nodes?resource_class=%00", "/v1/nodes?owner=x%00",
                                  "/v1/allocations?resource_class=%00", "/v1/nodes/%00/traits"])
def test_nul_in_a_path_or_query_is_400(baremetal: BaremetalServer, path: str) -> None:
    _fault(baremetal.client().get(path), 400)


def test_nul_in_the_token_is_400(baremetal: BaremetalServer) -> None:
    client = baremetal.client(token="alice:pro\x00ject")
    _fault(client.post("/v1/nodes", json={"driver": "fake-hardware"}), 400)
    assert baremetal.client().get("/v1/nodes").json()["nodes"] == []


def _writes() -> list[tuple[str, str]]:
    return [(method, route.path) for route in ROUTES for method in route.methods if method in ("POST", "PUT", "PATCH")]


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 5000])
def test_deeply_nested_json_is_400_on_every_write(baremetal: BaremetalServer, depth: int) -> None:
    node = _node(baremetal)
    client = baremetal.client()
    writes = _writes()
    assert len(writes) >= 10
    for method, template in writes:
        path = template.replace("{node_ident}", node).replace("{trait}", "CUSTOM_DEEP")
        response = client.request(method, path, data=b"[" * depth + b"]" * depth,
                                  headers={"content-type": "application/json"})
        _fault(response, 400)
    nodes = client.get("/v1/nodes/detail").json()["nodes"]
    assert [(n["uuid"], n["extra"], n["provision_state"]) for n in nodes] == [(node, {}, "enroll")]


def test_documents_nested_up_to_the_limit_are_stored_and_returned(baremetal: BaremetalServer) -> None:
    client = baremetal.client()
    # The body wraps the document two levels deep ({"extra": {"deep": ...}}).
    deep = _nested(MAX_JSON_DEPTH - 3)
    created = client.post("/v1/nodes", json={"driver": "fake-hardware", "extra": {"deep": deep}})
    assert created.status_code == 201, created.text
    node = created.json()["uuid"]
    assert client.get(f"/v1/nodes/{node}").json()["extra"]["deep"] == deep
    listed = client.get("/v1/nodes/detail").json()["nodes"]
    assert listed[0]["extra"]["deep"] == deep


@pytest.mark.parametrize("limit", [2**63, 2**64, 10**30])
def test_huge_limits_are_the_maximum(baremetal: BaremetalServer, limit: int) -> None:
    _node(baremetal)
    client = baremetal.client()
    for path in ("/v1/nodes", "/v1/nodes/detail", "/v1/allocations"):
        response = client.get(f"{path}?limit={limit}")
        assert response.status_code == 200, response.text


@pytest.mark.parametrize("value", [2**63, 2**64 - 1, -(2**63), 1e308, -1e308])
def test_numbers_within_64_bits_are_stored_exactly(baremetal: BaremetalServer, value: float) -> None:
    client = baremetal.client()
    response = client.post("/v1/nodes", json={"driver": "fake-hardware", "properties": {"memory_mb": value}})
    assert response.status_code == 201, response.text
    node = response.json()["uuid"]
    stored = client.get(f"/v1/nodes/{node}").json()["properties"]["memory_mb"]
    assert stored == value and type(stored) is type(value)


@pytest.mark.parametrize("value", [2**64, -(2**63) - 1, 10**30])
def test_integers_beyond_64_bits_are_400_not_rounded(baremetal: BaremetalServer, value: int) -> None:
    client = baremetal.client()
    response = client.post("/v1/nodes", json={"driver": "fake-hardware", "properties": {"memory_mb": value}})
    assert "64 bits" in _fault(response, 400)
    assert client.get("/v1/nodes").json()["nodes"] == []
