"""Values no database can take, dates and numbers out of range: 4xx in Nova's body, cells stay up."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from corral.compute.api.routes import all_routes
from corral.core.edge import MAX_JSON_DEPTH
from tests.compute.conftest import IMAGE, ComputeServer

USER_A = "user-a:project-a"
USER_B = "user-b:project-b"


def _bad_request(response) -> str:  # type: ignore[no-untyped-def]
    assert response.status_code == 400, response.text
    fault = response.json()["badRequest"]
    assert fault["code"] == 400
    return str(fault["message"])


@pytest.fixture
def remembering(cloud: ComputeServer) -> Iterator[ComputeServer]:
    """The cloud with down cells remembered for a minute, as in production."""
    cloud.conf.set_override("down_cell_recheck_interval", 60.0, group="cells")
    cloud.state.cells.forget_failures()
    yield cloud
    cloud.conf.clear_override("down_cell_recheck_interval", group="cells")
    cloud.state.cells.forget_failures()


@pytest.mark.parametrize("query", ["name=%00", "flavor=%00", "image=%00", "name=vm%00", "all_tenants=1&host=%00"])
def test_nul_in_a_server_filter_is_400_and_no_cell_goes_down(remembering: ComputeServer, query: str) -> None:
    cloud = remembering
    server = cloud.boot(token=USER_B, name="b-vm")
    cloud.run_computes()
    for path in ("/v2.1/servers", "/v2.1/servers/detail"):
        _bad_request(cloud.client("2.69", token=USER_A).get(f"{path}?{query}"))
        _bad_request(cloud.client("2.69").get(f"{path}?{query}"))
    assert not any(cloud.state.cells.is_recently_down(cell) for cell in cloud.state.cells.mappings())
    # Another project's servers are listed in full, not as UNKNOWN records of down cells.
    listed = cloud.client("2.69", token=USER_B).get("/v2.1/servers/detail")
    assert listed.status_code == 200
    assert [(s["id"], s["status"]) for s in listed.json()["servers"]] == [(server, "ACTIVE")]
    # And boots are not refused for a cell that looks down.
    assert cloud.client("2.69", token=USER_B).post("/v2.1/servers", json={"server": {
        "name": "b-vm2", "flavorRef": "1", "imageRef": IMAGE, "networks": "none"}}).status_code == 202


def test_nul_in_a_path_is_400(compute: ComputeServer) -> None:
    for path in ("/v2.1/flavors/a%00b", "/v2.1/os-quota-sets/pro%00ject", "/v2.1/servers/%00"):
        _bad_request(compute.client("2.69").get(path))


def test_nul_in_a_body_is_400_and_nothing_is_created(cloud: ComputeServer) -> None:
    client = cloud.client("2.69")
    flavor = {"name": "a\x00b", "ram": 256, "vcpus": 1, "disk": 1, "id": "nul"}
    _bad_request(client.post("/v2.1/flavors", json={"flavor": flavor}))
    server = {"name": "vm\x00", "flavorRef": "1", "imageRef": IMAGE, "networks": "none"}
    _bad_request(cloud.client("2.69", token=USER_A).post("/v2.1/servers", json={"server": server}))
    assert client.get("/v2.1/flavors/nul").status_code == 404
    assert cloud.client("2.69", token=USER_A).get("/v2.1/servers").json()["servers"] == []


def test_nul_in_the_token_is_400(cloud: ComputeServer) -> None:
    server = {"name": "vm", "flavorRef": "1", "imageRef": IMAGE, "networks": "none"}
    _bad_request(cloud.client("2.69", token="user-a:proj\x00ect-a").post("/v2.1/servers", json={"server": server}))
    assert cloud.client("2.69").get("/v2.1/servers?all_tenants=1").json()["servers"] == []


def test_dates_beyond_the_calendar_in_utc_are_400(cloud: ComputeServer) -> None:
    for name in ("changes-since", "changes-before"):
        for value in ("0001-01-01T00:00:00%2B23:59", "9999-12-31T23:59:59-23:59"):
            assert name in _bad_request(cloud.client("2.69").get(f"/v2.1/servers?{name}={value}"))


def test_dates_at_the_ends_of_the_calendar_are_accepted(cloud: ComputeServer) -> None:
    server = cloud.boot(token=USER_A)
    client = cloud.client("2.69", token=USER_A)
    response = client.get("/v2.1/servers?changes-since=0001-01-01T00:00:00%2B00:00")
    assert response.status_code == 200, response.text
    assert [s["id"] for s in response.json()["servers"]] == [server]


def test_huge_flavor_filters_find_nothing(cloud: ComputeServer) -> None:
    client = cloud.client("2.69")
    for value in (2**31, 2**63, 2**64, 10**30):
        for name in ("minRam", "minDisk"):
            for path in ("/v2.1/flavors", "/v2.1/flavors/detail"):
                response = client.get(f"{path}?{name}={value}")
                assert response.status_code == 200, response.text
                assert response.json()["flavors"] == []
    assert [f["id"] for f in client.get("/v2.1/flavors?minRam=512").json()["flavors"]] == ["1"]


def test_huge_server_integer_filters_find_nothing(cloud: ComputeServer) -> None:
    cloud.boot(token="admin:project-a")
    for value in (2**31, 2**63, 2**64):
        for name in ("launch_index", "power_state"):
            response = cloud.client("2.69").get(f"/v2.1/servers?all_tenants=1&{name}={value}")
            assert response.status_code == 200, response.text
            assert response.json()["servers"] == []


def test_huge_limits_are_the_maximum(cloud: ComputeServer) -> None:
    server = cloud.boot(token=USER_A)
    client = cloud.client("2.69", token=USER_A)
    for limit in (2**63, 2**64, 10**30):
        for path in ("/v2.1/servers", "/v2.1/servers/detail"):
            response = client.get(f"{path}?limit={limit}")
            assert response.status_code == 200, response.text
            assert [s["id"] for s in response.json()["servers"]] == [server]
        flavors = client.get(f"/v2.1/flavors?limit={limit}")
        assert flavors.status_code == 200 and [f["id"] for f in flavors.json()["flavors"]] == ["1"]


TOO_BIG: list[object] = [2**31, 2**63, 2**64 - 1, "2147483648", "99999999999999999999", 1e308]


def test_flavor_sizes_beyond_int_are_400_and_nothing_is_created(cloud: ComputeServer) -> None:
    client = cloud.client("2.69")
    for field in ("ram", "vcpus", "disk", "swap", "OS-FLV-EXT-DATA:ephemeral"):
        for value in [*TOO_BIG, 512.0]:
            flavor = {"name": "big", "ram": 512, "vcpus": 1, "disk": 1, "id": "big", field: value}
            message = _bad_request(client.post("/v2.1/flavors", json={"flavor": flavor}))
            assert field in message, (field, value, message)
    assert client.get("/v2.1/flavors/big").status_code == 404


def test_flavor_sizes_up_to_int_are_accepted(cloud: ComputeServer) -> None:
    flavor = {"name": "max", "ram": 2**31 - 1, "vcpus": "2147483647", "disk": 0, "id": "max"}
    response = cloud.client("2.69").post("/v2.1/flavors", json={"flavor": flavor})
    assert response.status_code == 200, response.text
    assert response.json()["flavor"]["ram"] == 2**31 - 1 and response.json()["flavor"]["vcpus"] == 2**31 - 1


def test_rxtx_factor_beyond_a_float_is_400(cloud: ComputeServer) -> None:
    for value in ("1" * 400, "1e400"):
        flavor = {"name": "rx", "ram": 512, "vcpus": 1, "disk": 1, "id": "rx", "rxtx_factor": value}
        _bad_request(cloud.client("2.69").post("/v2.1/flavors", json={"flavor": flavor}))
    assert cloud.client("2.69").get("/v2.1/flavors/rx").status_code == 404


def test_quota_values_beyond_int_are_400_and_change_nothing(cloud: ComputeServer) -> None:
    client = cloud.client("2.69")
    before = client.get("/v2.1/os-quota-sets/project-a").json()["quota_set"]
    for value in [*TOO_BIG, 10.0]:
        message = _bad_request(client.put("/v2.1/os-quota-sets/project-a",
                                          json={"quota_set": {"cores": 5, "instances": value}}))
        assert "instances" in message, (value, message)
    assert client.get("/v2.1/os-quota-sets/project-a").json()["quota_set"] == before


def test_quota_values_up_to_int_are_accepted(cloud: ComputeServer) -> None:
    client = cloud.client("2.69")
    response = client.put("/v2.1/os-quota-sets/project-a", json={"quota_set": {"instances": 2**31 - 1}})
    assert response.status_code == 200, response.text
    assert response.json()["quota_set"]["instances"] == 2**31 - 1


def _writes() -> list[tuple[str, str]]:
    return [(method, route.path) for route in all_routes() for method in route.methods
            if method in ("POST", "PUT", "PATCH") and "{url_project_id}" not in route.path]


def test_deeply_nested_json_is_400_on_every_write(cloud: ComputeServer) -> None:
    client = cloud.client("2.69")
    writes = _writes()
    assert len(writes) >= 9
    for depth, (method, template) in itertools.product((MAX_JSON_DEPTH + 1, 5000), writes):
        path = (template.replace("{flavor_id}", "1").replace("{key}", "k").replace("{server_id}", "x")
                .replace("{service_id}", "1").replace("{project_id}", "project-a").replace("{aggregate_id}", "1"))
        response = client.request(method, path, data=b"[" * depth + b"]" * depth,
                                  headers={"content-type": "application/json"})
        _bad_request(response)
