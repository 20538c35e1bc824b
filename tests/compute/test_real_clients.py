"""Real OpenStack clients against Corral's Compute API, with a cell up and then down.

The ``openstack`` command line runs as a child process (as an operator
would use it); openstacksdk's compute proxy and python-novaclient run
in-process.  Client behaviour does not depend on the database, so these
run on SQLite only; each CLI call costs about a second.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from corral.core.server import ThreadedServer
from tests.compute.conftest import IMAGE, ComputeServer
from tests.compute.test_down_cells import UNREACHABLE

pytestmark = [
    pytest.mark.slow,
    # Client behaviour does not depend on the database.
    pytest.mark.backends("first"),
    pytest.mark.filterwarnings(r"ignore::PendingDeprecationWarning:openstack\..*"),
    pytest.mark.filterwarnings(r"ignore::DeprecationWarning:novaclient\..*"),
]

USER_A = "user-a:project-a"


def _identity_discovery(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    # The CLI insists on an identity v3 proxy even with admin_token auth;
    # this answers its version discovery (nothing else is asked of it).
    host = environ["HTTP_HOST"]
    body = json.dumps({"version": {
        "id": "v3.14", "status": "stable", "updated": "2020-04-07T00:00:00Z",
        "links": [{"rel": "self", "href": f"http://{host}/identity/v3/"}],
        "media-types": [{"base": "application/json", "type": "application/vnd.openstack.identity-v3+json"}],
    }}).encode()
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]


@pytest.fixture(scope="module")
def identity_url() -> Iterator[str]:
    server = ThreadedServer(_identity_discovery).start()
    yield server.url + "/identity/v3"
    server.stop()


def run_osc(cloud: ComputeServer, identity: str, tmp_path: Path, *args: str, token: str = USER_A,
        version: str = "2.69") -> Any:
    clouds = tmp_path / f"clouds-{token.replace(':', '-')}.yaml"
    clouds.write_text(json.dumps({"clouds": {"corral": {
        "auth_type": "admin_token",
        "auth": {"endpoint": cloud.url + "/v2.1", "token": token},
        "identity_api_version": "3",
        "identity_endpoint_override": identity,
        "compute_endpoint_override": cloud.url + "/v2.1",
    }}}))
    env = {name: value for name, value in os.environ.items() if not name.startswith("OS_")}
    env["OS_CLIENT_CONFIG_FILE"] = str(clouds)
    command = [
        sys.executable, "-m", "openstackclient.shell", "--os-cloud", "corral", "--os-compute-api-version", version,
        *args, "-f", "json",
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, env=env)
    assert result.returncode == 0, f"{' '.join(args)} failed ({result.returncode}):\n{result.stderr}"
    return json.loads(result.stdout) if result.stdout.strip() else None


@pytest.fixture
def two_cells(cloud: ComputeServer) -> Iterator[tuple[ComputeServer, dict[str, str]]]:
    servers = {
        host: cloud.boot(token="admin:project-a", name=f"on-{host}", availability_zone=f"nova:{host}")
        for host in ("host-cell1", "host-cell2")
    }
    cloud.run_computes()
    yield cloud, servers
    _set_cell2(cloud, cloud.cell_urls["cell2"])


def _set_cell2(cloud: ComputeServer, url: str) -> None:
    from corral.compute.db import api_queries as q

    cloud.state.api_db.write(lambda conn: q.update_cell_mapping(conn, cloud.cells["cell2"].uuid, database_connection=url))
    cloud.state.cells.refresh()
    cloud.state.cells.forget_failures()


def test_openstack_cli_server_and_service_lists(two_cells: tuple[ComputeServer, dict[str, str]], identity_url: str,
                                                 tmp_path: Path) -> None:
    cloud, servers = two_cells

    def osc(*args: str, token: str = USER_A) -> Any:
        return run_osc(cloud, identity_url, tmp_path, *args, token=token)

    listed = osc("server", "list")
    assert {row["ID"]: row["Status"] for row in listed} == {s: "ACTIVE" for s in servers.values()}
    shown = osc("server", "show", servers["host-cell2"])
    assert shown["name"] == "on-host-cell2" and shown["status"] == "ACTIVE"
    services = osc("compute", "service", "list", token="admin")
    assert {(row["Host"], row["State"]) for row in services} == {("host-cell1", "up"), ("host-cell2", "up")}

    _set_cell2(cloud, UNREACHABLE)
    down = osc("server", "list")
    assert {row["ID"]: row["Status"] for row in down} == {
        servers["host-cell1"]: "ACTIVE", servers["host-cell2"]: "UNKNOWN",
    }
    minimal = osc("server", "show", servers["host-cell2"])
    assert minimal["status"] == "UNKNOWN"
    assert minimal["id"] == servers["host-cell2"]
    services = osc("compute", "service", "list", token="admin")
    by_host = {row["Host"]: row for row in services}
    assert by_host["host-cell2"]["Status"] == "UNKNOWN"
    assert by_host["host-cell1"]["State"] == "up"


def test_openstacksdk_compute_proxy(two_cells: tuple[ComputeServer, dict[str, str]]) -> None:
    import openstack

    cloud, servers = two_cells
    conn = openstack.connect(
        auth_type="admin_token",
        auth={"endpoint": cloud.url, "token": USER_A},
        compute_endpoint_override=cloud.url + "/v2.1",
        compute_api_version="2.69",
        load_yaml_config=False,
        load_envvars=False,
    )
    try:
        compute = conn.compute
        assert {s.id: s.status for s in compute.servers()} == {s: "ACTIVE" for s in servers.values()}
        flavor = compute.find_flavor("m1.tiny")
        assert flavor is not None and flavor.ram == 512
        created = compute.create_server(name="sdk-vm", flavor_id=flavor.id, image_id=IMAGE, networks="none")
        assert compute.get_server(created.id).status == "BUILD"
        cloud.run_computes()
        assert compute.get_server(created.id).status == "ACTIVE"
        compute.delete_server(created.id)
        assert compute.find_server(created.id) is None

        _set_cell2(cloud, UNREACHABLE)
        statuses = {s.id: s.status for s in compute.servers()}
        assert statuses == {servers["host-cell1"]: "ACTIVE", servers["host-cell2"]: "UNKNOWN"}
        minimal = compute.get_server(servers["host-cell2"])
        assert minimal.status == "UNKNOWN" and minimal.name is None
    finally:
        conn.close()


def test_novaclient(two_cells: tuple[ComputeServer, dict[str, str]]) -> None:
    from keystoneauth1 import session
    from keystoneauth1.token_endpoint import Token
    from novaclient import client as nova_client

    cloud, servers = two_cells
    sess = session.Session(auth=Token(cloud.url + "/v2.1", USER_A))
    nova = nova_client.Client("2.69", session=sess, endpoint_override=cloud.url + "/v2.1")
    assert sorted(s.id for s in nova.servers.list()) == sorted(servers.values())
    _set_cell2(cloud, UNREACHABLE)
    statuses = {s.id: s.status for s in nova.servers.list()}
    assert statuses[servers["host-cell2"]] == "UNKNOWN"
    admin = nova_client.Client("2.69", session=session.Session(auth=Token(cloud.url + "/v2.1", "admin")),
                               endpoint_override=cloud.url + "/v2.1")
    by_host = {s.host: s for s in admin.services.list()}
    assert by_host["host-cell2"].status == "UNKNOWN"
