"""How many round trips to its databases a request costs.

Between an API host and its database every round trip is paid in full
(200 ms on a slow link: docs/production-lab.md), so the common reads are
counted here, on the wire: each database is reached through a proxy
(tests/support/tcp.py) that counts the times the client spoke after the
server had answered.  Identity, Placement and Bare Metal are served
together, as on an API host, with tokens checked against the identity
database's revocation events.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import sqlalchemy as sa

from corral.baremetal.db import conductors as conductor_db
from corral.baremetal.db import nodes as node_db
from corral.baremetal.db.schema import TREE as BAREMETAL_TREE
from corral.core import config, health, migrations, wsgi
from corral.core.db import Database, create_engine
from corral.core.server import ThreadedServer
from corral.identity import bootstrap, keys
from corral.identity.db.schema import TREE as IDENTITY_TREE
from corral.identity.domain.passwords import PasswordHasher
from corral.placement.db.schema import TREE as PLACEMENT_TREE
from tests.support.databases import SERVER_URLS, DatabaseFactory
from tests.support.tcp import TcpProxy

SERVICES = ("identity", "placement", "baremetal")
TREES = {"identity": IDENTITY_TREE, "placement": PLACEMENT_TREE, "baremetal": BAREMETAL_TREE}
PASSWORD = "round-trip-admin-password"


class ApiHost:
    """The three services in this process, each database behind its own counting proxy."""

    def __init__(self, backend: str, database_factory: DatabaseFactory, tmp_path: Path) -> None:
        target = sa.engine.make_url(SERVER_URLS[backend])
        self.proxies: dict[str, TcpProxy] = {}
        sections: dict[str, dict[str, Any]] = {}
        for name in SERVICES:
            url = database_factory.new_url(name)
            engine = create_engine(url)
            migrations.upgrade(engine, TREES[name])
            engine.dispose()
            proxy = self.proxies[name] = TcpProxy(target.host or "127.0.0.1", target.port or 0)
            through = sa.engine.make_url(url).set(port=proxy.port).render_as_string(hide_password=False)
            sections[f"{name}_database"] = {"connection": through}
        self.conf = config.make_conf(state_path=str(tmp_path), services=list(SERVICES), overrides={
            **sections,
            "identity": {"password_hash_rounds": 4},
            # Every request reads the revocation events (by default at most twice a second).
            "token": {"revocation_check_interval": 0},
        })
        keys.setup(str(tmp_path / "fernet-keys"))
        self._seed(sections)
        self.server = ThreadedServer(wsgi.all_in_one(self.conf, list(SERVICES))).start()
        self.url = self.server.url
        answer = requests.post(f"{self.url}/identity/v3/auth/tokens", timeout=30, json={"auth": {
            "identity": {"methods": ["password"], "password": {"user": {
                "name": "admin", "domain": {"id": "default"}, "password": PASSWORD}}},
            "scope": {"project": {"name": "admin", "domain": {"id": "default"}}}}})
        assert answer.status_code == 201, answer.text
        self.headers = {"X-Auth-Token": answer.headers["X-Subject-Token"]}

    def _seed(self, sections: dict[str, dict[str, Any]]) -> None:
        identity = Database(create_engine(sections["identity_database"]["connection"]))
        baremetal = Database(create_engine(sections["baremetal_database"]["connection"]))
        try:
            bootstrap.bootstrap(identity, PasswordHasher("bcrypt", 4), password=PASSWORD)
            # A conductor with a fresh heartbeat (the API hosts' nodes map to it); none runs here.
            baremetal.write(lambda conn: conductor_db.register(
                conn, "cond1", drivers=["fake-hardware"], group="", rpc_address=None, interfaces=[]))
        finally:
            identity.dispose()
            baremetal.dispose()

    def set_traits(self, node_uuid: str, traits: list[str]) -> None:
        database = Database(create_engine(self.conf.baremetal_database.connection))
        try:
            database.write(lambda conn: node_db.set_traits(conn, node_db.get(conn, uuid=node_uuid)["id"], traits))
        finally:
            database.dispose()

    def call(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        headers = {**self.headers, **kwargs.pop("headers", {})}
        return requests.request(method, f"{self.url}{path}", headers=headers, timeout=30, **kwargs)

    def round_trips(self, method: str, path: str, **kwargs: Any) -> tuple[requests.Response, dict[str, int]]:
        """The answer, and the round trips to each database it cost."""
        before = {name: proxy.round_trips for name, proxy in self.proxies.items()}
        answer = self.call(method, path, **kwargs)
        return answer, {name: proxy.round_trips - before[name] for name, proxy in self.proxies.items()
                        if proxy.round_trips != before[name]}

    def stop(self) -> None:
        self.server.stop()
        for proxy in self.proxies.values():
            proxy.close()


@pytest.fixture
def api_host(backend: str, database_factory: DatabaseFactory, tmp_path: Path) -> Iterator[ApiHost]:
    host = ApiHost(backend, database_factory, tmp_path)
    yield host
    host.stop()


PLACEMENT = {"OpenStack-API-Version": "placement 1.39"}
BAREMETAL = {"X-OpenStack-Ironic-API-Version": "1.95"}

# Round trips per database: on PostgreSQL a read is its statements alone
# (autocommit); on MariaDB each read transaction adds its ROLLBACK.  The
# identity database's is the token check's read of the revocation events
# (here at every request; by default at most twice a second).
EXPECTED = {
    "postgresql": {
        # The node with its traits, chassis and allocation; the live conductors.
        "node": {"identity": 1, "baremetal": 2},
        "provider": {"identity": 1, "placement": 1},
        "providers": {"identity": 1, "placement": 1},
        "healthcheck": {"identity": 1, "placement": 1, "baremetal": 1},
    },
    "mysql": {
        "node": {"identity": 2, "baremetal": 4},
        "provider": {"identity": 2, "placement": 2},
        "providers": {"identity": 2, "placement": 2},
        "healthcheck": {"identity": 1, "placement": 1, "baremetal": 1},
    },
}


@pytest.mark.backends("postgresql", "mysql")
def test_common_requests_cost_one_or_two_round_trips_per_database(backend: str, api_host: ApiHost,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(health, "CACHE_SECONDS", 0.0)  # every /healthcheck runs its checks
    chassis = api_host.call("POST", "/baremetal/v1/chassis", json={}, headers=BAREMETAL)
    assert chassis.status_code == 201, chassis.text
    created = api_host.call("POST", "/baremetal/v1/nodes", headers=BAREMETAL, json={
        "driver": "fake-hardware", "name": "n1", "chassis_uuid": chassis.json()["uuid"]})
    assert created.status_code == 201, created.text
    node = created.json()["uuid"]
    # (Through the conductor, which does not run here.)
    api_host.set_traits(node, ["CUSTOM_B", "CUSTOM_A"])
    provider = api_host.call("POST", "/placement/resource_providers", json={"name": "p1"}, headers=PLACEMENT)
    assert provider.status_code == 200, provider.text
    paths = {
        "node": (f"/baremetal/v1/nodes/{node}", BAREMETAL),
        "provider": (f"/placement/resource_providers/{provider.json()['uuid']}", PLACEMENT),
        "providers": ("/placement/resource_providers", PLACEMENT),
        "healthcheck": ("/healthcheck", {}),
    }
    counted: dict[str, list[dict[str, int]]] = {name: [] for name in paths}
    for _ in range(3):
        for name, (path, headers) in paths.items():
            answer, trips = api_host.round_trips("GET", path, headers=headers)
            assert answer.status_code == 200, answer.text
            if name == "node":
                body = answer.json()
                assert (body["traits"], body["chassis_uuid"]) == (["CUSTOM_A", "CUSTOM_B"], chassis.json()["uuid"])
                assert body["conductor"] == "cond1"
            counted[name].append(trips)
    for name, expected in EXPECTED[backend].items():
        # Once per connection, psycopg prepares a statement it ran five times: one more round trip.
        usual = [trips for trips in counted[name] if trips == expected]
        assert len(usual) >= 2, f"{name}: {counted[name]}"
        assert all(sum(trips.values()) <= sum(expected.values()) + 1 for trips in counted[name]), counted[name]
