"""``corral identity ...`` on a real database, checked through the identity API."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner, Result

from corral.cli import main
from corral.core.server import ThreadedServer
from corral.identity.api.app import build_state, make_app
from tests.identity.conftest import password_auth
from tests.support.databases import DatabaseFactory
from tests.support.http import ApiClient
from tests.support.process import write_config


class Cli:
    def __init__(self, database_factory: DatabaseFactory, tmp_path: Path) -> None:
        self.url = database_factory.new_url("identity")
        self.data_dir = tmp_path / "state"
        self.config = write_config(tmp_path / "corral.conf", {
            "identity_database": {"connection": self.url},
            "identity": {"password_hash_rounds": 4},
        })

    def run(self, *args: str) -> Result:
        result = CliRunner().invoke(main, [*args, "--config-file", str(self.config), "--data-dir", str(self.data_dir)])
        assert result.exit_code == 0, result.output
        return result

    def fails(self, *args: str) -> Result:
        result = CliRunner().invoke(main, [*args, "--config-file", str(self.config), "--data-dir", str(self.data_dir)])
        assert result.exit_code != 0
        return result


@pytest.fixture
def cli(database_factory: DatabaseFactory, tmp_path: Path) -> Cli:
    return Cli(database_factory, tmp_path)


def _serve(cli: Cli):  # noqa: ANN202 - test helper
    from corral.core import config

    conf = config.make_conf([str(cli.config)], state_path=str(cli.data_dir))
    state = build_state(conf)
    return state, ThreadedServer(make_app(conf, state)).start()


def _login(server: ThreadedServer, user: str, password: str, scope: object) -> int:
    resp = ApiClient(server.url + "/v3").post("/auth/tokens", json=password_auth(user, password, scope))
    return resp.status_code


def test_bootstrap_users_projects_roles_and_passwords(cli: Cli, tmp_path: Path) -> None:
    unmigrated = cli.fails("identity", "bootstrap")
    assert "run 'corral db upgrade'" in unmigrated.output and "Traceback" not in unmigrated.output
    cli.run("db", "upgrade")
    clouds = tmp_path / "admin-clouds.yaml"
    first = cli.run("identity", "bootstrap", "--password", "adm1n-pw", "--clouds-yaml", str(clouds),
                    "--auth-url", "https://cloud.example.com/identity")
    assert "has role admin on project admin" in first.output and "adm1n-pw" not in first.output
    assert oct(clouds.stat().st_mode & 0o777) == "0o600"
    entry = yaml.safe_load(clouds.read_text())["clouds"]["corral"]["auth"]
    assert (entry["auth_url"], entry["password"]) == ("https://cloud.example.com/identity", "adm1n-pw")
    assert len(os.listdir(cli.data_dir / "fernet-keys")) == 2
    again = cli.run("identity", "bootstrap")  # idempotent, keeps the password
    assert "password:" not in again.output
    created = cli.run("identity", "user", "create", "bob")
    generated = re.search(r"^password: (\S+)$", created.output, flags=re.M)
    assert generated is not None
    cli.run("identity", "project", "create", "demo")
    cli.run("identity", "role", "add", "member", "--user", "bob", "--project", "demo")
    assert "no user" in cli.fails("identity", "role", "add", "member", "--user", "nobody", "--project", "demo").output
    state, server = _serve(cli)
    try:
        assert _login(server, "admin", "adm1n-pw", "admin") == 201
        assert _login(server, "admin", "adm1n-pw", "system") == 201
        assert _login(server, "bob", generated.group(1), "demo") == 201
        token = ApiClient(server.url + "/v3").post(
            "/auth/tokens", json=password_auth("bob", generated.group(1), "demo")).headers["X-Subject-Token"]
        cli.run("identity", "user", "password-reset", "bob", "--password", "new-pw")
        assert _login(server, "bob", generated.group(1), "demo") == 401
        assert _login(server, "bob", "new-pw", "demo") == 201
        # Tokens from before the reset are revoked.
        state.validator.revocations.expire()
        assert ApiClient(server.url + "/v3", {"X-Auth-Token": token}).get("/auth/projects").status_code == 401
        cli.run("identity", "role", "remove", "member", "--user", "bob", "--project", "demo")
        assert _login(server, "bob", "new-pw", "demo") == 401
    finally:
        server.stop()
        state.db.dispose()


def test_fernet_rotation_keeps_tokens_valid(cli: Cli) -> None:
    cli.run("db", "upgrade")
    cli.run("identity", "bootstrap", "--password", "pw")
    state, server = _serve(cli)
    try:
        client = ApiClient(server.url + "/v3")
        token = client.post("/auth/tokens", json=password_auth("admin", "pw", "admin")).headers["X-Subject-Token"]
        keys = cli.data_dir / "fernet-keys"
        assert sorted(os.listdir(keys)) == ["0", "1"]
        for _ in range(3):
            cli.run("identity", "fernet-rotate")
        # max_active_keys = 3: the staged key, the primary and one older key.
        assert sorted(os.listdir(keys)) == ["0", "3", "4"]
        after = ApiClient(server.url + "/v3", {"X-Auth-Token": token})
        # The token was made with key 1, now removed: refused once the process reads the keys again.
        state.keys.expire()
        assert after.get("/auth/projects").status_code == 401
        fresh = client.post("/auth/tokens", json=password_auth("admin", "pw", "admin")).headers["X-Subject-Token"]
        cli.run("identity", "fernet-rotate")
        state.keys.expire()
        assert ApiClient(server.url + "/v3", {"X-Auth-Token": fresh}).get("/auth/projects").status_code == 200
    finally:
        server.stop()
        state.db.dispose()


def test_serve_refuses_to_make_new_keys_for_a_database_in_use(cli: Cli, tmp_path: Path) -> None:
    import subprocess
    import sys

    from tests.support.ports import free_port

    cli.run("db", "upgrade")
    cli.run("identity", "bootstrap", "--password", "pw")
    other_host = tmp_path / "other-host"
    result = subprocess.run(
        [sys.executable, "-m", "corral", "serve", "--port", str(free_port()), "--config-file", str(cli.config),
         "--data-dir", str(other_host)],
        capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert f"there are no token keys in {other_host}/fernet-keys" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (other_host / "fernet-keys").exists()
