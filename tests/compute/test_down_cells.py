"""Down cells at microversion 2.69 and before, rule by rule.

cell2 is made unreachable by pointing its mapping at a port where nothing
listens (connection refused); the server fixtures mirror upstream's
measured ones: servers of project-a in cell1 and cell2 (one booted from
volume, one soft-deleted, one whose mapping predates queued_for_delete)
and one of project-b in cell2.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from corral.compute.db import api_queries as q
from corral.compute.db import api_tables
from tests.compute.conftest import IMAGE, ComputeServer

USER_A = "user-a:project-a"
UNREACHABLE = "postgresql+psycopg://postgres@127.0.0.1:1/corral_cell_down"


@dataclass
class Fixtures:
    cloud: ComputeServer
    servers: dict[str, str]

    def set_cell2_url(self, url: str) -> None:
        api_db = self.cloud.state.api_db
        api_db.write(lambda conn: q.update_cell_mapping(conn, self.cloud.cells["cell2"].uuid, database_connection=url))
        self.cloud.state.cells.refresh()

    def take_cell2_down(self) -> None:
        self.set_cell2_url(UNREACHABLE)

    def bring_cell2_back(self) -> None:
        self.set_cell2_url(self.cloud.cell_urls["cell2"])
        self.cloud.state.cells.forget_failures()


def _boot_on(cloud: ComputeServer, host: str, name: str, project: str = "project-a", **extra: object) -> str:
    # Admin acting in the project, forcing the host.
    return cloud.boot(token=f"admin:{project}", name=name, availability_zone=f"nova:{host}", **extra)


@pytest.fixture
def world(cloud: ComputeServer) -> Iterator[Fixtures]:
    servers = {
        "c1_active": _boot_on(cloud, "host-cell1", "c1_active"),
        "c1_deleted": _boot_on(cloud, "host-cell1", "c1_deleted"),
        "c2_active": _boot_on(cloud, "host-cell2", "c2_active"),
        "c2_bfv": _boot_on(cloud, "host-cell2", "c2_bfv", imageRef="", block_device_mapping_v2=[
            {"boot_index": 0, "uuid": IMAGE, "source_type": "volume", "destination_type": "volume"}]),
        "c2_soft_deleted": _boot_on(cloud, "host-cell2", "c2_soft_deleted"),
        "c2_other_project": _boot_on(cloud, "host-cell2", "c2_other_project", project="project-b"),
    }
    # One server scheduled without a requested zone: host-cell1 is disabled meanwhile.
    admin = cloud.client("2.52")
    admin.put("/v2.1/os-services/disable", json={"host": "host-cell1", "binary": "nova-compute"})
    servers["c2_qfd_null"] = cloud.boot(name="c2_qfd_null")
    admin.put("/v2.1/os-services/enable", json={"host": "host-cell1", "binary": "nova-compute"})
    cloud.run_computes()
    admin = cloud.client("2.69")
    assert admin.delete(f"/v2.1/servers/{servers['c1_deleted']}").status_code == 204
    cloud.conf.set_override("reclaim_instance_interval", 3600, group="compute")
    assert admin.delete(f"/v2.1/servers/{servers['c2_soft_deleted']}").status_code == 204
    cloud.conf.clear_override("reclaim_instance_interval", group="compute")
    cloud.state.api_db.write(
        lambda conn: conn.execute(
            api_tables.instance_mappings.update()
            .where(api_tables.instance_mappings.c.instance_uuid == servers["c2_qfd_null"])
            .values(queued_for_delete=None)
        )
    )
    fixtures = Fixtures(cloud, servers)
    fixtures.take_cell2_down()
    yield fixtures
    fixtures.bring_cell2_back()
    cloud.conf.clear_override("list_records_by_skipping_down_cells", group="api")


@pytest.fixture
def noskip(world: Fixtures) -> Fixtures:
    world.cloud.conf.set_override("list_records_by_skipping_down_cells", False, group="api")
    return world


def ids(resp_json: dict, key: str = "servers") -> list[str]:
    return [s["id"] for s in resp_json[key]]


def user(world: Fixtures, version: str | None = "2.69"):  # type: ignore[no-untyped-def]
    return world.cloud.client(version, token=USER_A)


# ------------------------------------------------------------------ lists


def test_index_has_minimal_records_first(world: Fixtures) -> None:
    s = world.servers
    body = user(world).get("/v2.1/servers").json()
    minimal = body["servers"][:3]
    assert {m["id"] for m in minimal} == {s["c2_active"], s["c2_bfv"], s["c2_qfd_null"]}
    for record in minimal:
        assert set(record) == {"id", "status", "links"}
        assert record["status"] == "UNKNOWN"
    assert [r["id"] for r in body["servers"][3:]] == [s["c1_active"]]
    assert "name" in body["servers"][3]


def test_detail_minimal_records_have_five_keys(world: Fixtures) -> None:
    body = user(world).get("/v2.1/servers/detail").json()
    minimal = [r for r in body["servers"] if r["status"] == "UNKNOWN"]
    assert len(minimal) == 3
    for record in minimal:
        assert set(record) == {"id", "status", "tenant_id", "created", "links"}
        assert record["tenant_id"] == "project-a"
        assert record["created"].endswith("Z") and len(record["created"]) == 20
    assert body["servers"][-1]["id"] == world.servers["c1_active"]


@pytest.mark.parametrize("query", ["limit=1000", "sort_key=display_name", "sort_dir=asc", "name=c", "status=ACTIVE",
                                   "changes-since=2000-01-01T00:00:00Z"])
def test_paging_sorting_or_filters_skip_the_down_cell(world: Fixtures, query: str) -> None:
    body = user(world).get(f"/v2.1/servers?{query}").json()
    expected = {world.servers["c1_active"]}
    if query.startswith("changes-since"):
        expected.add(world.servers["c1_deleted"])  # changes-since lists deleted servers too
    assert set(ids(body)) == expected


def test_marker_in_up_cell_skips_the_down_cell(world: Fixtures) -> None:
    body = user(world).get(f"/v2.1/servers?marker={world.servers['c1_active']}").json()
    assert ids(body) == []


@pytest.mark.parametrize("query", ["limit=10", "sort_key=display_name", "name=c", "status=ACTIVE"])
def test_skip_disabled_fails_with_compute_fault(noskip: Fixtures, query: str) -> None:
    resp = user(noskip).get(f"/v2.1/servers?{query}")
    assert resp.status_code == 500
    assert resp.json() == {"computeFault": {"code": 500, "message":
                           "Unexpected API Error. Please contact the administrator\n"
                           "<class 'nova.exception.NovaException'>"}}


def test_marker_in_down_cell_is_500_whatever_the_option(world: Fixtures) -> None:
    resp = user(world).get(f"/v2.1/servers?marker={world.servers['c2_active']}")
    assert resp.status_code == 500
    assert "oslo_db" in resp.json()["computeFault"]["message"]


@pytest.mark.parametrize("query", ["host=host-cell1", "deleted=true", "node=x"])
def test_filters_a_user_may_not_use_are_dropped(world: Fixtures, query: str) -> None:
    body = user(world).get(f"/v2.1/servers?{query}").json()
    assert len(body["servers"]) == 4
    assert sum(r.get("status") == "UNKNOWN" for r in body["servers"]) == 3


@pytest.mark.parametrize("query", ["host=host-cell1", "deleted=false", "hostname=c1-active"])
def test_admin_filters_turn_minimal_records_off(world: Fixtures, query: str) -> None:
    body = world.cloud.client("2.69", token="admin:project-a").get(f"/v2.1/servers/detail?{query}").json()
    assert all(r["status"] != "UNKNOWN" for r in body["servers"])


def test_admin_all_tenants_sees_every_project_down_cell_record(world: Fixtures) -> None:
    s = world.servers
    admin = world.cloud.client("2.69", token="admin:project-a")
    body = admin.get("/v2.1/servers/detail?all_tenants=1").json()
    minimal = {r["id"]: r["tenant_id"] for r in body["servers"] if r["status"] == "UNKNOWN"}
    assert minimal == {s["c2_active"]: "project-a", s["c2_bfv"]: "project-a", s["c2_qfd_null"]: "project-a",
                       s["c2_other_project"]: "project-b"}
    filtered = admin.get("/v2.1/servers/detail?all_tenants=1&project_id=project-b").json()
    assert filtered["servers"] == []


def test_all_tenants_zero_is_still_only_all_tenants(world: Fixtures) -> None:
    admin = world.cloud.client("2.69", token="admin:project-a")
    body = admin.get("/v2.1/servers/detail?all_tenants=0").json()
    minimal = [r for r in body["servers"] if r["status"] == "UNKNOWN"]
    assert {r["tenant_id"] for r in minimal} == {"project-a"}
    assert len(minimal) == 3


def test_minimal_records_are_capped_by_max_limit(world: Fixtures) -> None:
    world.cloud.conf.set_override("max_limit", 2, group="api")
    try:
        body = user(world).get("/v2.1/servers").json()
    finally:
        world.cloud.conf.clear_override("max_limit", group="api")
    # One real record, then room for one minimal record.
    assert len(body["servers"]) == 2
    assert body["servers"][0]["status"] == "UNKNOWN"
    assert body["servers"][1]["id"] == world.servers["c1_active"]


@pytest.mark.parametrize("version", [None, "2.68"])
def test_before_2_69_down_cell_servers_are_missing(world: Fixtures, version: str | None) -> None:
    assert ids(user(world, version).get("/v2.1/servers").json()) == [world.servers["c1_active"]]
    assert ids(user(world, version).get("/v2.1/servers/detail").json()) == [world.servers["c1_active"]]


def test_before_2_69_without_skipping_is_500(noskip: Fixtures) -> None:
    assert user(noskip, "2.68").get("/v2.1/servers").status_code == 500


def test_at_2_69_the_skip_option_does_not_matter_unfiltered(noskip: Fixtures) -> None:
    body = user(noskip).get("/v2.1/servers").json()
    assert sum(r.get("status") == "UNKNOWN" for r in body["servers"]) == 3


def test_legacy_version_header(world: Fixtures) -> None:
    client = world.cloud.client("2.69", token=USER_A, legacy=True)
    body = client.get("/v2.1/servers").json()
    assert sum(r.get("status") == "UNKNOWN" for r in body["servers"]) == 3


# ------------------------------------------------------------------- show


def test_show_minimal_record(world: Fixtures) -> None:
    server = world.servers["c2_active"]
    body = user(world).get(f"/v2.1/servers/{server}").json()["server"]
    assert set(body) == {"id", "status", "tenant_id", "created", "links", "user_id", "flavor", "image",
                         "OS-EXT-AZ:availability_zone", "OS-EXT-STS:power_state"}
    assert body["status"] == "UNKNOWN"
    assert body["user_id"] == "admin"
    assert body["flavor"] == {"vcpus": 1, "ram": 512, "disk": 1, "ephemeral": 0, "swap": 0,
                              "original_name": "m1.tiny", "extra_specs": {}}
    assert body["image"] == {"id": IMAGE, "links": [
        {"rel": "bookmark", "href": f"{world.cloud.url}/images/{IMAGE}"}]}
    assert body["OS-EXT-AZ:availability_zone"] == "nova"
    assert body["OS-EXT-STS:power_state"] == 0


@pytest.mark.parametrize("version", ["2.71", "2.73", "latest"])
def test_show_minimal_record_gains_server_groups_at_2_71(world: Fixtures, version: str) -> None:
    body = user(world, version).get(f"/v2.1/servers/{world.servers['c2_active']}").json()["server"]
    assert len(body) == 11 and body["server_groups"] == []
    detail = user(world, version).get("/v2.1/servers/detail").json()["servers"]
    assert {len(r) for r in detail if r["status"] == "UNKNOWN"} == {5}


def test_show_boot_from_volume_and_no_requested_zone(world: Fixtures) -> None:
    body = user(world).get(f"/v2.1/servers/{world.servers['c2_bfv']}").json()["server"]
    assert body["image"] == ""
    assert body["OS-EXT-AZ:availability_zone"] == "nova"
    plain = user(world).get(f"/v2.1/servers/{world.servers['c2_qfd_null']}").json()["server"]
    assert plain["status"] == "UNKNOWN"
    assert plain["OS-EXT-AZ:availability_zone"] == "UNKNOWN"
    assert plain["user_id"] == "user-a"


def test_show_queued_for_delete_is_404(world: Fixtures) -> None:
    server = world.servers["c2_soft_deleted"]
    resp = user(world).get(f"/v2.1/servers/{server}")
    assert resp.status_code == 404
    assert resp.json()["itemNotFound"]["message"] == f"Instance {server} could not be found."


def test_show_without_request_spec_is_404(world: Fixtures) -> None:
    server = world.servers["c2_active"]
    world.cloud.state.api_db.write(lambda conn: q.delete_request_spec(conn, server))
    assert user(world).get(f"/v2.1/servers/{server}").status_code == 404


@pytest.mark.parametrize("version", [None, "2.68"])
def test_show_before_2_69_is_500(world: Fixtures, version: str | None) -> None:
    resp = user(world, version).get(f"/v2.1/servers/{world.servers['c2_active']}")
    assert resp.status_code == 500
    assert "NovaException" in resp.json()["computeFault"]["message"]


def test_show_other_projects_down_cell_server_is_404(world: Fixtures) -> None:
    # Upstream answers 403 here (and 404 in an up cell); Corral answers 404
    # in both cases so that existence does not leak.
    resp = user(world).get(f"/v2.1/servers/{world.servers['c2_other_project']}")
    assert resp.status_code == 404


def test_up_cell_server_still_shows_in_full(world: Fixtures) -> None:
    body = user(world).get(f"/v2.1/servers/{world.servers['c1_active']}").json()["server"]
    assert body["status"] == "ACTIVE" and body["name"] == "c1_active"


@pytest.mark.parametrize("method,path,body", [
    ("DELETE", "", None),
    ("POST", "/action", {"restore": None}),
    ("POST", "/action", {"forceDelete": None}),
])
def test_actions_on_down_cell_servers_are_500(world: Fixtures, method: str, path: str, body: object) -> None:
    resp = user(world).request(method, f"/v2.1/servers/{world.servers['c2_active']}{path}", json=body)
    assert resp.status_code == 500
    assert list(resp.json()) == ["computeFault"]


# ----------------------------------------------------------- os-services


def test_services_minimal_records_at_2_69(world: Fixtures) -> None:
    services = world.cloud.client("2.69").get("/v2.1/os-services").json()["services"]
    assert services[0]["host"] == "host-cell1" and services[0]["state"] == "up"
    assert services[1] == {"binary": "nova-compute", "host": "host-cell2", "status": "UNKNOWN"}
    assert len(services) == 2


def test_services_filters_apply_to_minimal_records(world: Fixtures) -> None:
    admin = world.cloud.client("2.69")
    only = admin.get("/v2.1/os-services?host=host-cell2").json()["services"]
    assert only == [{"binary": "nova-compute", "host": "host-cell2", "status": "UNKNOWN"}]
    assert admin.get("/v2.1/os-services?binary=nova-conductor").json()["services"] == []


@pytest.mark.parametrize("version", [None, "2.68"])
def test_services_before_2_69_skip_the_down_cell(noskip: Fixtures, version: str | None) -> None:
    services = noskip.cloud.client(version).get("/v2.1/os-services").json()["services"]
    assert [s["host"] for s in services] == ["host-cell1"]


def test_down_cell0_lists_no_services(world: Fixtures) -> None:
    cloud = world.cloud
    cell0 = cloud.cells["cell0"]
    cloud.state.api_db.write(lambda conn: q.update_cell_mapping(conn, cell0.uuid, database_connection=UNREACHABLE))
    cloud.state.cells.refresh()
    try:
        services = cloud.client("2.69").get("/v2.1/os-services").json()["services"]
        assert [s.get("state", "UNKNOWN") for s in services] == ["up", "UNKNOWN"]
    finally:
        cloud.state.api_db.write(
            lambda conn: q.update_cell_mapping(conn, cell0.uuid, database_connection=cloud.cell_urls["cell0"])
        )
        cloud.state.cells.refresh()


# ----------------------------------------------------------- quota, boot


def test_usage_of_a_down_cell_is_estimated_not_zero(world: Fixtures) -> None:
    absolute = user(world).get("/v2.1/limits").json()["limits"]["absolute"]
    # c1_active, plus c2_active, c2_bfv, c2_qfd_null from the API database.
    assert absolute["totalInstancesUsed"] == 4
    assert absolute["totalCoresUsed"] == 4
    assert absolute["totalRAMUsed"] == 2048
    detail = user(world).get("/v2.1/os-quota-sets/project-a/detail").json()["quota_set"]
    assert detail["instances"]["in_use"] == 4


def test_boot_refused_while_project_has_servers_in_a_down_cell(world: Fixtures) -> None:
    resp = user(world).post("/v2.1/servers", json={"server": {
        "name": "new", "flavorRef": "1", "imageRef": IMAGE, "networks": "none"}})
    assert resp.status_code == 403
    assert "cannot be reached" in resp.json()["forbidden"]["message"]


def test_boot_with_down_cell_allowed_by_policy_for_admins(world: Fixtures) -> None:
    server = world.cloud.boot(token="admin:project-a", name="admin-boot")
    assert server


def test_boot_for_project_without_servers_there_is_accepted(world: Fixtures) -> None:
    assert world.cloud.boot(token="user-c:project-c", name="fresh")


def test_cell_comes_back(world: Fixtures) -> None:
    assert sum(r.get("status") == "UNKNOWN" for r in user(world).get("/v2.1/servers").json()["servers"]) == 3
    world.bring_cell2_back()
    body = user(world).get("/v2.1/servers").json()
    assert all("name" in r for r in body["servers"])
    # Full records again; as upstream, the soft-deleted one is not listed.
    assert len(body["servers"]) == 4
    assert world.servers["c2_soft_deleted"] not in {r["id"] for r in body["servers"]}


# ------------------------------------------------------------ hung cell


class SilentListener:
    """A TCP port that accepts connections and never says anything."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.accepted: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted.append(conn)

    def close(self) -> None:
        self.sock.close()
        for conn in self.accepted:
            conn.close()


def test_hung_cell_times_out_into_minimal_records(world: Fixtures) -> None:
    cloud = world.cloud
    listener = SilentListener()
    cloud.conf.set_override("timeout", 0.3, group="cells")
    cloud.conf.set_override("connect_timeout", 2.0, group="cells")
    try:
        world.set_cell2_url(f"postgresql+psycopg://postgres@127.0.0.1:{listener.port}/hung")
        first = user(world).get("/v2.1/servers").json()
        assert sum(r.get("status") == "UNKNOWN" for r in first["servers"]) == 3
        # The cell's earlier request is still hanging: answered at once as down.
        second = user(world).get("/v2.1/servers/detail").json()
        assert sum(r.get("status") == "UNKNOWN" for r in second["servers"]) == 3
        services = cloud.client("2.69").get("/v2.1/os-services").json()["services"]
        assert {"binary": "nova-compute", "host": "host-cell2", "status": "UNKNOWN"} in services
    finally:
        cloud.conf.clear_override("timeout", group="cells")
        cloud.conf.clear_override("connect_timeout", group="cells")
        listener.close()
