"""What looking the image up in the Image service adds to a boot.

``corral serve`` (one worker, fake compute driver sized for thousands of
servers, ``[api] auth_strategy`` as ``--auth`` says: ``corral`` tokens by
default) boots ``--boots`` servers from an image (``imageRef``: Compute
asks ``GET /image/v2/images/{id}`` with the caller's token) and as many
from a block device mapping of the same image (no lookup), taking turns,
each ``POST /compute/v2.1/servers`` timed by the client over one kept-alive
connection. It also times the lookup itself (``GET /image/v2/images/{id}``
with the same token, as Compute sends it).

    python benchmarks/compute_boot_image.py [--boots 200] [--auth corral|noauth2]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import requests
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import KeptAliveClient, percentile, scratch_dir, start_corral  # noqa: E402


def _token(url: str, data_dir: Path, auth: str) -> tuple[str, str]:
    """(token, project id) of the admin."""
    if auth == "noauth2":
        return "admin:bench", "bench"
    password = yaml.safe_load((data_dir / "clouds.yaml").read_text())["clouds"]["corral"]["auth"]["password"]
    response = requests.post(f"{url}/identity/v3/auth/tokens", timeout=30, json={"auth": {
        "identity": {"methods": ["password"], "password": {"user": {
            "name": "admin", "domain": {"id": "default"}, "password": password}}},
        "scope": {"project": {"name": "admin", "domain": {"id": "default"}}}}})
    response.raise_for_status()
    return response.headers["X-Subject-Token"], response.json()["token"]["project"]["id"]


def _prepare(url: str, token: str, project: str) -> str:
    headers = {"X-Auth-Token": token, "OpenStack-API-Version": "compute 2.73"}
    compute = f"{url}/compute/v2.1"
    flavor = {"flavor": {"name": "bench", "ram": 64, "vcpus": 1, "disk": 1, "id": "bench"}}
    requests.post(f"{compute}/flavors", json=flavor, headers=headers, timeout=30).raise_for_status()
    unlimited = {"quota_set": {"instances": -1, "cores": -1, "ram": -1}}
    requests.put(f"{compute}/os-quota-sets/{project}", json=unlimited, headers=headers, timeout=30).raise_for_status()
    image = requests.post(f"{url}/image/v2/images", headers={"X-Auth-Token": token}, timeout=30, json={
        "name": "bench", "disk_format": "raw", "container_format": "bare"})
    image.raise_for_status()
    image_id = image.json()["id"]
    requests.put(f"{url}/image/v2/images/{image_id}/file", data=b"\0" * 4096, timeout=30, headers={
        "X-Auth-Token": token, "Content-Type": "application/octet-stream"}).raise_for_status()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        providers = requests.get(f"{url}/placement/resource_providers", headers={"X-Auth-Token": token},
                                 timeout=30).json()["resource_providers"]
        if providers:
            inventory = requests.get(f"{url}/placement/resource_providers/{providers[0]['uuid']}/inventories",
                                     headers={"X-Auth-Token": token}, timeout=30).json()["inventories"]
            if "MEMORY_MB" in inventory:
                return image_id
        time.sleep(0.2)
    raise RuntimeError("the compute host was not reported to Placement")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--boots", type=int, default=200, help="boots of each kind")
    parser.add_argument("--auth", choices=["corral", "noauth2"], default="corral")
    args = parser.parse_args()
    with scratch_dir("corral-boot-image-") as workdir:
        sections = {
            "DEFAULT": {"host": "bench-host", "compute_driver": "fake.FakeDriver"},
            "fake_driver": {"vcpus": 100000, "memory_mb": 100000000, "local_gb": 1000000},
            "compute": {"poll_interval": 1.0},
        }
        if args.auth == "noauth2":
            sections["api"] = {"auth_strategy": "noauth2"}
        server = start_corral(workdir, sections, workers=1, threads=16, ready_path="/identity/v3")
        try:
            token, project = _token(server.url, workdir / "data", args.auth)
            image_id = _prepare(server.url, token, project)
            headers = {"X-Auth-Token": token, "OpenStack-API-Version": "compute 2.73",
                       "Content-Type": "application/json"}
            compute = KeptAliveClient(server.url + "/compute/v2.1", headers)
            image = KeptAliveClient(server.url + "/image", {"X-Auth-Token": token, "Accept": "application/json"})
            bodies = {
                "imageRef (looked up)": {"imageRef": image_id},
                "block device mapping (not looked up)": {"imageRef": "", "block_device_mapping_v2": [{
                    "boot_index": 0, "uuid": image_id, "source_type": "image", "destination_type": "local"}]},
            }
            times: dict[str, list[float]] = {name: [] for name in bodies}
            times["GET /image/v2/images/{id}"] = []
            for round_ in range(args.boots + 5):
                for name, extra in bodies.items():
                    body = json.dumps({"server": {"name": f"vm-{round_}", "flavorRef": "bench", "networks": "none",
                                                  **extra}}).encode()
                    status, answer, seconds = compute.request("POST", "/servers", body)
                    if status != 202:
                        raise RuntimeError(f"boot answered {status}: {answer[:300]!r}")
                    if round_ >= 5:  # the first rounds warm up
                        times[name].append(seconds)
                status, answer, seconds = image.get(f"/v2/images/{image_id}")
                if status != 200:
                    raise RuntimeError(f"image show answered {status}: {answer[:300]!r}")
                if round_ >= 5:
                    times["GET /image/v2/images/{id}"].append(seconds)
            compute.close()
            image.close()
        finally:
            server.stop()
    print(f"auth_strategy {args.auth}, {args.boots} boots of each kind, taking turns; one corral serve worker")
    print("| request | p50 | p95 |")
    print("| --- | ---: | ---: |")
    for name, values in times.items():
        print(f"| {name} | {percentile(values, 0.5) * 1000:.2f} ms | {percentile(values, 0.95) * 1000:.2f} ms |")


if __name__ == "__main__":
    main()
