"""/servers/{id}/metadata and /servers/{id}/tags over HTTP; tags in server bodies, boots and list filters."""

from __future__ import annotations

from typing import Any

import pytest

from tests.compute.conftest import ComputeServer

USER_A = "user-a:project-a"
USER_B = "user-b:project-b"


@pytest.fixture
def server(cloud: ComputeServer) -> str:
    server_id = cloud.boot(metadata={"a": "1"})
    cloud.run_computes()
    return server_id


def _client(cloud: ComputeServer, version: str = "2.73", token: str = USER_A) -> Any:
    return cloud.client(version, token=token)


def test_metadata_list_show_merge_replace_delete(cloud: ComputeServer, server: str) -> None:
    client = _client(cloud)
    base = f"/v2.1/servers/{server}/metadata"
    assert client.get(base).json() == {"metadata": {"a": "1"}}
    merged = client.post(base, json={"metadata": {"b": "2", "a": "one"}})
    assert merged.status_code == 200 and merged.json() == {"metadata": {"a": "one", "b": "2"}}
    assert client.get(f"{base}/b").json() == {"meta": {"b": "2"}}
    one = client.put(f"{base}/c", json={"meta": {"c": "3"}})
    assert one.status_code == 200 and one.json() == {"meta": {"c": "3"}}
    mismatch = client.put(f"{base}/c", json={"meta": {"d": "4"}})
    assert mismatch.status_code == 400
    assert mismatch.json()["badRequest"]["message"] == "Request body and URI mismatch"
    two = client.put(f"{base}/c", json={"meta": {"c": "3", "d": "4"}})
    assert two.status_code == 400 and "has too many properties" in two.json()["badRequest"]["message"]
    replaced = client.put(base, json={"metadata": {"only": "this"}})
    assert replaced.json() == {"metadata": {"only": "this"}}
    assert client.get(f"/v2.1/servers/{server}").json()["server"]["metadata"] == {"only": "this"}
    deleted = client.delete(f"{base}/only")
    assert deleted.status_code == 204
    gone = client.get(f"{base}/only")
    assert gone.status_code == 404 and gone.json()["itemNotFound"]["message"] == "Metadata item was not found"
    assert client.delete(f"{base}/only").status_code == 404
    assert client.get(base).json() == {"metadata": {}}


def test_metadata_limits_and_refusals(cloud: ComputeServer, server: str) -> None:
    client = _client(cloud)
    base = f"/v2.1/servers/{server}/metadata"
    too_many = client.post(base, json={"metadata": {f"k{i}": "v" for i in range(128)}})
    assert too_many.status_code == 403
    assert too_many.json()["forbidden"]["message"] == "Maximum number of metadata items exceeds 128"
    long_value = client.post(base, json={"metadata": {"k": "v" * 256}})
    assert long_value.status_code == 400
    bad_key = client.post(base, json={"metadata": {"a/b": "v"}})
    assert bad_key.status_code == 400
    assert client.get(base).json() == {"metadata": {"a": "1"}}
    other = _client(cloud, token=USER_B).get(base)
    assert other.status_code == 404
    reader = _client(cloud).with_headers(X_Roles="reader")
    assert reader.get(base).status_code == 200
    refused = reader.post(base, json={"metadata": {"x": "y"}})
    assert refused.status_code == 403
    assert refused.json()["forbidden"]["message"] == (
        "Policy doesn't allow os_compute_api:server-metadata:create to be performed.")
    # A task in progress refuses changes.
    assert client.post(f"/v2.1/servers/{server}/action", json={"reboot": {"type": "SOFT"}}).status_code == 202
    busy = client.put(f"{base}/x", json={"meta": {"x": "y"}})
    assert busy.status_code == 409
    assert busy.json()["conflictingRequest"]["message"] == (
        f"Cannot 'update metadata' instance {server} while it is in task_state rebooting")
    assert client.delete(f"{base}/a").status_code == 409


