"""Bare Metal fuzzed over its whole route table: no request gets a 500."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from corral.baremetal.api.routes import ROUTES
from corral.baremetal.microversions import LEGACY_HEADER, MAX_VERSION
from tests.baremetal.conftest import BaremetalServer
from tests.support import fuzz as fuzzing
from tests.support.fuzz import Target, fuzz, names_in

pytestmark = [pytest.mark.slow, pytest.mark.timeout(fuzzing.timeout())]

VERSIONS = ["1.1", "1.5", "1.22", "1.37", "1.43", "1.50", "1.52", MAX_VERSION, "latest"]
# Query parameters read by name in the handlers.
QUERY_NAMES = [
    "limit", "marker", "sort_key", "sort_dir", "fields", "detail", "associated", "maintenance", "provision_state",
    "driver", "resource_class", "conductor_group", "fault", "owner", "lessee", "conductor", "description_contains",
    "state", "node", "type", "min_priority", "reset_interfaces", "node_uuid", "instance_uuid", "chassis_uuid",
]


def check_error(status: int, body: Any) -> None:
    if status == 202:
        return
    inner = json.loads(body["error_message"])
    assert inner.get("faultstring") is not None or inner.get("description") is not None, body


def _seed(baremetal: BaremetalServer) -> dict[str, list[str]]:
    client = baremetal.client()
    nodes = []
    tag = uuid.uuid4().hex[:8]
    for name in (f"fuzz-{tag}-1", f"fuzz-{tag}-2"):
        response = client.post("/v1/nodes", json={
            "driver": "fake-hardware", "name": name, "resource_class": "fuzz",
            "properties": {"memory_mb": 1024}, "extra": {"a": 1},
        })
        assert response.status_code == 201, response.text
        nodes.append(response.json())
    assert client.put(f"/v1/nodes/{nodes[0]['uuid']}/traits/CUSTOM_FUZZ").status_code == 204
    allocation = client.post("/v1/allocations", json={"resource_class": "fuzz", "name": f"fuzz-{tag}"})
    assert allocation.status_code == 201, allocation.text
    rule = client.post("/v1/inspection_rules", json={
        "actions": [{"op": "add-trait", "args": ["CUSTOM_FUZZ"]}],
        "conditions": [{"op": "eq", "args": ["{node.name}", "x"]}]})
    assert rule.status_code == 201, rule.text
    return {
        "rule_uuid": [rule.json()["uuid"]],
        "node_ident": [node["uuid"] for node in nodes] + [nodes[0]["name"]],
        "allocation_ident": [allocation.json()["uuid"], f"fuzz-{tag}"],
        "trait": ["CUSTOM_FUZZ", "HW_CPU_X86_AVX"],
        "driver_name": ["fake-hardware", "redfish", "ipmi"],
        "hostname": ["test-conductor"],
        "vif_id": [str(uuid.uuid4())],
        "setting_name": ["fuzz"],
    }


def _examples(ids: dict[str, list[str]]) -> dict[tuple[str, str], list[Any]]:
    node = ids["node_ident"][0]
    return {
        ("POST", "/v1/nodes"): [{
            "driver": "fake-hardware", "name": "fuzz-new", "resource_class": "fuzz", "uuid": str(uuid.uuid4()),
            "properties": {"memory_mb": 1024, "cpus": 2}, "driver_info": {"redfish_address": "http://x"},
            "extra": {"k": "v"}, "owner": "project-a", "description": "d", "automated_clean": True,
        }],
        ("PATCH", "/v1/nodes/{node_ident}"): [
            [{"op": "replace", "path": "/extra/k", "value": "v"}, {"op": "add", "path": "/properties/cpus",
                                                                 "value": 4}],
            [{"op": "replace", "path": "/name", "value": "renamed"}, {"op": "remove", "path": "/owner"}],
        ],
        ("PUT", "/v1/nodes/{node_ident}/states/provision"): [
            {"target": "manage"}, {"target": "clean", "clean_steps": [{"interface": "deploy", "step": "erase_devices",
                                                                     "args": {"n": 1}}]},
            {"target": "active", "configdrive": {"meta_data": {"k": "v"}}},
        ],
        ("PUT", "/v1/nodes/{node_ident}/states/power"): [{"target": "power on", "timeout": 10}],
        ("PUT", "/v1/nodes/{node_ident}/states/console"): [{"enabled": False}],
        ("PUT", "/v1/nodes/{node_ident}/states/raid"): [
            {"logical_disks": [{"size_gb": 10, "raid_level": "1", "is_root_volume": True}]}],
        ("PUT", "/v1/nodes/{node_ident}/maintenance"): [{"reason": "fuzzing"}],
        ("PUT", "/v1/nodes/{node_ident}/traits"): [{"traits": ["CUSTOM_FUZZ", "HW_CPU_X86_AVX"]}],
        ("POST", "/v1/nodes/{node_ident}/vifs"): [{"id": str(uuid.uuid4())}],
        ("PUT", "/v1/nodes/{node_ident}/management/boot_device"): [{"boot_device": "pxe", "persistent": False}],
        ("PUT", "/v1/nodes/{node_ident}/management/inject_nmi"): [{}],
        ("POST", "/v1/inspection_rules"): [{
            "description": "fuzz", "priority": 10, "phase": "main", "sensitive": False,
            "conditions": [{"op": "in-net", "args": {"address": "{inventory[bmc_address]}", "subnet": "10.0.0.0/8"},
                            "loop": ["a"], "multiple": "all"}],
            "actions": [{"op": "set-attribute", "args": ["/extra/k", "v"]}],
        }],
        ("POST", "/v1/allocations"): [{
            "resource_class": "fuzz", "name": "fuzz-new", "traits": ["CUSTOM_FUZZ"], "candidate_nodes": [node],
            "extra": {"k": 1}, "uuid": str(uuid.uuid4()),
        }],
    }


def _queries(ids: dict[str, list[str]]) -> dict[str, list[list[tuple[str, str]]]]:
    node = ids["node_ident"][0]
    paging = [("limit", "1"), ("sort_key", "name"), ("sort_dir", "desc"), ("marker", node)]
    return {
        "/v1/nodes": [paging, [("fields", "uuid,name,extra"), ("maintenance", "false")],
                      [("resource_class", "fuzz"), ("provision_state", "enroll"), ("detail", "true")],
                      [("owner", "project-a"), ("associated", "false"), ("driver", "fake-hardware")]],
        "/v1/nodes/detail": [paging, [("conductor_group", ""), ("fault", "power failure")]],
        "/v1/allocations": [[("limit", "1"), ("state", "allocating"), ("resource_class", "fuzz"),
                             ("node", node), ("fields", "uuid,name")]],
        "/v1/drivers": [[("type", "dynamic"), ("detail", "true")]],
        "/v1/nodes/{node_ident}/cleaning/steps": [[("min_priority", "10")]],
        "/v1/nodes/validate": [[("node", node)]],
    }


def test_no_request_gets_a_500(baremetal: BaremetalServer, request: pytest.FixtureRequest, backend: str) -> None:
    ids = _seed(baremetal)
    target = Target(
        name="baremetal",
        base_url=baremetal.url,
        routes=ROUTES,
        versions=[{LEGACY_HEADER: version} for version in VERSIONS] + [{}],
        version_header=LEGACY_HEADER,
        check_error=check_error,
        identifiers=ids,
        examples=_examples(ids),
        queries=_queries(ids),
        keys=names_in("corral.baremetal.api") + QUERY_NAMES,
        tokens=["admin"] * 6 + ["alice:project-a", "bob"],
        reseed=lambda: _seed(baremetal),
    )
    fuzz(target, request, backend)
