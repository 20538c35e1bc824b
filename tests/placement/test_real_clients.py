"""Real OpenStack clients against Corral's Placement API.

The ``openstack`` command line (with the osc-placement plugin) runs as a
child process against the test server, exactly as an operator would use
it; openstacksdk's placement proxy runs in-process.  The clients decide
the request shapes, so these tests catch wire differences that tests
written against our own reading of the API reference cannot.

Client behaviour does not depend on the database, so these run on SQLite
only.  Each CLI call costs about a second; keep their number small.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.placement.conftest import PlacementServer

pytestmark = [
    # Client behaviour does not depend on the database.
    pytest.mark.backends("first"),
    pytest.mark.slow,
    # openstacksdk warns about its own internals (metrics support, resource
    # attribute hooks) on ordinary calls; those are not Corral's to fix.
    pytest.mark.filterwarnings(r"ignore::PendingDeprecationWarning:openstack\..*"),
]

AGGREGATE = "11111111-2222-3333-4444-555555555555"


def _client_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment without any OS_* settings of the person running the tests."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("OS_")}
    env.update(extra or {})
    return env


def osc(server: PlacementServer, *args: str, version: str | None = None, check: bool = True,
        auth: bool = True, env: dict[str, str] | None = None) -> Any:
    """Run ``openstack <args> -f json`` against ``server``; the parsed output (None when empty)."""
    command = [sys.executable, "-m", "openstackclient.shell"]
    if auth:
        command += ["--os-auth-type", "admin_token", "--os-token", "admin", "--os-endpoint", server.url]
    if version is not None:
        command += ["--os-placement-api-version", version]
    command += list(args)
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, env=_client_env(env))
    if not check:
        return result
    assert result.returncode == 0, f"{' '.join(args)} failed ({result.returncode}):\n{result.stderr}"
    return json.loads(result.stdout) if result.stdout.strip() else None


def test_cli_provider_inventory_traits_aggregates_allocations(placement: PlacementServer) -> None:
    created = osc(placement, "resource provider", "create", "cli-node", "-f", "json")
    rp = created["uuid"]
    assert created["name"] == "cli-node" and created["generation"] == 0

    listed = osc(placement, "resource provider", "list", "--name", "cli-node", "-f", "json")
    assert [row["uuid"] for row in listed] == [rp]

    inventory = osc(
        placement, "resource provider", "inventory", "set", rp,
        "--resource", "VCPU=8", "--resource", "VCPU:allocation_ratio=2.0",
        "--resource", "MEMORY_MB=4096", "--resource", "MEMORY_MB:reserved=512", "-f", "json",
    )
    by_class = {row["resource_class"]: row for row in inventory}
    assert by_class["VCPU"]["total"] == 8 and by_class["VCPU"]["allocation_ratio"] == 2.0
    assert by_class["MEMORY_MB"]["reserved"] == 512

    osc(placement, "trait", "create", "CUSTOM_CLI_GOLD", version="1.6")
    traits = osc(
        placement, "resource provider", "trait", "set", rp,
        "--trait", "HW_CPU_X86_AVX2", "--trait", "CUSTOM_CLI_GOLD", "-f", "json", version="1.6",
    )
    assert sorted(row["name"] for row in traits) == ["CUSTOM_CLI_GOLD", "HW_CPU_X86_AVX2"]

    # inventory set and trait set each moved the generation on by one.
    aggregates = osc(
        placement, "resource provider", "aggregate", "set", rp,
        "--aggregate", AGGREGATE, "--generation", "2", "-f", "json", version="1.19",
    )
    assert [row["uuid"] for row in aggregates] == [AGGREGATE]

    candidates = osc(
        placement, "allocation candidate", "list", "--resource", "VCPU=2",
        "--required", "CUSTOM_CLI_GOLD", "--member-of", AGGREGATE, "-f", "json", version="1.39",
    )
    assert [row["resource provider"] for row in candidates] == [rp]

    consumer = str(uuid.uuid4())
    allocated = osc(
        placement, "resource provider", "allocation", "set", consumer,
        "--allocation", f"rp={rp},VCPU=2,MEMORY_MB=1024",
        "--project-id", "project-a", "--user-id", "user-a", "--consumer-type", "INSTANCE",
        "-f", "json", version="1.39",
    )
    assert allocated[0]["resources"] == {"VCPU": 2, "MEMORY_MB": 1024}

    shown = osc(placement, "resource provider", "allocation", "show", consumer, "-f", "json", version="1.39")
    assert shown[0]["resource_provider"] == rp
    assert (shown[0]["project_id"], shown[0]["user_id"], shown[0]["consumer_type"]) == (
        "project-a", "user-a", "INSTANCE",
    )

    usage = osc(placement, "resource provider", "usage", "show", rp, "-f", "json")
    assert {row["resource_class"]: row["usage"] for row in usage} == {"VCPU": 2, "MEMORY_MB": 1024}

    osc(placement, "resource provider", "allocation", "delete", consumer, version="1.39")
    body = placement.client("1.39").get(f"/allocations/{consumer}").json()
    assert body["allocations"] == {}

    osc(placement, "resource provider", "delete", rp)
    assert placement.client().get(f"/resource_providers/{rp}").status_code == 404


def test_cli_reports_generation_conflict(placement: PlacementServer) -> None:
    rp = placement.client().post("/resource_providers", json={"name": "stale"}).headers["location"].rsplit("/", 1)[-1]
    result = osc(
        placement, "resource provider", "aggregate", "set", rp,
        "--aggregate", AGGREGATE, "--generation", "7", version="1.19", check=False,
    )
    assert result.returncode != 0
    assert "HTTP 409" in result.stderr
    assert placement.client("1.19").get(f"/resource_providers/{rp}/aggregates").json()["aggregates"] == []


def test_cli_with_clouds_yaml(placement: PlacementServer, tmp_path: Path) -> None:
    """The clouds.yaml shown in docs/placement.md."""
    clouds = tmp_path / "clouds.yaml"
    clouds.write_text(
        "clouds:\n"
        "  corral:\n"
        "    auth_type: admin_token\n"
        "    auth:\n"
        f"      endpoint: {placement.url}\n"
        "      token: admin\n"
        f"    placement_endpoint_override: {placement.url}\n"
        "    placement_api_version: '1.39'\n",
        encoding="utf-8",
    )
    placement.client().post("/resource_providers", json={"name": "from-clouds-yaml"})
    listed = osc(
        placement, "--os-cloud", "corral", "resource provider", "list", "-f", "json",
        auth=False, env={"OS_CLIENT_CONFIG_FILE": str(clouds)},
    )
    assert [row["name"] for row in listed] == ["from-clouds-yaml"]


@pytest.fixture
def sdk(placement: PlacementServer) -> Any:
    import openstack

    conn = openstack.connect(
        auth_type="admin_token",
        auth={"endpoint": placement.url, "token": "admin"},
        placement_endpoint_override=placement.url,
        placement_api_version="1.39",
        load_yaml_config=False,
        load_envvars=False,
    )
    yield conn.placement
    conn.close()


def test_sdk_providers_inventories_traits_aggregates(placement: PlacementServer, sdk: Any) -> None:
    rp = sdk.create_resource_provider(name="sdk-node")
    child = sdk.create_resource_provider(name="sdk-child", parent_provider_uuid=rp.id)
    assert child.root_provider_id == rp.id
    assert sorted(p.name for p in sdk.resource_providers()) == ["sdk-child", "sdk-node"]
    assert [p.id for p in sdk.resource_providers(in_tree=rp.id, name="sdk-child")] == [child.id]

    sdk.set_resource_provider_inventories(
        rp, {"VCPU": {"total": 16, "allocation_ratio": 4.0}, "DISK_GB": {"total": 100, "step_size": 10}},
        resource_provider_generation=0,
    )
    inventories = {inv.resource_class: inv for inv in sdk.resource_provider_inventories(rp)}
    assert inventories["VCPU"].total == 16 and inventories["VCPU"].allocation_ratio == 4.0
    assert inventories["DISK_GB"].step_size == 10
    updated = sdk.update_resource_provider_inventory(
        "VCPU", rp, resource_provider_generation=1, total=32,
    )
    assert updated.total == 32

    assert sdk.create_trait("CUSTOM_SDK_FAST").name == "CUSTOM_SDK_FAST"
    assert [t.name for t in sdk.traits(name="startswith:CUSTOM_SDK")] == ["CUSTOM_SDK_FAST"]
    rp_traits = sdk.get_resource_provider_trait(rp)
    rp_traits.traits = ["CUSTOM_SDK_FAST", "HW_CPU_X86_AVX2"]
    saved = sdk.set_resource_provider_trait(rp_traits)
    assert sorted(saved.traits) == ["CUSTOM_SDK_FAST", "HW_CPU_X86_AVX2"]

    sdk.set_resource_provider_aggregates(sdk.get_resource_provider(rp.id), AGGREGATE)
    assert sdk.get_resource_provider_aggregates(rp).aggregates == [AGGREGATE]

    raw = placement.client("1.39").get(f"/resource_providers/{rp.id}").json()
    # Inventory replaced, one inventory updated, traits, aggregates: four changes.
    assert raw["generation"] == 4


def test_sdk_create_single_inventory(placement: PlacementServer, sdk: Any) -> None:
    """openstacksdk posts one inventory without a provider generation."""
    rp = sdk.create_resource_provider(name="sdk-one-inventory")
    inventory = sdk.create_resource_provider_inventory(rp, resource_class="VCPU", total=4)
    assert inventory.total == 4
    assert placement.client().get(f"/resource_providers/{rp.id}/inventories/VCPU").json()["total"] == 4


def test_sdk_allocations_and_usages(placement: PlacementServer, sdk: Any) -> None:
    rp = sdk.create_resource_provider(name="sdk-alloc")
    sdk.set_resource_provider_inventories(rp, {"VCPU": {"total": 4}}, resource_provider_generation=0)
    consumer = str(uuid.uuid4())
    api = placement.client("1.39")
    put = api.put(f"/allocations/{consumer}", json={
        "allocations": {rp.id: {"resources": {"VCPU": 3}}},
        "project_id": "project-s", "user_id": "user-s",
        "consumer_generation": None, "consumer_type": "INSTANCE",
    })
    assert put.status_code == 204, put.text
    allocation = sdk.get_allocation(consumer)
    assert allocation.allocations[rp.id]["resources"] == {"VCPU": 3}
    assert allocation.consumer_generation == 1
    usages = sdk.fetch_resource_provider_usages(rp)
    assert usages.usages == {"VCPU": 3}
    project = list(sdk.usages("project-s"))
    assert [(u.consumer_type, u.consumer_count, u.resources) for u in project] == [("INSTANCE", 1, {"VCPU": 3})]
