"""Placement fuzzed over its whole route table: no request gets a 500."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from corral.placement.api.routes import ROUTES
from corral.placement.microversions import SPEC
from tests.placement.conftest import PlacementServer
from tests.support import fuzz as fuzzing
from tests.support.fuzz import Target, fuzz, names_in

pytestmark = [pytest.mark.slow, pytest.mark.timeout(fuzzing.timeout())]

# Query parameters read by name in the handlers (no schema lists them all).
QUERY_NAMES = [
    "limit", "group_policy", "root_required", "same_subtree", "resources1", "required1", "member_of1",
    "in_tree1", "resources_X", "required_X", "consumer_type", "project_id", "user_id", "name", "uuid",
]
VERSIONS = ["1.0", "1.10", "1.14", "1.20", "1.28", "1.33", "1.36", "1.38", "1.39", "latest"]


def check_error(status: int, body: Any) -> None:
    (error,) = body["errors"]
    assert error["status"] == status and isinstance(error["detail"], str) and error["request_id"], body


def _seed(placement: PlacementServer) -> dict[str, list[str]]:
    client = placement.client("1.39")
    tag = uuid.uuid4().hex[:8]
    root = client.post("/resource_providers", json={"name": f"fuzz-root-{tag}"}).json()["uuid"]
    child = client.post("/resource_providers", json={"name": f"fuzz-child-{tag}", "parent_provider_uuid": root})
    child = child.json()["uuid"]
    assert client.put("/resource_classes/CUSTOM_FUZZ").status_code in (201, 204)
    assert client.put("/traits/CUSTOM_FUZZ").status_code in (201, 204)
    for provider, generation in ((root, 0), (child, 0)):
        response = client.put(f"/resource_providers/{provider}/inventories", json={
            "resource_provider_generation": generation,
            "inventories": {"VCPU": {"total": 8}, "MEMORY_MB": {"total": 4096}, "CUSTOM_FUZZ": {"total": 2}},
        })
        assert response.status_code == 200, response.text
    aggregate = str(uuid.uuid4())
    consumer = str(uuid.uuid4())
    response = client.put(f"/allocations/{consumer}", json={
        "allocations": {root: {"resources": {"VCPU": 1}}}, "project_id": str(uuid.uuid4()),
        "user_id": str(uuid.uuid4()), "consumer_generation": None, "consumer_type": "INSTANCE",
    })
    assert response.status_code == 204, response.text
    return {
        "uuid": [root, child],
        "consumer_uuid": [consumer, str(uuid.uuid4())],
        "resource_class": ["VCPU", "MEMORY_MB", "CUSTOM_FUZZ", "DISK_GB"],
        "name": ["CUSTOM_FUZZ", "HW_CPU_X86_AVX", "VCPU", "CUSTOM_NEW"],
        "*": [aggregate],
    }


def _examples(ids: dict[str, list[str]]) -> dict[tuple[str, str], list[Any]]:
    root, child = ids["uuid"]
    consumer = ids["consumer_uuid"][0]
    inventory = {"total": 4, "reserved": 0, "min_unit": 1, "max_unit": 4, "step_size": 1, "allocation_ratio": 1.0}
    allocation = {
        "allocations": {root: {"resources": {"VCPU": 1}}}, "project_id": str(uuid.uuid4()),
        "user_id": str(uuid.uuid4()), "consumer_generation": 1, "consumer_type": "INSTANCE",
    }
    return {
        ("POST", "/resource_providers"): [{"name": "fuzz", "uuid": str(uuid.uuid4()), "parent_provider_uuid": root}],
        ("PUT", "/resource_providers/{uuid}"): [{"name": "renamed", "parent_provider_uuid": root}],
        ("POST", "/resource_providers/{uuid}/inventories"): [{"resource_class": "DISK_GB", **inventory}],
        ("PUT", "/resource_providers/{uuid}/inventories"): [
            {"resource_provider_generation": 1, "inventories": {"VCPU": inventory}}],
        ("PUT", "/resource_providers/{uuid}/inventories/{resource_class}"): [
            {"resource_provider_generation": 1, **inventory}],
        ("POST", "/resource_classes"): [{"name": "CUSTOM_POSTED"}],
        ("PUT", "/resource_classes/{name}"): [{"name": "CUSTOM_PUT"}],
        ("PUT", "/resource_providers/{uuid}/traits"): [
            {"resource_provider_generation": 1, "traits": ["CUSTOM_FUZZ", "HW_CPU_X86_AVX"]}],
        ("PUT", "/resource_providers/{uuid}/aggregates"): [
            {"resource_provider_generation": 1, "aggregates": [ids["*"][0]]}, [ids["*"][0]]],
        ("PUT", "/allocations/{consumer_uuid}"): [
            allocation, {"allocations": [{"resource_provider": {"uuid": root}, "resources": {"VCPU": 1}}]}],
        ("POST", "/allocations"): [{consumer: allocation}],
        ("POST", "/reshaper"): [{
            "inventories": {child: {"resource_provider_generation": 1, "inventories": {"VCPU": inventory}}},
            "allocations": {consumer: allocation},
        }],
    }


def _queries(ids: dict[str, list[str]]) -> dict[str, list[list[tuple[str, str]]]]:
    root = ids["uuid"][0]
    aggregate = ids["*"][0]
    return {
        "/resource_providers": [
            [("name", "fuzz-root")], [("uuid", root)], [("member_of", f"in:{aggregate}")], [("in_tree", root)],
            [("resources", "VCPU:1,MEMORY_MB:512")], [("required", "CUSTOM_FUZZ,!HW_CPU_X86_AVX")],
        ],
        "/allocation_candidates": [
            [("resources", "VCPU:1"), ("limit", "5")],
            [("resources1", "VCPU:1"), ("resources2", "MEMORY_MB:512"), ("group_policy", "isolate")],
            [("resources", "VCPU:1"), ("required", "in:CUSTOM_FUZZ,HW_CPU_X86_AVX"), ("member_of", aggregate)],
            [("resources", "VCPU:1"), ("in_tree", root), ("root_required", "!CUSTOM_FUZZ")],
            [("resources_A", "VCPU:1"), ("resources_B", "MEMORY_MB:1"), ("same_subtree", "_A,_B"),
             ("group_policy", "none")],
        ],
        "/usages": [[("project_id", "p"), ("user_id", "u")], [("project_id", "p"), ("consumer_type", "INSTANCE")]],
        "/traits": [[("name", "in:CUSTOM_FUZZ,VCPU")], [("name", "startswith:CUSTOM")], [("associated", "true")]],
    }


def test_no_request_gets_a_500(placement: PlacementServer, request: pytest.FixtureRequest, backend: str) -> None:
    ids = _seed(placement)
    target = Target(
        name="placement",
        base_url=placement.url,
        routes=ROUTES,
        versions=[{"OpenStack-API-Version": f"placement {version}"} for version in VERSIONS] + [{}],
        check_error=check_error,
        identifiers=ids,
        examples=_examples(ids),
        queries=_queries(ids),
        keys=names_in("corral.placement.api") + QUERY_NAMES,
        tokens=["admin"] * 6 + ["alice:project-a", "service:service"],
        reseed=lambda: _seed(placement),
    )
    assert SPEC.versions[-1] in VERSIONS
    fuzz(target, request, backend)
