"""No input makes Placement answer 500: junk bodies, paths and queries on every route."""

from __future__ import annotations

import itertools
import uuid

import pytest

JUNK_BODIES = [None, b"", b"{", b"[]", b"null", b"1", b'"x"', b'{"a": 1}', b'{"name": null}',
               b'{"allocations": {"x": 1}}', b'{"resource_provider_generation": "1", "inventories": []}',
               b'{"traits": [1], "resource_provider_generation": 0}', "{\"name\": \"\u2603\"}".encode(),
               b'{"total": 1e400}', b'{"inventories": {"VCPU": {"total": 99999999999999999999}}, "resource_provider_generation": 0}']
VERSIONS = ["1.0", "1.13", "1.28", "1.39"]


@pytest.fixture
def targets(placement):
    rp = placement.client("1.20").post("/resource_providers", json={"name": "rp"}).json()["uuid"]
    placement.client("1.20").put(f"/resource_providers/{rp}/inventories",
                                 json={"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 4}}})
    consumer = str(uuid.uuid4())
    return [
        "/resource_providers", f"/resource_providers/{rp}", f"/resource_providers/{rp}/inventories",
        f"/resource_providers/{rp}/inventories/VCPU", f"/resource_providers/{rp}/inventories/NOPE",
        f"/resource_providers/{rp}/traits", f"/resource_providers/{rp}/aggregates",
        f"/resource_providers/{rp}/allocations", f"/resource_providers/{rp}/usages",
        "/resource_providers/not-a-uuid", "/resource_classes", "/resource_classes/CUSTOM_X", "/traits",
        "/traits/CUSTOM_X", "/traits/%00", "/allocations", f"/allocations/{consumer}", "/allocations/junk",
        "/usages", "/reshaper", "/allocation_candidates",
    ]


def test_junk_bodies_never_500(placement, targets) -> None:
    for version, path, body in itertools.product(VERSIONS, targets, JUNK_BODIES):
        # The service role too, so that the reshaper's policy lets the bodies through.
        client = placement.client(version).with_headers(X_Roles="admin,service")
        for method in ("PUT", "POST"):
            response = client.request(method, path, data=body, headers={"content-type": "application/json"})
            assert response.status_code < 500, (version, method, path, body, response.text)
            if response.status_code >= 400:
                assert response.json()["errors"][0]["status"] == response.status_code


def test_junk_queries_never_500(placement, targets) -> None:
    queries = ["?", "?x=1", "?name=", "?member_of=", "?member_of=in:", "?member_of=!", "?resources=VCPU",
               "?resources=VCPU:x", "?resources=:1", "?required=,", "?in_tree=", "?limit=-1", "?limit=x",
               "?project_id=", "?consumer_type=%00", "?group_policy=x", "?resources1=VCPU:1&group_policy=x",
               "?uuid=%FF", "?associated=x", "?name=in:"]
    for version, path, query in itertools.product(VERSIONS, targets, queries):
        response = placement.client(version).get(path + query)
        assert response.status_code < 500, (version, path, query, response.text)


def test_wrong_methods_are_405(placement, targets) -> None:
    response = placement.client("1.39").patch("/resource_providers", json={})
    assert response.status_code == 405
    for path in targets:
        assert placement.client("1.39").request("PATCH", path, json={}).status_code in (404, 405)
