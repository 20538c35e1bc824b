"""JSON bodies sent with ``Transfer-Encoding: chunked`` to ``corral serve``, on every service."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from tests.support.process import CorralProcess, write_config

pytestmark = pytest.mark.slow

LIMIT = 4096


@pytest.fixture(scope="module")
def corral(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = Path(tmp_path_factory.mktemp("chunked"))
    (tmp / "data").mkdir()
    config = write_config(tmp / "corral.conf", {
        "api": {"auth_strategy": "noauth2", "max_request_body_size": LIMIT},
    })
    process = CorralProcess(config, tmp / "data").start()
    try:
        yield process.url
    finally:
        process.stop()


def _chunks(document: object, size: int = 7) -> Iterator[bytes]:
    data = json.dumps(document).encode()
    for start in range(0, len(data), size):
        yield data[start:start + size]


def _post_chunked(url: str, document: object, headers: dict[str, str]) -> requests.Response:
    # A generator body makes requests send it chunked, without a Content-Length.
    return requests.post(url, data=_chunks(document), timeout=30,
                         headers={"Content-Type": "application/json", **headers})


def test_placement_reads_a_chunked_body(corral: str) -> None:
    name = f"chunked-{uuid.uuid4().hex[:6]}"
    headers = {"X-Auth-Token": "admin", "OpenStack-API-Version": "placement 1.20"}
    response = _post_chunked(corral + "/placement/resource_providers", {"name": name}, headers)
    assert response.status_code == 200, response.text
    assert response.json()["name"] == name


def test_bare_metal_reads_a_chunked_body(corral: str) -> None:
    headers = {"X-Auth-Token": "admin", "X-OpenStack-Ironic-API-Version": "1.52"}
    body = {"driver": "fake-hardware", "name": f"chunked-{uuid.uuid4().hex[:6]}", "extra": {"k": "v" * 100}}
    response = _post_chunked(corral + "/baremetal/v1/nodes", body, headers)
    assert response.status_code == 201, response.text
    assert response.json()["extra"] == body["extra"]


def test_compute_reads_a_chunked_body(corral: str) -> None:
    headers = {"X-Auth-Token": "admin", "OpenStack-API-Version": "compute 2.69"}
    flavor = {"name": f"chunked-{uuid.uuid4().hex[:6]}", "ram": 256, "vcpus": 1, "disk": 1}
    response = _post_chunked(corral + "/compute/v2.1/flavors", {"flavor": flavor}, headers)
    assert response.status_code == 200, response.text
    assert response.json()["flavor"]["name"] == flavor["name"]


def test_a_chunked_body_over_the_limit_is_413_and_changes_nothing(corral: str) -> None:
    headers = {"X-Auth-Token": "admin", "OpenStack-API-Version": "placement 1.20"}
    name = f"big-{uuid.uuid4().hex[:6]}"
    # Valid JSON, just too long: without the limit it would be created.
    response = _post_chunked(corral + "/placement/resource_providers", {"name": name, "pad": " " * LIMIT}, headers)
    assert response.status_code == 413, response.text
    assert response.json()["errors"][0]["status"] == 413
    listed = requests.get(corral + f"/placement/resource_providers?name={name}", headers=headers, timeout=30)
    assert listed.json()["resource_providers"] == []


def test_nul_in_a_chunked_body_is_400_in_the_services_body(corral: str) -> None:
    headers = {"X-Auth-Token": "admin", "OpenStack-API-Version": "compute 2.69"}
    flavor = {"name": "a\x00b", "ram": 256, "vcpus": 1, "disk": 1}
    response = _post_chunked(corral + "/compute/v2.1/flavors", {"flavor": flavor}, headers)
    assert response.status_code == 400, response.text
    assert response.json()["badRequest"]["code"] == 400
