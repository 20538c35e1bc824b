"""A real PostgreSQL cell database taken away, and made to hang, behind a TCP proxy.

List, detail, show and service-list keep answering (minimal UNKNOWN
records, never a 500) while cell2 refuses connections or stops answering,
and show full records again once it is back.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from corral.core.db import normalize_url
from tests.compute.conftest import ComputeServer
from tests.support.databases import DatabaseFactory, server_unavailable_reason
from tests.support.tcp import TcpProxy

USER_A = "user-a:project-a"


@pytest.fixture(scope="module")
def pg_cloud(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ComputeServer, TcpProxy]]:
    reason = server_unavailable_reason("postgresql")
    if reason is not None:
        if os.environ.get("CORRAL_TEST_REQUIRE_BACKENDS") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    tmp = Path(tmp_path_factory.mktemp("pg-down"))
    sqlite = DatabaseFactory("sqlite", tmp)
    postgres = DatabaseFactory("postgresql", tmp)
    real = sa.engine.make_url(normalize_url(postgres.new_url("cell2")))
    proxy = TcpProxy(real.host or "127.0.0.1", real.port or 5432)
    proxied = real.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)
    server = ComputeServer(sqlite, str(tmp), cell_urls={"cell2": proxied})
    try:
        yield server, proxy
    finally:
        proxy.close()
        server.stop()
        postgres.cleanup()
        sqlite.cleanup()


@pytest.fixture
def booted(pg_cloud: tuple[ComputeServer, TcpProxy]) -> Iterator[tuple[ComputeServer, TcpProxy, dict[str, str]]]:
    cloud, proxy = pg_cloud
    proxy.restore()
    cloud.reset()
    cloud.setup_cloud()
    servers = {
        host: cloud.boot(token="admin:project-a", name=host, availability_zone=f"nova:{host}")
        for host in ("host-cell1", "host-cell2")
    }
    cloud.run_computes()
    yield cloud, proxy, servers
    proxy.restore()


def _check_down_answers(cloud: ComputeServer, servers: dict[str, str]) -> None:
    client = cloud.client("2.69", token=USER_A)
    listed = client.get("/v2.1/servers")
    assert listed.status_code == 200
    assert listed.json()["servers"][0] == {
        "id": servers["host-cell2"], "status": "UNKNOWN", "links": listed.json()["servers"][0]["links"],
    }
    detail = client.get("/v2.1/servers/detail")
    assert detail.status_code == 200
    statuses = {s["id"]: s["status"] for s in detail.json()["servers"]}
    assert statuses == {servers["host-cell2"]: "UNKNOWN", servers["host-cell1"]: "ACTIVE"}
    shown = client.get(f"/v2.1/servers/{servers['host-cell2']}")
    assert shown.status_code == 200 and shown.json()["server"]["status"] == "UNKNOWN"
    services = cloud.client("2.69").get("/v2.1/os-services")
    assert services.status_code == 200
    assert {"binary": "nova-compute", "host": "host-cell2", "status": "UNKNOWN"} in services.json()["services"]


def _check_recovered(cloud: ComputeServer, servers: dict[str, str]) -> None:
    client = cloud.client("2.69", token=USER_A)
    detail = client.get("/v2.1/servers/detail").json()["servers"]
    assert {s["id"]: s["status"] for s in detail} == {servers["host-cell2"]: "ACTIVE", servers["host-cell1"]: "ACTIVE"}
    assert client.get(f"/v2.1/servers/{servers['host-cell2']}").json()["server"]["name"] == "host-cell2"
    services = cloud.client("2.69").get("/v2.1/os-services").json()["services"]
    assert all(s.get("state") == "up" for s in services)


def test_connection_refused_then_back(booted: tuple[ComputeServer, TcpProxy, dict[str, str]]) -> None:
    cloud, proxy, servers = booted
    _check_recovered(cloud, servers)
    proxy.refuse()
    _check_down_answers(cloud, servers)
    proxy.restore()
    _check_recovered(cloud, servers)


def test_hanging_database_then_back(booted: tuple[ComputeServer, TcpProxy, dict[str, str]]) -> None:
    cloud, proxy, servers = booted
    _check_recovered(cloud, servers)
    proxy.hang()
    _check_down_answers(cloud, servers)
    proxy.restore()
    _check_recovered(cloud, servers)
