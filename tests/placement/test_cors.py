"""CORS through the [cors] options, as upstream Placement offers it."""

from __future__ import annotations

import pytest
import requests

from corral.core import config, migrations, wsgi
from corral.core.db import create_engine
from corral.core.server import ThreadedServer
from corral.placement.db.schema import TREE


@pytest.fixture
def cors_server(data_dir):
    url = "sqlite:///" + str(data_dir / "placement.sqlite")
    engine = create_engine(url)
    migrations.upgrade(engine, TREE)
    engine.dispose()
    conf = config.make_conf(
        state_path=str(data_dir),
        overrides={"cors": {"allowed_origin": ["http://valid.example.com"]}, "api": {"auth_strategy": "noauth2"}},
    )
    server = ThreadedServer(wsgi.service_app(conf, "placement")).start()
    yield server.url
    server.stop()


def test_preflight_and_simple_requests(cors_server) -> None:
    preflight = requests.options(
        cors_server + "/resource_providers",
        headers={"Origin": "http://valid.example.com", "Access-Control-Request-Method": "GET"},
        timeout=30,
    )
    assert preflight.status_code == 200
    assert preflight.headers["access-control-allow-origin"] == "http://valid.example.com"
    refused = requests.options(
        cors_server + "/resource_providers",
        headers={"Origin": "http://evil.example.com", "Access-Control-Request-Method": "GET"},
        timeout=30,
    )
    assert "access-control-allow-origin" not in refused.headers
    simple = requests.get(
        cors_server + "/resource_providers",
        headers={"Origin": "http://valid.example.com", "X-Auth-Token": "admin"},
        timeout=30,
    )
    assert simple.status_code == 200
    assert simple.headers["access-control-allow-origin"] == "http://valid.example.com"
