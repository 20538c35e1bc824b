"""``auth_strategy = keystone``: Corral behind keystonemiddleware, as the README describes.

The "external Keystone" here is another Corral's identity service: the
second server trusts tokens only through keystonemiddleware (``GET
/v3/auth/tokens`` on the first), and its Compute reaches Placement with
keystoneauth options in ``[placement]``.  A client with a token from the
first server uses every service of the second.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
import yaml

from tests.identity.conftest import wait_for_compute_host
from tests.support.images import active_image
from tests.support.ports import free_port
from tests.support.process import CorralProcess, write_config

pytestmark = [pytest.mark.slow, pytest.mark.backends("first")]


@pytest.fixture
def two_servers(backend: str, tmp_path: Path) -> Iterator[tuple[CorralProcess, CorralProcess, str]]:
    keystone_dir, corral_dir = tmp_path / "keystone", tmp_path / "corral"
    keystone_dir.mkdir()
    corral_dir.mkdir()
    keystone = CorralProcess(write_config(tmp_path / "keystone.conf", {"identity": {"password_hash_rounds": 8}}),
                             keystone_dir).start(wait_path="/identity/v3")
    started = [keystone]
    try:
        auth = yaml.safe_load((keystone_dir / "clouds.yaml").read_text())["clouds"]["corral"]["auth"]
        credentials = {
            "auth_type": "password", "auth_url": keystone.url + "/identity/v3", "username": "admin",
            "password": auth["password"], "project_name": "admin", "user_domain_name": "Default",
            "project_domain_name": "Default",
        }
        port = free_port()
        config = write_config(tmp_path / "corral.conf", {
            "DEFAULT": {"host": "kshost", "compute_driver": "fake.FakeDriver"},
            "api": {"auth_strategy": "keystone"},
            "keystone_authtoken": {"www_authenticate_uri": keystone.url + "/identity/v3", **credentials},
            "placement": {"local_port": port, **credentials},
            "compute": {"poll_interval": 0.2},
        })
        corral = CorralProcess(config, corral_dir, port=port).start(wait_path="/compute/")
        started.append(corral)
        yield keystone, corral, auth["password"]
    finally:
        for process in started:
            process.stop()


def test_services_trust_an_external_keystone(two_servers: tuple[CorralProcess, CorralProcess, str]) -> None:
    keystone, corral, password = two_servers
    assert not (Path(corral.log_path).parent / "clouds.yaml").exists()  # no admin of its own
    resp = requests.post(f"{keystone.url}/identity/v3/auth/tokens", timeout=30, json={"auth": {
        "identity": {"methods": ["password"], "password": {"user": {"name": "admin", "password": password}}},
        "scope": {"project": {"name": "admin"}}}})
    token = resp.headers["X-Subject-Token"]
    headers = {"X-Auth-Token": token, "OpenStack-API-Version": "compute 2.69"}
    refused = requests.get(f"{corral.url}/placement/resource_providers", timeout=30,
                           headers={"X-Auth-Token": "not-a-token"})
    assert refused.status_code == 401
    flavor = {"flavor": {"name": "tiny", "ram": 128, "vcpus": 1, "disk": 1, "id": "1"}}
    assert requests.post(f"{corral.url}/compute/v2.1/flavors", json=flavor, headers=headers,
                         timeout=30).status_code == 200
    # Compute reports its host to Placement with its keystoneauth credentials.
    wait_for_compute_host(corral.url, token)
    providers = requests.get(f"{corral.url}/placement/resource_providers", timeout=30,
                             headers={"X-Auth-Token": token}).json()["resource_providers"]
    assert [provider["name"] for provider in providers] == ["kshost"]
    deadline = time.monotonic() + 60
    # Compute looks the image up with the client's token, which the Image service checks with Keystone too.
    image = active_image(f"{corral.url}/image", {"X-Auth-Token": token}, name="cirros")
    body = {"server": {"name": "vm", "flavorRef": "1", "imageRef": image["id"], "networks": "none"}}
    created = requests.post(f"{corral.url}/compute/v2.1/servers", json=body, headers=headers, timeout=30)
    assert created.status_code == 202, created.text
    server_id = created.json()["server"]["id"]
    status = "BUILD"
    while status == "BUILD" and time.monotonic() < deadline:
        status = requests.get(f"{corral.url}/compute/v2.1/servers/{server_id}", headers=headers,
                              timeout=30).json()["server"]["status"]
        time.sleep(0.2)
    assert status == "ACTIVE"
    nodes = requests.get(f"{corral.url}/baremetal/v1/nodes", headers={"X-Auth-Token": token}, timeout=30)
    assert nodes.status_code == 200 and nodes.json() == {"nodes": []}
