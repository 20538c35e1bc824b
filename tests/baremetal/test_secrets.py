"""Secrets in nodes are masked in every answer and never logged.

BMC credentials in ``driver_info`` and instance secrets in
``instance_info`` read ``******`` for operators and node owners alike
(upstream's ``show_password`` and ``show_instance_secrets`` rules, by
default allowing nobody); the database keeps the real values.  An
operator's policy file can allow them.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from corral.baremetal.api.app import build_state, make_app
from corral.baremetal.conductor.service import ConductorService
from corral.baremetal.db import nodes as node_db
from corral.baremetal.db.schema import TREE
from corral.core import migrations
from corral.core.db import create_engine
from corral.core.server import ThreadedServer
from tests.baremetal.conftest import make_test_conf
from tests.support.databases import DatabaseFactory
from tests.support.http import ApiClient

BMC_PASSWORD = "bmc-Pa55-redfish-7781"
IPMI_PASSWORD = "ipmi-Pa55-0042"
NESTED_TOKEN = "nested-token-9911"
CONFIGDRIVE = "configdrive-contents-5533"
IMAGE_URL = "https://swift.example/v1/image?temp_url_sig=sig-4407"

DRIVER_INFO = {
    "redfish_address": "https://bmc.example",
    "redfish_username": "root",
    "redfish_password": BMC_PASSWORD,
    "ipmi_password": IPMI_PASSWORD,
    "extra_settings": {"auth_token": NESTED_TOKEN, "port": 623},
}
MASKED_DRIVER_INFO = {
    "redfish_address": "https://bmc.example",
    "redfish_username": "root",
    "redfish_password": "******",
    "ipmi_password": "******",
    "extra_settings": {"auth_token": "******", "port": 623},
}
INSTANCE_INFO = {"configdrive": CONFIGDRIVE, "image_url": IMAGE_URL, "root_gb": 10}
MASKED_INSTANCE_INFO = {"configdrive": "******", "image_url": "******", "root_gb": 10}
SECRETS = (BMC_PASSWORD, IPMI_PASSWORD, NESTED_TOKEN, CONFIGDRIVE, "sig-4407")


def _assert_no_secret(text: str) -> None:
    for secret in SECRETS:
        assert secret not in text


def test_secrets_masked_in_every_answer_and_log(baremetal: Any, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    admin = baremetal.client()
    created = admin.post("/v1/nodes", json={"driver": "fake-hardware", "name": "secret-node", "owner": "p1",
                                            "driver_info": DRIVER_INFO, "instance_info": INSTANCE_INFO})
    assert created.status_code == 201, created.text
    assert created.json()["driver_info"] == MASKED_DRIVER_INFO
    assert created.json()["instance_info"] == MASKED_INSTANCE_INFO
    _assert_no_secret(created.text)
    uuid = created.json()["uuid"]

    patched = admin.patch(f"/v1/nodes/{uuid}", json=[
        {"op": "add", "path": "/driver_info/ipmi_password", "value": IPMI_PASSWORD},
        {"op": "add", "path": "/driver_info/ipmi_username", "value": "admin"},
    ])
    assert patched.status_code == 200, patched.text
    assert patched.json()["driver_info"]["ipmi_password"] == "******"
    assert patched.json()["driver_info"]["ipmi_username"] == "admin"
    _assert_no_secret(patched.text)

    owner = baremetal.client(token="alice:p1")
    for client in (admin, owner):
        answers = [
            client.get(f"/v1/nodes/{uuid}"),
            client.get(f"/v1/nodes/{uuid}?fields=driver_info,instance_info"),
            client.get("/v1/nodes/detail"),
            client.get("/v1/nodes?detail=true"),
            client.get("/v1/nodes?fields=uuid,driver_info,instance_info"),
        ]
        for answer in answers:
            assert answer.status_code == 200, answer.text
            _assert_no_secret(answer.text)
        assert answers[0].json()["driver_info"] == {**MASKED_DRIVER_INFO, "ipmi_username": "admin"}
        assert answers[1].json()["instance_info"] == MASKED_INSTANCE_INFO
        listed = answers[4].json()["nodes"][0]
        assert listed["driver_info"]["redfish_password"] == "******"
        assert listed["instance_info"]["configdrive"] == "******"

    # The node keeps the real values: only answers are masked.
    with baremetal.state.db.read() as conn:
        stored = node_db.get(conn, uuid=uuid)
    assert stored["driver_info"]["redfish_password"] == BMC_PASSWORD
    assert stored["driver_info"]["ipmi_password"] == IPMI_PASSWORD
    assert stored["instance_info"]["configdrive"] == CONFIGDRIVE

    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert '"POST /v1/nodes HTTP/1.1" 201' in logged  # the server logged the requests
    _assert_no_secret(logged)


@pytest.fixture
def permissive(backend: str, database_factory: DatabaseFactory, tmp_path: Path) -> Iterator[ApiClient]:
    """A Bare Metal API whose policy file lets admins read secrets back."""
    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text('"show_password": "role:admin"\n"show_instance_secrets": "role:admin"\n')
    url = database_factory.new_url("bmsecrets")
    engine = create_engine(url)
    migrations.upgrade(engine, TREE)
    engine.dispose()
    conf = make_test_conf(str(tmp_path), url, oslo_policy={"policy_file": str(policy_file)},
                          DEFAULT={"host": "permissive-conductor"})
    state = build_state(conf)
    conductor = ConductorService(conf, rpc_server=False, db=state.db).start()
    server = ThreadedServer(make_app(conf, state)).start()
    try:
        yield ApiClient(server.url, {"X-Auth-Token": "admin", "X-OpenStack-Ironic-API-Version": "latest"})
    finally:
        server.stop()
        conductor.stop()
        state.rpc.close()
        state.db.dispose()


def test_policy_can_show_secrets_to_operators(permissive: ApiClient) -> None:
    created = permissive.post("/v1/nodes", json={"driver": "fake-hardware", "driver_info": DRIVER_INFO,
                                                 "instance_info": INSTANCE_INFO, "owner": "p1"})
    assert created.status_code == 201, created.text
    shown = permissive.get(f"/v1/nodes/{created.json()['uuid']}").json()
    assert shown["driver_info"] == DRIVER_INFO
    assert shown["instance_info"] == INSTANCE_INFO
    assert permissive.get("/v1/nodes/detail").json()["nodes"][0]["driver_info"] == DRIVER_INFO
    # The owner's member is no admin: still masked.
    member = permissive.with_headers(X_Auth_Token="alice:p1")
    assert member.get("/v1/nodes/detail").json()["nodes"][0]["driver_info"] == MASKED_DRIVER_INFO
