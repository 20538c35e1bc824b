"""The identity service over real HTTP on a real database, once per backend."""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from typing import Any

import pytest
import requests
import sqlalchemy as sa

from corral.core import config, migrations
from corral.core.db import create_engine, truncate_all
from corral.core.server import ThreadedServer
from corral.identity import bootstrap, keys
from corral.identity.api.app import build_state, make_app
from corral.identity.db.schema import TREE
from corral.identity.db.tables import metadata, revocation_versions
from tests.support.databases import DatabaseFactory
from tests.support.http import ApiClient

ADMIN_PASSWORD = "secret-admin-password"


def identity_conf(state_path: str, url_db: str, **groups: dict[str, Any]) -> Any:
    overrides: dict[str, dict[str, Any]] = {
        "identity_database": {"connection": url_db},
        # Cheap hashes: the tests are about behaviour, not hashing cost.
        "identity": {"password_hash_rounds": 4},
        "corral_database": {"max_pool_size": 2, "max_overflow": 6},
    }
    for group, values in groups.items():
        overrides.setdefault(group, {}).update(values)
    return config.make_conf(state_path=state_path, overrides=overrides)


class IdentityServer:
    def __init__(self, database_factory: DatabaseFactory, tmp_dir: str) -> None:
        self.url_db = database_factory.new_url("identity")
        self.conf = identity_conf(tmp_dir, self.url_db)
        engine = create_engine(self.url_db)
        migrations.upgrade(engine, TREE)
        engine.dispose()
        keys.setup(f"{tmp_dir}/fernet-keys")
        self.state = build_state(self.conf)
        self.app = make_app(self.conf, self.state)
        self.server = ThreadedServer(self.app).start()
        self.url = self.server.url
        self.admin_id = ""
        self.admin_project_id = ""

    def reset(self) -> None:
        """Empty every table, then bootstrap again (admin / ADMIN_PASSWORD)."""
        truncate_all(self.state.db, metadata)
        self.state.db.write(lambda conn: conn.execute(
            sa.insert(revocation_versions).values(id=1, version=secrets.token_hex(16))))
        result = bootstrap.bootstrap(self.state.db, self.state.hasher, password=ADMIN_PASSWORD)
        self.admin_id, self.admin_project_id = result.user_id, result.project_id

    def client(self, token: str | None = None) -> ApiClient:
        return ApiClient(self.url + "/v3", {"X-Auth-Token": token} if token else {})

    def issue(self, username: str = "admin", password: str = ADMIN_PASSWORD, scope: Any = "admin",
              **extra: Any) -> tuple[str, dict[str, Any]]:
        """A token (and its body): ``scope`` a project name, ``"system"``, ``"unscoped"``, a dict, or None."""
        body = password_auth(username, password, scope)
        resp = self.client().post("/auth/tokens", json=body, **extra)
        assert resp.status_code == 201, resp.text
        return resp.headers["X-Subject-Token"], resp.json()["token"]

    def admin(self) -> ApiClient:
        return self.client(self.issue()[0])

    def stop(self) -> None:
        self.server.stop()
        self.state.db.dispose()


def password_auth(username: str, password: str, scope: Any = None, domain: str = "default") -> dict[str, Any]:
    auth: dict[str, Any] = {"identity": {"methods": ["password"], "password": {
        "user": {"name": username, "domain": {"id": domain}, "password": password}}}}
    if scope == "system":
        auth["scope"] = {"system": {"all": True}}
    elif scope == "unscoped":
        auth["scope"] = "unscoped"
    elif isinstance(scope, str):
        auth["scope"] = {"project": {"name": scope, "domain": {"id": domain}}}
    elif scope is not None:
        auth["scope"] = scope
    return {"auth": auth}


def wait_for_compute_host(base: str, token: str) -> None:
    """Until the compute service has reported its host and the host's inventory to Placement."""
    headers = {"X-Auth-Token": token}
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        providers = requests.get(f"{base}/placement/resource_providers", headers=headers,
                                 timeout=30).json()["resource_providers"]
        if providers:
            inventory = requests.get(f"{base}/placement/resource_providers/{providers[0]['uuid']}/inventories",
                                     headers=headers, timeout=30).json()["inventories"]
            if "MEMORY_MB" in inventory:
                return
        time.sleep(0.2)
    raise AssertionError("the compute host was not reported to Placement")


@pytest.fixture(scope="session")
def identity_server(database_factory: DatabaseFactory,
                    tmp_path_factory: pytest.TempPathFactory) -> Iterator[IdentityServer]:
    server = IdentityServer(database_factory, str(tmp_path_factory.mktemp("identity")))
    yield server
    server.stop()


@pytest.fixture
def identity(identity_server: IdentityServer) -> IdentityServer:
    identity_server.reset()
    return identity_server
