"""The conductor's JSON-RPC server: HTTP basic auth, TLS, and no unauthenticated server on a network.

A ``corral serve --role conductor`` process serves JSON-RPC over TLS with
``[json_rpc] auth_strategy = http_basic``; calls without credentials or
with a wrong password are refused (401) and write nothing, while the API,
configured with the right credentials and the CA, changes nodes through
it.  The password appears in no log line.
"""

from __future__ import annotations

import datetime
import ipaddress
import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import bcrypt
import pytest
import requests
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from corral.baremetal.api.app import build_state, make_app
from corral.baremetal.conductor.jsonrpc import Client
from corral.baremetal.db import conductors as conductor_db
from corral.baremetal.db import nodes as node_db
from corral.baremetal.db.schema import TREE
from corral.core import config, migrations
from corral.core.db import create_engine
from corral.core.errors import InternalError
from corral.core.server import ThreadedServer
from tests.baremetal.support import wait_for
from tests.support.databases import DatabaseFactory
from tests.support.http import ApiClient
from tests.support.process import CorralProcess, write_config

RPC_USER = "api-caller"
RPC_PASSWORD = "rpc-Pa55word-2291"


def _self_signed(directory: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                       critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = directory / "rpc.crt", directory / "rpc.key"
    cert_file.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_file, key_file


def _sections(url: str, host: str, tmp: Path, cert_file: Path, key_file: Path, htpasswd: Path,
              password: str = RPC_PASSWORD) -> dict[str, dict[str, Any]]:
    return {
        "DEFAULT": {"host": host},
        "baremetal_database": {"connection": url},
        "api": {"auth_strategy": "noauth2"},
        "json_rpc": {"host_ip": "127.0.0.1", "port": 0, "auth_strategy": "http_basic",
                     "http_basic_auth_user_file": str(htpasswd), "use_ssl": True,
                     "http_basic_username": RPC_USER, "http_basic_password": password, "cafile": str(cert_file)},
        "ssl": {"cert_file": str(cert_file), "key_file": str(key_file)},
        "conductor": {"heartbeat_interval": 0.5, "sync_power_state_interval": 0,
                      "check_provision_state_interval": 0},
    }


class SecuredConductor:
    def __init__(self, url: str, tmp: Path) -> None:
        engine = create_engine(url)
        migrations.upgrade(engine, TREE)
        engine.dispose()
        self.cert_file, key_file = _self_signed(tmp)
        htpasswd = tmp / "htpasswd"
        htpasswd.write_text(f"{RPC_USER}:{bcrypt.hashpw(RPC_PASSWORD.encode(), bcrypt.gensalt(4)).decode()}\n")
        config_file = write_config(tmp / "conductor.conf",
                                   _sections(url, "rpc-conductor", tmp, self.cert_file, key_file, htpasswd))
        (tmp / "conductor").mkdir()
        self.process = CorralProcess(config_file, tmp / "conductor", role="conductor",
                                     extra_args=["--no-migrate"]).start()
        conf = config.make_conf(state_path=str(tmp),
                                overrides=_sections(url, "rpc-api", tmp, self.cert_file, key_file, htpasswd))
        self.state = build_state(conf)
        self.server = ThreadedServer(make_app(conf, self.state)).start()
        self.client = ApiClient(self.server.url, {"X-Auth-Token": "admin",
                                                  "X-OpenStack-Ironic-API-Version": "latest"})
        try:
            self.rpc_address = wait_for(self._address, timeout=60)
        except BaseException:
            self.stop()
            raise

    def _address(self) -> str | None:
        with self.state.db.read() as conn:
            row = conductor_db.get(conn, "rpc-conductor")
        return row["rpc_address"] if row and row["online"] else None

    def node(self, uuid: str) -> dict[str, Any]:
        with self.state.db.read() as conn:
            node = node_db.get(conn, uuid=uuid)
        assert node is not None
        return node

    def stop(self) -> None:
        self.server.stop()
        self.process.stop()
        self.state.rpc.close()
        self.state.db.dispose()


@pytest.fixture
def secured(backend: str, database_factory: DatabaseFactory, tmp_path: Path) -> Iterator[SecuredConductor]:
    running = SecuredConductor(database_factory.new_url("bmrpc"), tmp_path)
    try:
        yield running
    finally:
        running.stop()


def _call(address: str, cafile: Path, node_id: int, **kwargs: Any) -> requests.Response:
    body = {"jsonrpc": "2.0", "method": "update_node", "id": 1,
            "params": {"node_id": node_id, "values": {"name": "written-by-stranger"}}}
    return requests.post(address, json=body, verify=str(cafile), timeout=30, **kwargs)


def test_json_rpc_needs_credentials_and_tls(secured: SecuredConductor, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    assert secured.rpc_address.startswith("https://127.0.0.1:")
    created = secured.client.post("/v1/nodes", json={"driver": "fake-hardware", "name": "guarded"})
    assert created.status_code == 201, created.text
    uuid = created.json()["uuid"]
    node_id = secured.node(uuid)["id"]

    for auth in (None, (RPC_USER, "wrong-password"), ("someone-else", RPC_PASSWORD)):
        refused = _call(secured.rpc_address, secured.cert_file, node_id, auth=auth)
        assert refused.status_code == 401, refused.text
        assert refused.headers["WWW-Authenticate"].startswith("Basic")
        assert "result" not in refused.json()
    assert secured.node(uuid)["name"] == "guarded"

    # An API with the wrong password reports a server-side mistake, never the password.
    wrong = Client(10, username=RPC_USER, password="not-" + RPC_PASSWORD, verify=str(secured.cert_file))
    try:
        with pytest.raises(InternalError) as refused_error:
            wrong.call(secured.rpc_address, "update_node", node_id=node_id, values={"name": "nope"})
    finally:
        wrong.close()
    assert "refused this service's JSON-RPC credentials" in refused_error.value.message
    assert RPC_PASSWORD not in refused_error.value.message
    assert secured.node(uuid)["name"] == "guarded"

    # Plain HTTP is not served at all.
    with pytest.raises(requests.ConnectionError):
        requests.post(secured.rpc_address.replace("https://", "http://"), json={}, timeout=10,
                      auth=(RPC_USER, RPC_PASSWORD))

    # The API, with the right credentials and CA, works through the conductor.
    patched = secured.client.patch(f"/v1/nodes/{uuid}", json=[{"op": "replace", "path": "/name", "value": "renamed"}])
    assert patched.status_code == 200, patched.text
    assert secured.node(uuid)["name"] == "renamed"
    assert secured.client.put(f"/v1/nodes/{uuid}/states/provision", json={"target": "manage"}).status_code == 202
    wait_for(lambda: secured.node(uuid)["provision_state"] == "manageable", timeout=30)

    logged = "\n".join(record.getMessage() for record in caplog.records) + secured.process.log()
    assert "rpc-conductor" in secured.process.log()
    assert RPC_PASSWORD not in logged


def _serve(tmp: Path, sections: dict[str, dict[str, Any]]) -> subprocess.CompletedProcess[str]:
    config_file = write_config(tmp / "refused.conf", sections)
    return subprocess.run(
        [sys.executable, "-m", "corral", "serve", "--role", "conductor", "--config-file", str(config_file),
         "--data-dir", str(tmp / "data")],
        capture_output=True, text=True, timeout=120, check=False,
    )


def test_conductor_refuses_unauthenticated_json_rpc_on_a_network(tmp_path: Path) -> None:
    result = _serve(tmp_path, {"json_rpc": {"host_ip": "0.0.0.0", "port": 0}})
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert "refusing to serve JSON-RPC without authentication on 0.0.0.0" in lines[0]
    assert "auth_strategy = http_basic" in lines[0]


def test_api_needs_json_rpc_credentials_for_http_basic(tmp_path: Path) -> None:
    config_file = write_config(tmp_path / "api.conf", {"json_rpc": {"auth_strategy": "http_basic"}})
    result = subprocess.run(
        [sys.executable, "-m", "corral", "serve", "--role", "api", "--config-file", str(config_file),
         "--data-dir", str(tmp_path / "data"), "--port", "1"],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert result.returncode != 0
    assert "needs http_basic_username and http_basic_password" in result.stderr, result.stderr
