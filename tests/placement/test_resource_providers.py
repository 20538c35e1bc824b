"""Resource providers over HTTP: create, list, show, update, delete, trees."""

from __future__ import annotations

import uuid


def _create(client, name, **extra):
    response = client.post("/resource_providers", json={"name": name, **extra})
    assert response.status_code in (200, 201), response.text
    return response


def test_create_before_and_after_1_20(placement) -> None:
    old = _create(placement.client("1.19"), "old")
    assert old.status_code == 201
    assert old.text == ""
    assert "/resource_providers/" in old.headers["location"]
    new = _create(placement.client("1.20"), "new", uuid=str(uuid.uuid4()))
    assert new.status_code == 200
    body = new.json()
    assert body["name"] == "new" and body["generation"] == 0
    assert body["root_provider_uuid"] == body["uuid"] and body["parent_provider_uuid"] is None
    assert new.headers["location"].endswith(f"/resource_providers/{body['uuid']}")
    assert new.headers["cache-control"] == "no-cache" and "last-modified" in new.headers


def test_links_by_microversion(placement) -> None:
    rp = _create(placement.client("1.20"), "rp").json()
    rels = lambda version: [link["rel"] for link in placement.client(version).get(f"/resource_providers/{rp['uuid']}").json()["links"]]  # noqa: E731
    assert rels("1.0") == ["self", "inventories", "usages"]
    assert rels("1.6") == ["self", "inventories", "usages", "aggregates", "traits"]
    assert rels("1.11")[-1] == "allocations"
    shown = placement.client("1.13").get(f"/resource_providers/{rp['uuid']}").json()
    assert "root_provider_uuid" not in shown


def test_duplicates_conflict(placement) -> None:
    client = placement.client("1.23")
    rp = _create(placement.client("1.20"), "dup").json()
    same_name = client.post("/resource_providers", json={"name": "dup"})
    assert same_name.status_code == 409
    assert same_name.json()["errors"][0]["code"] == "placement.duplicate_name"
    same_uuid = client.post("/resource_providers", json={"name": "other", "uuid": rp["uuid"]})
    assert same_uuid.status_code == 409
    assert "uuid" in same_uuid.json()["errors"][0]["detail"]


def test_bad_bodies_are_400_and_change_nothing(placement) -> None:
    client = placement.client("1.20")
    for body in ({}, {"name": ""}, {"name": "x" * 201}, {"name": "a", "uuid": "not-a-uuid"}, {"name": "a", "extra": 1},
                 {"name": "a", "parent_provider_uuid": str(uuid.uuid4())}, ["a"], "a"):
        response = client.post("/resource_providers", json=body)
        assert response.status_code == 400, (body, response.text)
        assert response.json()["errors"][0]["status"] == 400
    assert client.post("/resource_providers", data=b"{nope", headers={"content-type": "application/json"}).status_code == 400
    assert client.post("/resource_providers", data=b"{}", headers={"content-type": "text/plain"}).status_code == 415
    assert placement.client("1.13").post("/resource_providers", json={"name": "a", "parent_provider_uuid": None}).status_code == 400
    assert client.get("/resource_providers").json()["resource_providers"] == []


def test_list_filters(placement) -> None:
    client = placement.client("1.20")
    root = _create(client, "root").json()
    child = _create(client, "child", parent_provider_uuid=root["uuid"]).json()
    other = _create(client, "other").json()
    names = lambda query, version="1.20": sorted(p["name"] for p in placement.client(version).get(f"/resource_providers{query}").json()["resource_providers"])  # noqa: E731
    assert names("") == ["child", "other", "root"]
    assert names("?name=root") == ["root"]
    assert names(f"?uuid={other['uuid']}") == ["other"]
    assert names(f"?in_tree={child['uuid']}") == ["child", "root"]
    assert names(f"?in_tree={uuid.uuid4()}") == []
    for query, version in (("?limit=1", "1.20"), ("?in_tree=x", "1.20"), (f"?in_tree={root['uuid']}", "1.13"),
                           ("?uuid=nope", "1.0")):
        assert placement.client(version).get(f"/resource_providers{query}").status_code == 400, query