def test_tags_list_replace_add_check_delete(cloud: ComputeServer, server: str) -> None:
    client = _client(cloud)
    base = f"/v2.1/servers/{server}/tags"
    assert client.get(base).json() == {"tags": []}
    replaced = client.put(base, json={"tags": ["web", "prod", "web"]})
    assert replaced.status_code == 200 and replaced.json() == {"tags": ["prod", "web"]}
    added = client.put(f"{base}/blue")
    assert added.status_code == 201 and added.headers["Location"] == f"{cloud.url}/v2.1/servers/{server}/tags/blue"
    assert client.put(f"{base}/blue").status_code == 204
    assert client.get(f"{base}/blue").status_code == 204
    # Tags compare exactly.
    missing = client.get(f"{base}/Blue")
    assert missing.status_code == 404
    assert missing.json()["itemNotFound"]["message"] == f"Server {server} has no tag 'Blue'"
    assert client.get(f"/v2.1/servers/{server}").json()["server"]["tags"] == ["blue", "prod", "web"]
    assert "tags" not in _client(cloud, "2.25").get(f"/v2.1/servers/{server}").json()["server"]
    assert client.delete(f"{base}/prod").status_code == 204
    assert client.delete(f"{base}/prod").status_code == 404
    assert client.get(base).json() == {"tags": ["blue", "web"]}
    assert client.delete(base).status_code == 204
    assert client.get(base).json() == {"tags": []}
    assert _client(cloud, "2.25").get(base).status_code == 404


def test_tag_refusals(cloud: ComputeServer, server: str) -> None:
    client = _client(cloud)
    base = f"/v2.1/servers/{server}/tags"
    comma = client.put(f"{base}/a,b")
    assert comma.status_code == 400
    assert comma.json()["badRequest"]["message"] == (
        "Tag 'a,b' is invalid. It must be a non empty string without characters '/' and ','. "
        "Validation error message: 'a,b' does not match '^[^,/]*$'")
    assert client.put(base, json={"tags": ["x" * 61]}).status_code == 400
    assert client.put(base, json={"tags": [f"t{i}" for i in range(51)]}).status_code == 400
    assert client.put(base, json={"tags": [f"t{i}" for i in range(50)]}).status_code == 200
    full = client.put(f"{base}/one-more")
    assert full.status_code == 400
    assert full.json()["badRequest"]["message"] == "The number of tags exceeded the per-server limit 50"
    assert _client(cloud, token=USER_B).get(base).status_code == 404
    reader = _client(cloud).with_headers(X_Roles="reader")
    assert reader.get(base).status_code == 200
    assert reader.delete(base).status_code == 403
    building = cloud.boot(name="new")
    refused = client.put(f"/v2.1/servers/{building}/tags", json={"tags": ["a"]})
    assert refused.status_code == 409
    assert refused.json()["conflictingRequest"]["message"] == (
        f"Cannot 'update tags' instance {building} while it is in vm_state building")


def test_tags_on_boot_and_in_lists(cloud: ComputeServer) -> None:
    early = _client(cloud, "2.51").post("/v2.1/servers", json={"server": {
        "name": "x", "flavorRef": "1", "networks": "none", "tags": ["a"],
        "block_device_mapping_v2": [{"boot_index": 0, "uuid": "x", "source_type": "image"}]}})
    assert early.status_code == 400
    assert "Additional properties are not allowed ('tags' was unexpected)" in early.json()["badRequest"]["message"]
    red_blue = cloud.boot(name="red-blue", version="2.52", tags=["red", "blue"])
    red = cloud.boot(name="red", version="2.52", tags=["red"])
    assert _client(cloud).get(f"/v2.1/servers/{red}/tags").json() == {"tags": ["red"]}
    plain = cloud.boot(name="plain")
    assert _client(cloud).get(f"/v2.1/servers/{red_blue}").json()["server"]["tags"] == ["blue", "red"]
    cloud.run_computes()
    assert _client(cloud).get(f"/v2.1/servers/{red_blue}").json()["server"]["tags"] == ["blue", "red"]

    def listed(query: str) -> set[str]:
        resp = _client(cloud).get(f"/v2.1/servers/detail?{query}")
        assert resp.status_code == 200, resp.text
        return {s["name"] for s in resp.json()["servers"]}

    assert listed("tags=red") == {"red-blue", "red"}
    assert listed("tags=red,blue") == {"red-blue"}
    assert listed("tags-any=blue,green") == {"red-blue"}
    assert listed("not-tags=red,blue") == {"red", "plain"}
    assert listed("not-tags-any=blue") == {"red", "plain"}
    detail = _client(cloud).get("/v2.1/servers/detail").json()["servers"]
    assert {s["name"]: s["tags"] for s in detail} == {"red-blue": ["blue", "red"], "red": ["red"], "plain": []}
    assert plain in {s["id"] for s in detail}
