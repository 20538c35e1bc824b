"""``corral serve`` as a process: Compute boots a server through its own Placement."""

from __future__ import annotations

import concurrent.futures
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from tests.support.images import active_image
from tests.support.ports import free_port
from tests.support.process import CorralProcess, write_config

pytestmark = pytest.mark.slow

HEADERS = {"X-Auth-Token": "admin", "OpenStack-API-Version": "compute 2.69"}


def test_all_in_one_boots_through_placement(data_dir: Path, tmp_path: Path) -> None:
    port = free_port()
    config = write_config(tmp_path / "corral.conf", {
        "DEFAULT": {"host": "aio-host", "compute_driver": "fake.FakeDriver"},
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
        # Compute finds the image in the Image service of the same server.
        image = active_image(process.url + "/image", {"X-Auth-Token": "admin"}, name="cirros")
        body = {"server": {"name": "vm", "flavorRef": "1", "imageRef": image["id"], "networks": "none"}}
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
        assert server["image"]["id"] == image["id"]
        allocations = requests.get(f"{process.url}/placement/allocations/{server_id}",
                                   headers={"X-Auth-Token": "admin"}, timeout=30).json()["allocations"]
        assert len(allocations) == 1
        services = requests.get(compute + "/os-services", headers=HEADERS, timeout=30).json()["services"]
        assert [(s["host"], s["state"]) for s in services] == [("aio-host", "up")]
    finally:
        process.stop()


def test_a_fresh_serve_has_no_hypervisor_until_nodes_are_enrolled(data_dir: Path, tmp_path: Path) -> None:
    """The default ironic driver runs a compute service whose hypervisors are the bare metal nodes: none yet."""
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
        # A compute service registers itself before the server answers its first request.
        services = requests.get(compute + "/os-services", headers=HEADERS, timeout=30).json()["services"]
        assert [(s["host"], s["binary"], s["state"]) for s in services] == [("aio-host", "nova-compute", "up")]
        assert requests.get(compute + "/os-hypervisors", headers=HEADERS, timeout=30).json()["hypervisors"] == []
        flavor = {"flavor": {"name": "tiny", "ram": 256, "vcpus": 1, "disk": 1, "id": "1"}}
        assert requests.post(compute + "/flavors", json=flavor, headers=HEADERS, timeout=30).status_code == 200
        image = active_image(process.url + "/image", {"X-Auth-Token": "admin"}, name="cirros")
        body = {"server": {"name": "vm", "flavorRef": "1", "imageRef": image["id"], "networks": "none"}}
        resp = requests.post(compute + "/servers", json=body, headers=HEADERS, timeout=30)
        assert resp.status_code == 202, resp.text
        server = requests.get(f"{compute}/servers/{resp.json()['server']['id']}", headers=HEADERS, timeout=30)
        assert server.json()["server"]["status"] == "ERROR"
        assert server.json()["server"]["fault"]["message"].startswith("No valid host was found.")
        providers = requests.get(process.url + "/placement/resource_providers",
                                 headers={"X-Auth-Token": "admin"}, timeout=30).json()["resource_providers"]
        assert providers == []
    finally:
        process.stop()


def test_compute_role_without_a_driver_is_one_clear_error(data_dir: Path, tmp_path: Path) -> None:
    config = write_config(tmp_path / "corral.conf", {"DEFAULT": {"compute_driver": ""},
                                                     "api": {"auth_strategy": "noauth2"}})
    result = subprocess.run(
        [sys.executable, "-m", "corral", "serve", "--role", "compute", "--config-file", str(config),
         "--data-dir", str(data_dir)],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode != 0
    assert result.stderr.strip().splitlines()[-1] == (
        "Error: --role compute needs a virt driver: set [DEFAULT] compute_driver "
        "(ironic.IronicDriver or fake.FakeDriver)"
    )
    assert "Traceback" not in result.stderr


def test_more_boots_at_once_than_threads_all_succeed(data_dir: Path, tmp_path: Path) -> None:
    """Each boot calls Placement and the Image service of the same server: in the calling thread, so a
    server with two threads takes six boots at once (over the network each call would need a thread
    of its own, and none would be left)."""
    port = free_port()
    config = write_config(tmp_path / "corral.conf", {
        "DEFAULT": {"host": "aio-host", "compute_driver": "fake.FakeDriver"},
        "api": {"auth_strategy": "noauth2"},
        "compute": {"poll_interval": 0.2},
        "glance": {"request_timeout": 5, "num_retries": 0},
        "placement": {"request_timeout": 5},
    })
    process = CorralProcess(config, data_dir, port=port, extra_args=["--threads", "2"]).start(wait_path="/compute/")
    try:
        compute = process.url + "/compute/v2.1"
        flavor = {"flavor": {"name": "tiny", "ram": 64, "vcpus": 1, "disk": 1, "id": "1"}}
        assert requests.post(compute + "/flavors", json=flavor, headers=HEADERS, timeout=30).status_code == 200
        image = active_image(process.url + "/image", {"X-Auth-Token": "admin"}, name="cirros")
        deadline = time.monotonic() + 60
        while not requests.get(process.url + "/placement/resource_providers", headers={"X-Auth-Token": "admin"},
                               timeout=30).json()["resource_providers"] and time.monotonic() < deadline:
            time.sleep(0.2)

        def boot(index: int) -> requests.Response:
            body = {"server": {"name": f"vm-{index}", "flavorRef": "1", "imageRef": image["id"],
                               "networks": "none"}}
            return requests.post(compute + "/servers", json=body, headers=HEADERS, timeout=60)

        with concurrent.futures.ThreadPoolExecutor(6) as pool:
            answers = list(pool.map(boot, range(6)))
        assert [answer.status_code for answer in answers] == [202] * 6, [a.text for a in answers]
        assert ' "local" "GET /image/v2/images/' not in process.log()
        assert 'local "GET /image/v2/images/' in process.log()
    finally:
        process.stop()
