"""Version documents, microversion negotiation and the error body."""

from __future__ import annotations

from corral.baremetal.microversions import MAX_VERSION
from tests.baremetal.support import fault


def test_root_document_needs_no_token(baremetal) -> None:
    response = baremetal.client(version=None, token=None).get("/")
    assert response.status_code == 200
    body = response.json()
    assert body["name"] == "OpenStack Ironic API"
    assert body["default_version"] == body["versions"][0]
    assert body["default_version"]["min_version"] == "1.1"
    assert body["default_version"]["version"] == MAX_VERSION
    assert body["default_version"]["links"] == [{"href": f"{baremetal.url}/v1/", "rel": "self"}]
    assert response.headers["X-OpenStack-Ironic-API-Version"] == "1.1"
    assert response.headers["X-OpenStack-Ironic-API-Minimum-Version"] == "1.1"
    assert response.headers["X-OpenStack-Ironic-API-Maximum-Version"] == MAX_VERSION
    assert response.headers["openstack-request-id"].startswith("req-")


def test_v1_document(baremetal) -> None:
    for path in ("/v1", "/v1/"):
        response = baremetal.client(token=None).get(path)
        assert response.status_code == 200
        body = response.json()
        assert body["id"] == "v1"
        assert body["media_types"]["type"] == "application/vnd.openstack.ironic.v1+json"
        assert body["nodes"] == [
            {"href": f"{baremetal.url}/v1/nodes/", "rel": "self"},
            {"href": f"{baremetal.url}/nodes/", "rel": "bookmark"},
        ]
        assert [link["rel"] for link in body["links"]] == ["self", "describedby"]
        assert response.headers["X-OpenStack-Ironic-API-Version"] == MAX_VERSION


def test_standard_version_header_is_accepted(baremetal) -> None:
    response = baremetal.client(version=None).get("/v1", headers={"OpenStack-API-Version": "baremetal 1.5"})
    assert response.headers["X-OpenStack-Ironic-API-Version"] == "1.5"
    assert response.headers["OpenStack-API-Version"] == "baremetal 1.5"


def test_unsupported_versions(baremetal) -> None:
    response = baremetal.client("1.999").get("/v1")
    assert response.status_code == 406
    assert fault(response) == {
        "code": 406,
        "title": "Not Acceptable",
        "description": "Version 1.999 was requested but the minor version is not supported by this service. "
        f"The supported version range is: [1.1, {MAX_VERSION}].",
    }
    assert response.headers["X-OpenStack-Ironic-API-Maximum-Version"] == MAX_VERSION
    assert "X-OpenStack-Ironic-API-Version" not in response.headers
    response = baremetal.client("2.0").get("/v1")
    assert response.status_code == 406
    assert fault(response)["description"].startswith("Mutually exclusive versions requested. Version 2.0")
    response = baremetal.client("1.0").get("/v1")
    assert response.status_code == 406


def test_malformed_version_has_no_version_headers(baremetal) -> None:
    response = baremetal.client("foo").get("/v1")
    assert response.status_code == 406
    assert fault(response)["description"] == "Invalid value for X-OpenStack-Ironic-API-Version header"
    assert "X-OpenStack-Ironic-API-Minimum-Version" not in response.headers
    assert "X-OpenStack-Ironic-API-Maximum-Version" not in response.headers


def test_errors_use_ironic_body(baremetal) -> None:
    response = baremetal.client(token=None).get("/v1/nodes")
    assert response.status_code == 401
    assert fault(response)["faultcode"] == "Client"
    response = baremetal.client().get("/v1/no-such-thing")
    assert response.status_code == 404
    assert fault(response)["faultcode"] == "Client"
