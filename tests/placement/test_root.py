"""Placement's version document and the microversion headers."""

from __future__ import annotations


def test_root_needs_no_token(placement) -> None:
    response = placement.client(token=None).get("/")
    assert response.status_code == 200
    (version,) = response.json()["versions"]
    assert (version["min_version"], version["max_version"]) == ("1.0", "1.39")
    assert response.headers["openstack-api-version"] == "placement 1.0"
    assert response.headers["vary"] == "openstack-api-version"
    assert response.headers["x-openstack-request-id"].startswith("req-")


def test_latest_and_unsupported_versions(placement) -> None:
    assert placement.client("latest").get("/").headers["openstack-api-version"] == "placement 1.39"
    response = placement.client("1.40").get("/")
    assert response.status_code == 406
    error = response.json()["errors"][0]
    assert (error["min_version"], error["max_version"]) == ("1.0", "1.39")
    assert response.headers["openstack-api-version"] == "placement 1.0"
