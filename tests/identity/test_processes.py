"""Tokens across ``corral serve`` processes: projects kept apart, and revocation reaching every process.

A revoked token must be refused by every process within one second: each
process trusts its copy of the revocation events for at most
``[token] revocation_check_interval`` (0.5 s), and a check that finds its
copy older than that reads the events before answering.  So one second
after the revocation was committed, every request to every process is
refused, however loaded the machine is; the test asserts exactly that.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml

from tests.identity.conftest import wait_for_compute_host
from tests.support.databases import DatabaseFactory
from tests.support.images import active_image
from tests.support.ports import free_port
from tests.support.process import CorralProcess, write_config

pytestmark = pytest.mark.slow

COMPUTE = {"OpenStack-API-Version": "compute 2.69"}


def _admin_password(data_dir: Path) -> str:
    return yaml.safe_load((data_dir / "clouds.yaml").read_text())["clouds"]["corral"]["auth"]["password"]


def _token(base: str, user: str, password: str, project: str) -> str:
    resp = requests.post(f"{base}/identity/v3/auth/tokens", timeout=30, json={"auth": {
        "identity": {"methods": ["password"], "password": {"user": {"name": user, "password": password}}},
        "scope": {"project": {"name": project}}}})
    assert resp.status_code == 201, resp.text
    return resp.headers["X-Subject-Token"]


def _config(base: Path, port: int, **groups: dict[str, Any]) -> Path:
    return write_config(base / "corral.conf", {
        "DEFAULT": {"host": "proc-host", "compute_driver": "fake.FakeDriver"},
        "placement": {"local_port": port},
        "compute": {"poll_interval": 0.2},
        "identity": {"password_hash_rounds": 8},
        **groups,
    })


# ---------------------------------------------------------------- isolation


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[CorralProcess, str]]:
    base = tmp_path_factory.mktemp("isolation")
    data_dir = base / "state"
    data_dir.mkdir()
    port = free_port()
    process = CorralProcess(_config(base, port), data_dir, port=port).start(wait_path="/identity/v3")
    try:
        yield process, _admin_password(data_dir)
    finally:
        process.stop()


def _member_of(base: str, admin: dict[str, str], user: str, project: str) -> str:
    identity = f"{base}/identity/v3"
    project_id = requests.post(f"{identity}/projects", headers=admin, timeout=30,
                               json={"project": {"name": project}}).json()["project"]["id"]
    user_id = requests.post(f"{identity}/users", headers=admin, timeout=30,
                            json={"user": {"name": user, "password": "pw"}}).json()["user"]["id"]
    roles = requests.get(f"{identity}/roles", headers=admin, timeout=30, params={"name": "member"}).json()["roles"]
    grant = requests.put(f"{identity}/projects/{project_id}/users/{user_id}/roles/{roles[0]['id']}", headers=admin,
                         timeout=30)
    assert grant.status_code == 204
    return project_id


@pytest.mark.backends("first")
def test_a_member_sees_only_its_project_and_is_refused_admin_operations(
        backend: str, server: tuple[CorralProcess, str]) -> None:
    process, password = server
    base = process.url
    admin = {"X-Auth-Token": _token(base, "admin", password, "admin")}
    flavor = {"flavor": {"name": "tiny", "ram": 128, "vcpus": 1, "disk": 1, "id": "1"}}
    assert requests.post(f"{base}/compute/v2.1/flavors", json=flavor, headers={**admin, **COMPUTE},
                         timeout=30).status_code == 200
    project_a = _member_of(base, admin, "alice", "project-a")
    project_b = _member_of(base, admin, "bob", "project-b")
    alice = {"X-Auth-Token": _token(base, "alice", "pw", "project-a"), **COMPUTE}
    bob = {"X-Auth-Token": _token(base, "bob", "pw", "project-b"), **COMPUTE}
    wait_for_compute_host(base, admin["X-Auth-Token"])

    image = active_image(f"{base}/image", admin, visibility="public", name="cirros")
    body = {"server": {"name": "a-vm", "flavorRef": "1", "imageRef": image["id"], "networks": "none"}}
    created = requests.post(f"{base}/compute/v2.1/servers", json=body, headers=alice, timeout=30)
    assert created.status_code == 202, created.text
    server_id = created.json()["server"]["id"]
    deadline = time.monotonic() + 60
    status = "BUILD"
    while status == "BUILD" and time.monotonic() < deadline:
        status = requests.get(f"{base}/compute/v2.1/servers/{server_id}", headers=alice, timeout=30).json()[
            "server"]["status"]
        time.sleep(0.2)
    assert status == "ACTIVE"
    # Servers: each project sees its own.
    assert [s["id"] for s in requests.get(f"{base}/compute/v2.1/servers", headers=alice,
                                          timeout=30).json()["servers"]] == [server_id]
    assert requests.get(f"{base}/compute/v2.1/servers", headers=bob, timeout=30).json()["servers"] == []
    assert requests.get(f"{base}/compute/v2.1/servers/{server_id}", headers=bob, timeout=30).status_code == 404
    assert requests.get(f"{base}/compute/v2.1/servers", headers=bob, params={"all_tenants": "1"},
                        timeout=30).status_code == 403
    assert requests.delete(f"{base}/compute/v2.1/servers/{server_id}", headers=bob, timeout=30).status_code == 404
    # Allocations and usages: the admin sees the claim; bob sees nothing of project A.
    placement = {"OpenStack-API-Version": "placement 1.39"}
    claim = requests.get(f"{base}/placement/allocations/{server_id}", headers={**admin, **placement}, timeout=30)
    assert claim.status_code == 200 and claim.json()["project_id"] == project_a
    assert requests.get(f"{base}/placement/allocations/{server_id}", headers={**bob, **placement},
                        timeout=30).status_code == 403
    placement = {"OpenStack-API-Version": "placement 1.9"}
    own = requests.get(f"{base}/placement/usages", params={"project_id": project_a},
                       headers={**alice, **placement}, timeout=30)
    assert own.status_code == 200 and own.json()["usages"]["MEMORY_MB"] == 128
    assert requests.get(f"{base}/placement/usages", params={"project_id": project_a},
                        headers={**bob, **placement}, timeout=30).status_code == 403
    assert requests.get(f"{base}/placement/usages", params={"project_id": project_b},
                        headers={**bob, **placement}, timeout=30).json()["usages"] == {}
    # Operations for admins only.
    refused = [
        requests.post(f"{base}/compute/v2.1/flavors", json={"flavor": {**flavor["flavor"], "id": "2", "name": "x"}},
                      headers=bob, timeout=30),
        requests.get(f"{base}/compute/v2.1/os-services", headers=bob, timeout=30),
        requests.get(f"{base}/placement/resource_providers", headers={**bob, **placement}, timeout=30),
        requests.post(f"{base}/baremetal/v1/nodes", json={"driver": "fake-hardware"},
                      headers={"X-Auth-Token": bob["X-Auth-Token"]}, timeout=30),
        requests.get(f"{base}/identity/v3/users", headers=bob, timeout=30),
    ]
    assert [resp.status_code for resp in refused] == [403] * len(refused)


# --------------------------------------------------------------- revocation


@pytest.fixture
def processes(database_factory: DatabaseFactory, tmp_path: Path) -> Iterator[tuple[list[CorralProcess], str]]:
    """Two servers on one identity database: two gunicorn workers in one, an API-only process in the other."""
    data_dir = tmp_path / "state"
    data_dir.mkdir()
    port = free_port()
    config = _config(tmp_path, port, identity_database={"connection": database_factory.new_url("identity")})
    first = CorralProcess(config, data_dir, port=port, extra_args=["--workers", "2", "--migrate"])
    started = [first.start(wait_path="/identity/v3")]
    try:
        started.append(CorralProcess(config, data_dir, role="api", extra_args=["--no-migrate"]).start(
            wait_path="/identity/v3"))
        yield started, _admin_password(data_dir)
    finally:
        for process in started:
            process.stop()


def _answers(process: CorralProcess, token: str) -> set[int]:
    """Statuses of fresh-connection requests to each service (they land on every worker)."""
    statuses = set()
    for _round in range(4):
        for path, headers in (("/placement/resource_providers", {}), ("/baremetal/v1/nodes", {}),
                              ("/compute/v2.1/flavors", COMPUTE), ("/identity/v3/auth/projects", {})):
            statuses.add(requests.get(process.url + path, headers={"X-Auth-Token": token, **headers},
                                      timeout=30).status_code)
    return statuses


def test_a_revoked_token_is_refused_by_every_process_within_one_second(
        processes: tuple[list[CorralProcess], str]) -> None:
    servers, password = processes
    first, second = servers
    token = _token(first.url, "admin", password, "admin")
    kept = _token(second.url, "admin", password, "admin")
    for process in servers:
        assert _answers(process, token) == {200}
    revoked = requests.delete(f"{second.url}/identity/v3/auth/tokens", timeout=30,
                              headers={"X-Auth-Token": kept, "X-Subject-Token": token})
    assert revoked.status_code == 204
    time.sleep(1.0)
    for process in servers:
        assert _answers(process, token) == {401}
        assert _answers(process, kept) == {200}