def test_show_update_delete(placement) -> None:
    client = placement.client("1.20")
    rp = _create(client, "rp").json()
    path = f"/resource_providers/{rp['uuid']}"
    assert client.get(f"/resource_providers/{uuid.uuid4()}").status_code == 404
    renamed = client.put(path, json={"name": "renamed"})
    assert renamed.status_code == 200 and renamed.json()["name"] == "renamed"
    assert client.put(path, json={"name": "x", "generation": 1}).status_code == 400
    _create(client, "taken")
    clash = placement.client("1.23").put(path, json={"name": "taken"})
    assert clash.status_code == 409 and clash.json()["errors"][0]["code"] == "placement.duplicate_name"
    assert client.delete(path).status_code == 204
    assert client.get(path).status_code == 404
    assert client.delete(path).status_code == 404


def test_parenting_rules(placement) -> None:
    client = placement.client("1.20")
    a = _create(client, "a").json()
    b = _create(client, "b").json()
    child = _create(client, "child", parent_provider_uuid=a["uuid"]).json()
    grandchild = _create(client, "grandchild", parent_provider_uuid=child["uuid"]).json()
    path = f"/resource_providers/{child['uuid']}"
    # Before 1.37 a parent, once set, stays.
    assert client.put(path, json={"name": "child", "parent_provider_uuid": b["uuid"]}).status_code == 400
    assert client.put(path, json={"name": "child", "parent_provider_uuid": None}).status_code == 400
    # A root may be given a parent.
    adopted = client.put(f"/resource_providers/{b['uuid']}", json={"name": "b", "parent_provider_uuid": a["uuid"]})
    assert adopted.status_code == 200 and adopted.json()["root_provider_uuid"] == a["uuid"]
    new = placement.client("1.37")
    loop = new.put(f"/resource_providers/{a['uuid']}", json={"name": "a", "parent_provider_uuid": grandchild["uuid"]})
    assert loop.status_code == 400
    moved = new.put(path, json={"name": "child", "parent_provider_uuid": None})
    assert moved.status_code == 200 and moved.json()["root_provider_uuid"] == child["uuid"]
    shown = new.get(f"/resource_providers/{grandchild['uuid']}").json()
    assert shown["root_provider_uuid"] == child["uuid"] and shown["parent_provider_uuid"] == child["uuid"]
    # A parent with children cannot be deleted.
    refused = placement.client("1.23").delete(path)
    assert refused.status_code == 409
    assert refused.json()["errors"][0]["code"] == "placement.resource_provider.cannot_delete_parent"


def test_needs_a_token_and_admin(placement) -> None:
    assert placement.client(token=None).get("/resource_providers").status_code == 401
    assert placement.client(token="demo:demo").get("/resource_providers").status_code == 403


def test_list_filters_resources_traits_aggregates(placement) -> None:
    client = placement.client("1.32")
    agg = str(uuid.uuid4())
    big = _create(placement.client("1.20"), "big").json()
    small = _create(placement.client("1.20"), "small").json()
    for rp, vcpus in ((big, 16), (small, 2)):
        client.put(f"/resource_providers/{rp['uuid']}/inventories",
                   json={"resource_provider_generation": 0, "inventories": {"VCPU": {"total": vcpus}}})
    client.put(f"/resource_providers/{big['uuid']}/traits", json={"traits": ["HW_CPU_X86_AVX2"], "resource_provider_generation": 1})
    client.put(f"/resource_providers/{small['uuid']}/aggregates", json={"aggregates": [agg], "resource_provider_generation": 1})
    names = lambda query: sorted(p["name"] for p in client.get(f"/resource_providers?{query}").json()["resource_providers"])  # noqa: E731
    assert names("resources=VCPU:4") == ["big"]
    assert names("required=HW_CPU_X86_AVX2") == ["big"]
    assert names("required=!HW_CPU_X86_AVX2") == ["small"]
    assert names(f"member_of={agg}") == ["small"]
    assert names(f"member_of=!{agg}") == ["big"]
    assert client.get("/resource_providers?resources=CUSTOM_NOPE:1").status_code == 400
    assert placement.client("1.3").get("/resource_providers?resources=VCPU:1").status_code == 400


def test_project_readers_see_their_own_usages_only(placement) -> None:
    reader = placement.client("1.9", token="alice:proj1")
    # noauth2 users other than admin get the member and reader roles of their project.
    own = reader.get("/usages?project_id=proj1")
    other = reader.get("/usages?project_id=proj2")
    assert (own.status_code, other.status_code) == (200, 403)
    assert own.json() == {"usages": {}}
