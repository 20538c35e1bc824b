"""Compute fuzzed over its whole route table: no request gets a 500."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from corral.compute.api.routes import all_routes
from corral.compute.microversions import VERSIONS as SUPPORTED
from tests.compute.conftest import IMAGE, ComputeServer
from tests.support import fuzz as fuzzing
from tests.support.fuzz import Target, fuzz, names_in

pytestmark = [pytest.mark.slow, pytest.mark.timeout(fuzzing.timeout())]

VERSIONS = ["2.1", "2.10", "2.28", "2.37", "2.47", "2.53", "2.64", "2.69", SUPPORTED[-1], "latest"]
# Query parameters read by name in the handlers.
QUERY_NAMES = [
    "limit", "marker", "sort_key", "sort_dir", "minRam", "minDisk", "is_public", "changes-since", "changes-before",
    "all_tenants", "deleted", "name", "flavor", "image", "status", "host", "binary", "tenant_id", "user_id",
    "project_id", "ip", "reservation_id", "availability_zone", "locked", "offset", "all_projects",
    "hypervisor_hostname_pattern", "with_servers", "start", "end", "detailed",
]


def check_error(status: int, body: Any) -> None:
    (fault,) = body.values()
    assert fault["code"] == status and isinstance(fault["message"], str), body


def _seed(cloud: ComputeServer) -> dict[str, list[str]]:
    admin = cloud.client("2.73")
    tag = uuid.uuid4().hex[:8]
    flavor = {"name": f"fuzz-{tag}", "ram": 256, "vcpus": 1, "disk": 1, "id": f"fuzz-{tag}"}
    assert admin.post("/v2.1/flavors", json={"flavor": flavor}).status_code == 200
    assert admin.post(f"/v2.1/flavors/{flavor['id']}/os-extra_specs",
                      json={"extra_specs": {"hw:cpu_policy": "shared"}}).status_code == 200
    # Requests change the project's quota now and then; seeding must not depend on it.
    unlimited = {"quota_set": {"instances": -1, "cores": -1, "ram": -1, "force": True}}
    assert admin.put("/v2.1/os-quota-sets/project-a", json=unlimited).status_code == 200
    unlimited = {"quota_set": {"key_pairs": -1, "server_groups": -1, "force": True}}
    assert admin.put("/v2.1/os-quota-sets/admin", json=unlimited).status_code == 200
    server = cloud.boot(token="admin:project-a", name=f"fuzz-{tag}", flavorRef=flavor["id"])
    cloud.run_computes()
    aggregate = admin.post("/v2.1/os-aggregates", json={"aggregate": {"name": f"fuzz-{tag}"}})
    assert aggregate.status_code == 200, aggregate.text
    services = admin.get("/v2.1/os-services").json()["services"]
    old_services = cloud.client("2.1").get("/v2.1/os-services").json()["services"]
    keypair = admin.post("/v2.1/os-keypairs", json={"keypair": {"name": f"fuzz-{tag}"}})
    assert keypair.status_code == 201, keypair.text
    group = admin.post("/v2.1/os-server-groups", json={"server_group": {"name": f"fuzz-{tag}", "policy": "affinity"}})
    assert group.status_code == 200, group.text
    hypervisors = admin.get("/v2.1/os-hypervisors").json()["hypervisors"]
    old_hypervisors = cloud.client("2.1").get("/v2.1/os-hypervisors").json()["hypervisors"]
    return {
        "keypair_name": [f"fuzz-{tag}"],
        "group_id": [group.json()["server_group"]["id"]],
        "hypervisor_id": [str(h["id"]) for h in hypervisors + old_hypervisors] + ["host"],
        "flavor_id": [flavor["id"], "1"],
        "server_id": [server],
        "key": ["hw:cpu_policy"],
        "service_id": [str(s["id"]) for s in services + old_services],
        "project_id": ["project-a", "admin"],
        "url_project_id": ["project-a"],
        "aggregate_id": [str(aggregate.json()["aggregate"]["id"])],
    }


def _examples(ids: dict[str, list[str]]) -> dict[tuple[str, str], list[Any]]:
    flavor = {
        "name": "fuzz-new", "ram": 512, "vcpus": 1, "disk": 1, "id": "fuzz-new", "swap": 0,
        "OS-FLV-EXT-DATA:ephemeral": 0, "rxtx_factor": 1.0, "os-flavor-access:is_public": True, "description": "d",
    }
    server = {
        "name": "vm", "flavorRef": "1", "imageRef": IMAGE, "networks": "none", "metadata": {"k": "v"},
        "availability_zone": "nova", "min_count": 1, "max_count": 1,
    }
    examples: dict[tuple[str, str], list[Any]] = {
        ("POST", "/flavors"): [{"flavor": flavor}],
        ("PUT", "/flavors/{flavor_id}"): [{"flavor": {"description": "new"}}],
        ("POST", "/flavors/{flavor_id}/os-extra_specs"): [{"extra_specs": {"hw:cpu_policy": "dedicated"}}],
        ("PUT", "/flavors/{flavor_id}/os-extra_specs/{key}"): [{"hw:cpu_policy": "dedicated"}],
        ("POST", "/servers"): [{"server": server}, {
            "server": {**server, "key_name": "k", "user_data": "aGk=", "config_drive": True},
            "os:scheduler_hints": {"group": ids["group_id"][0], "same_host": [], "different_host": ids["server_id"]},
        }],
        ("POST", "/os-keypairs"): [
            {"keypair": {"name": "fuzz-key", "type": "ssh", "user_id": "u"}},
            {"keypair": {"name": "fuzz-imported", "public_key": "ssh-ed25519 "
                         "AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl x"}}],
        ("POST", "/os-server-groups"): [
            {"server_group": {"name": "g", "policy": "anti-affinity", "rules": {"max_server_per_host": 2}}},
            {"server_group": {"name": "g", "policies": ["soft-affinity"]}}],
        ("POST", "/servers/{server_id}/action"): [
            {"reboot": {"type": "SOFT"}}, {"os-stop": None}, {"os-start": None}, {"restore": None},
            {"forceDelete": None}],
        ("PUT", "/os-services/{service_id}"): [
            {"status": "disabled", "disabled_reason": "fuzz"}, {"forced_down": True}],
        ("PUT", "/os-quota-sets/{project_id}"): [
            {"quota_set": {"instances": 10, "cores": 20, "ram": 51200, "key_pairs": 5, "force": True}}],
        ("POST", "/os-aggregates"): [{"aggregate": {"name": "agg", "availability_zone": "az"}}],
        ("PUT", "/os-aggregates/{aggregate_id}"): [{"aggregate": {"name": "agg2", "availability_zone": "az2"}}],
        ("POST", "/os-aggregates/{aggregate_id}/action"): [
            {"add_host": {"host": "host-cell1"}}, {"remove_host": {"host": "host-cell1"}},
            {"set_metadata": {"metadata": {"k": "v", "gone": None}}}],
    }
    mounted = {}
    for (method, path), bodies in examples.items():
        mounted[(method, "/v2.1" + path)] = bodies
        mounted[(method, "/v2.1/{url_project_id}" + path)] = bodies
    return mounted


def _queries(ids: dict[str, list[str]]) -> dict[str, list[list[tuple[str, str]]]]:
    server = ids["server_id"][0]
    servers = [
        [("name", "vm"), ("limit", "1"), ("marker", server)],
        [("changes-since", "2020-01-01T00:00:00Z"), ("changes-before", "2030-01-01T00:00:00+01:00")],
        [("flavor", "1"), ("image", IMAGE), ("status", "ACTIVE"), ("host", "host-cell1")],
        [("all_tenants", "1"), ("project_id", "project-a"), ("sort_key", "display_name"), ("sort_dir", "asc")],
        [("deleted", "true"), ("changes-since", "2020-01-01T00:00:00")],
        [("ip", "10.0.0.1"), ("reservation_id", "r-1"), ("availability_zone", "nova"), ("locked", "false")],
    ]
    flavors = [[("minRam", "512"), ("minDisk", "1"), ("limit", "1"), ("marker", "1"), ("is_public", "None"),
                ("sort_key", "flavorid"), ("sort_dir", "asc")]]
    queries = {
        "/servers": servers, "/servers/detail": servers, "/flavors": flavors, "/flavors/detail": flavors,
        "/os-services": [[("host", "host-cell1"), ("binary", "nova-compute")]],
        "/limits": [[("tenant_id", "project-a")]],
        "/os-keypairs": [[("user_id", "admin"), ("limit", "1"), ("marker", "a")]],
        "/os-server-groups": [[("all_projects", "1"), ("limit", "1"), ("offset", "1")]],
        "/os-hypervisors": [[("limit", "1"), ("marker", "1")], [("hypervisor_hostname_pattern", "host"),
                                                                ("with_servers", "true")]],
        "/os-hypervisors/detail": [[("limit", "1"), ("with_servers", "1")]],
        "/os-simple-tenant-usage": [[("start", "2020-01-01T00:00:00"), ("end", "2030-01-01 00:00:00.5"),
                                     ("detailed", "1"), ("limit", "1"), ("marker", "m")]],
        "/os-simple-tenant-usage/{project_id}": [[("start", "2020-01-01T00:00:00.000001"), ("limit", "2")]],
        "/os-quota-sets/{project_id}": [[("user_id", "u")]],
        "/os-quota-sets/{project_id}/detail": [[("user_id", "u")]],
    }
    mounted = {}
    for path, value in queries.items():
        mounted["/v2.1" + path] = value
        mounted["/v2.1/{url_project_id}" + path] = value
    return mounted


def test_no_request_gets_a_500(cloud: ComputeServer, request: pytest.FixtureRequest, backend: str) -> None:
    ids = _seed(cloud)
    target = Target(
        name="compute",
        base_url=cloud.url,
        routes=all_routes(),
        versions=[{"OpenStack-API-Version": f"compute {version}"} for version in VERSIONS] + [{}],
        check_error=check_error,
        identifiers=ids,
        examples=_examples(ids),
        queries=_queries(ids),
        keys=names_in("corral.compute.api") + QUERY_NAMES,
        tokens=["admin"] * 6 + ["alice:project-a", "bob"],
        reseed=lambda: _seed(cloud),
        # Upstream's fake driver cannot tell a host's uptime: 501, as upstream answers.
        allowed_5xx={template: {501} for template in ("/v2.1/os-hypervisors/{hypervisor_id}/uptime",
                                                      "/v2.1/{url_project_id}/os-hypervisors/{hypervisor_id}/uptime")},
    )
    fuzz(target, request, backend)
