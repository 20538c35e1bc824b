"""Version documents, microversion headers and Nova's error bodies."""

from __future__ import annotations

from tests.compute.conftest import ComputeServer


def test_version_list_is_public(compute: ComputeServer) -> None:
    resp = compute.client(token=None).get("/")
    assert resp.status_code == 200
    versions = {v["id"]: v for v in resp.json()["versions"]}
    assert versions["v2.1"]["status"] == "CURRENT"
    assert versions["v2.1"]["min_version"] == "2.1"
    assert versions["v2.1"]["version"] == "2.73"
    assert versions["v2.1"]["links"] == [{"rel": "self", "href": f"{compute.url}/v2.1/"}]
    assert versions["v2.0"]["version"] == ""


def test_v21_document(compute: ComputeServer) -> None:
    resp = compute.client(token=None).get("/v2.1/")
    assert resp.status_code == 200
    version = resp.json()["version"]
    assert version["id"] == "v2.1"
    assert version["media-types"] == [
        {"base": "application/json", "type": "application/vnd.openstack.compute+json;version=2.1"}
    ]
    assert {"rel": "describedby", "type": "text/html", "href": "http://docs.openstack.org/"} in version["links"]
    assert resp.headers["OpenStack-API-Version"] == "compute 2.1"
    assert resp.headers["X-OpenStack-Nova-API-Version"] == "2.1"


def test_version_headers_standard_legacy_and_latest(compute: ComputeServer) -> None:
    assert compute.client("2.69").get("/v2.1/").headers["OpenStack-API-Version"] == "compute 2.69"
    legacy = compute.client("2.60", legacy=True).get("/v2.1/")
    assert legacy.headers["X-OpenStack-Nova-API-Version"] == "2.60"
    latest = compute.client("latest").get("/v2.1/")
    assert latest.headers["OpenStack-API-Version"] == "compute 2.73"
    assert "OpenStack-API-Version" in latest.headers["Vary"]
    assert "X-OpenStack-Nova-API-Version" in latest.headers["Vary"]


def test_unsupported_version_is_406_compute_fault(compute: ComputeServer) -> None:
    resp = compute.client("2.999").get("/v2.1/servers")
    assert resp.status_code == 406
    assert resp.json() == {
        "computeFault": {
            "code": 406,
            "message": "Version 2.999 is not supported by the API. Minimum is 2.1 and maximum is 2.73.",
        }
    }
    assert resp.headers["OpenStack-API-Version"] == "compute 2.999"


def test_malformed_version_is_400_without_version_headers(compute: ComputeServer) -> None:
    resp = compute.client("garbage").get("/v2.1/servers")
    assert resp.status_code == 400
    assert resp.json() == {
        "badRequest": {
            "code": 400,
            "message": "API Version String garbage is of invalid format. Must be of format MajorNum.MinorNum.",
        }
    }
    assert "OpenStack-API-Version" not in resp.headers


def test_unknown_path_is_item_not_found(compute: ComputeServer) -> None:
    resp = compute.client("2.69").get("/v2.1/no-such-thing")
    assert resp.status_code == 404
    assert list(resp.json()) == ["itemNotFound"]
    assert resp.json()["itemNotFound"]["code"] == 404


def test_token_required(compute: ComputeServer) -> None:
    resp = compute.client("2.69", token=None).get("/v2.1/servers")
    assert resp.status_code == 401
    assert resp.json()["unauthorized"]["code"] == 401
