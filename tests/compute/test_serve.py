"""``corral serve`` as a process: Compute boots a server through its own Placement."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import requests

from corral.core.server import free_port
from tests.support.process import CorralProcess, write_config

pytestmark = pytest.mark.slow

HEADERS = {"X-Auth-Token": "admin", "OpenStack-API-Version": "compute 2.69"}


def test_all_in_one_boots_through_placement(data_dir: Path, tmp_path: Path) -> None:
    port = free_port()
    config = write_config(tmp_path / "corral.conf", {
        "DEFAULT": {"host": "aio-host"},
        "api": {"auth_strategy": "noauth2"},
        "placement": {"local_port": port},
        "compute": {"poll_interval": 0.2},
    })
    process = CorralProcess(config, data_dir, port=port).start(wait_path="/compute/")
    try:
        compute = process.url + "/compute/v2.1"
        flavor = {"flavor": {"name": "tiny", "ram": 256, "vcpus": 1, "disk": 1, "id": "1"}}
        assert requests.post(compute + "/flavors", json=flavor, headers=HEADERS, timeout=30).status_code == 200
        server = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            # The compute service reports its node to Placement in its first background pass.
            providers = requests.get(process.url + "/placement/resource_providers",
                                     headers={"X-Auth-Token": "admin"}, timeout=30).json()["resource_providers"]
            if providers:
                break
            time.sleep(0.2)
        body = {"server": {"name": "vm", "flavorRef": "1", "imageRef": "img", "networks": "none"}}
        resp = requests.post(compute + "/servers", json=body, headers=HEADERS, timeout=30)
        assert resp.status_code == 202, resp.text
        server_id = resp.json()["server"]["id"]
        while time.monotonic() < deadline:
            server = requests.get(f"{compute}/servers/{server_id}", headers=HEADERS, timeout=30).json()["server"]
            if server["status"] != "BUILD":
                break
            time.sleep(0.2)
        assert server is not None and server["status"] == "ACTIVE", server
        assert server["OS-EXT-SRV-ATTR:host"] == "aio-host"
        allocations = requests.get(f"{process.url}/placement/allocations/{server_id}",
                                   headers={"X-Auth-Token": "admin"}, timeout=30).json()["allocations"]
        assert len(allocations) == 1
        services = requests.get(compute + "/os-services", headers=HEADERS, timeout=30).json()["services"]
        assert [(s["host"], s["state"]) for s in services] == [("aio-host", "up")]
    finally:
        process.stop()
