"""/os-server-groups over HTTP at each microversion that changes it, on every backend."""

from __future__ import annotations

from typing import Any

import pytest

from tests.compute.conftest import IMAGE, ComputeServer

USER_A = "user-a:project-a"
USER_B = "user-b:project-b"


def _create(compute: ComputeServer, version: str, group: dict[str, Any], token: str = USER_A) -> Any:
    return compute.client(version, token=token).post("/v2.1/os-server-groups", json={"server_group": group})


def test_representations_by_version(compute: ComputeServer) -> None:
    old = _create(compute, "2.1", {"name": "g1", "policies": ["anti-affinity"]})
    assert old.status_code == 200
    body = old.json()["server_group"]
    assert body == {"id": body["id"], "name": "g1", "policies": ["anti-affinity"], "metadata": {}, "members": []}
    with_owner = _create(compute, "2.13", {"name": "g2", "policies": ["affinity"]}).json()["server_group"]
    assert with_owner["project_id"] == "project-a" and with_owner["user_id"] == "user-a"
    soft = _create(compute, "2.15", {"name": "g3", "policies": ["soft-anti-affinity"]}).json()["server_group"]
    assert soft["policies"] == ["soft-anti-affinity"]
    new = _create(compute, "2.64", {"name": "g4", "policy": "anti-affinity", "rules": {"max_server_per_host": "2"}})
    assert new.status_code == 200
    assert new.json()["server_group"] == {
        "id": new.json()["server_group"]["id"], "name": "g4", "policy": "anti-affinity",
        "rules": {"max_server_per_host": 2}, "members": [], "project_id": "project-a", "user_id": "user-a"}
    # A group created before 2.64 has empty rules from 2.64 on; a 2.64 one a policies list before.
    client = compute.client("2.64", token=USER_A)
    assert client.get(f"/v2.1/os-server-groups/{body['id']}").json()["server_group"]["rules"] == {}
    shown = compute.client("2.63", token=USER_A).get(f"/v2.1/os-server-groups/{new.json()['server_group']['id']}")
    assert shown.json()["server_group"]["policies"] == ["anti-affinity"]
    assert shown.json()["server_group"]["metadata"] == {}
    assert "rules" not in shown.json()["server_group"]


@pytest.mark.parametrize(("version", "group", "message"), [
    ("2.14", {"name": "g", "policies": ["soft-affinity"]},
     "Invalid input for field/attribute 0. Value: soft-affinity. 'soft-affinity' is not one of "
     "['anti-affinity', 'affinity']"),
    ("2.1", {"name": "g", "policies": ["affinity", "anti-affinity"]}, None),
    ("2.1", {"name": "g", "policies": []}, None),
    ("2.1", {"name": "g", "policy": "affinity"}, None),
    ("2.64", {"name": "g", "policies": ["affinity"]}, None),
    ("2.64", {"name": "g", "policy": "affinity", "rules": {"max_server_per_host": 2}},
     "Only anti-affinity policy supports rules."),
    ("2.64", {"name": "g", "policy": "anti-affinity", "rules": {"max_server_per_host": 0}},
     "Invalid input for field/attribute max_server_per_host. Value: 0. 0 is less than the minimum of 1"),
    ("2.64", {"name": "g", "policy": "anti-affinity", "rules": {"other": 1}}, None),
    ("2.64", {"name": " g", "policy": "affinity"},
     "An invalid 'name' value was provided. The name must be: printable characters. "
     "Can not start or end with whitespace."),
    ("2.64", {"policy": "affinity"},
     "Invalid input for field/attribute server_group. Value: {'policy': 'affinity'}. "
     "'name' is a required property"),
])
def test_refused_bodies(compute: ComputeServer, version: str, group: dict[str, Any], message: str | None) -> None:
    resp = _create(compute, version, group)
    assert resp.status_code == 400, resp.text
    if message is not None:
        assert resp.json() == {"badRequest": {"code": 400, "message": message}}
    assert compute.client(version, token=USER_A).get("/v2.1/os-server-groups").json() == {"server_groups": []}


def test_rules_are_optional_and_empty_rules_allowed(compute: ComputeServer) -> None:
    for policy in ("affinity", "soft-affinity", "soft-anti-affinity"):
        created = _create(compute, "2.64", {"name": policy, "policy": policy, "rules": {}})
        assert created.status_code == 200 and created.json()["server_group"]["rules"] == {}


def test_list_show_delete_and_projects(compute: ComputeServer) -> None:
    mine = [_create(compute, "2.64", {"name": f"a{i}", "policy": "affinity"}).json()["server_group"]["id"]
            for i in range(3)]
    theirs = _create(compute, "2.64", {"name": "b", "policy": "affinity"}, token=USER_B).json()["server_group"]["id"]
    a = compute.client("2.64", token=USER_A)
    assert [g["id"] for g in a.get("/v2.1/os-server-groups").json()["server_groups"]] == mine
    # A non-admin asking for every project gets its own.
    assert [g["id"] for g in a.get("/v2.1/os-server-groups?all_projects=1").json()["server_groups"]] == mine
    admin = compute.client("2.64")
    assert [g["id"] for g in admin.get("/v2.1/os-server-groups?all_projects=True").json()["server_groups"]] == [
        *mine, theirs]
    assert admin.get("/v2.1/os-server-groups").json() == {"server_groups": []}
    assert [g["id"] for g in a.get("/v2.1/os-server-groups?limit=1&offset=1").json()["server_groups"]] == [mine[1]]
    assert [g["id"] for g in a.get("/v2.1/os-server-groups?limit=0").json()["server_groups"]] == mine
    bad = a.get("/v2.1/os-server-groups?offset=x")
    assert bad.json() == {"badRequest": {"code": 400, "message":
        "Invalid input for query parameters offset. Value: x. 'x' does not match '^[0-9]*$'"}}

    hidden = a.get(f"/v2.1/os-server-groups/{theirs}")
    assert hidden.status_code == 404
    assert hidden.json() == {"itemNotFound": {"code": 404, "message": f"Instance group {theirs} could not be found."}}
    assert a.delete(f"/v2.1/os-server-groups/{theirs}").status_code == 404
    assert admin.get(f"/v2.1/os-server-groups/{theirs}").status_code == 200
    reader = compute.client("2.64", token=USER_A).with_headers(X_Roles="reader")
    assert reader.get(f"/v2.1/os-server-groups/{mine[0]}").status_code == 200
    refused = reader.delete(f"/v2.1/os-server-groups/{mine[0]}")
    assert refused.json() == {"forbidden": {"code": 403, "message":
                                            "Policy doesn't allow os_compute_api:os-server-groups:delete to be performed."}}
    assert a.delete(f"/v2.1/os-server-groups/{mine[0]}").status_code == 204
    assert a.get(f"/v2.1/os-server-groups/{mine[0]}").status_code == 404


def test_server_groups_quota_and_limits(compute: ComputeServer) -> None:
    admin = compute.client("2.73")
    assert admin.put("/v2.1/os-quota-sets/project-a", json={"quota_set": {"server_groups": 2}}).status_code == 200
    for index in range(2):
        assert _create(compute, "2.64", {"name": f"g{index}", "policy": "affinity"}).status_code == 200
    over = _create(compute, "2.64", {"name": "g2", "policy": "affinity"})
    assert over.status_code == 403
    assert over.json() == {"forbidden": {"code": 403, "message": "Quota exceeded, too many server groups."}}
    absolute = compute.client("2.73", token=USER_A).get("/v2.1/limits").json()["limits"]["absolute"]
    assert absolute["totalServerGroupsUsed"] == 2 and absolute["maxServerGroups"] == 2
    detail = admin.get("/v2.1/os-quota-sets/project-a/detail").json()["quota_set"]
    assert detail["server_groups"] == {"in_use": 2, "limit": 2, "reserved": 0}
    lowered = admin.put("/v2.1/os-quota-sets/project-a", json={"quota_set": {"server_groups": 1}})
    assert lowered.json() == {"badRequest": {"code": 400, "message":
        "Quota limit 1 for server_groups must be greater than or equal to already used and reserved 2."}}
    assert compute.client("2.73", token=USER_B).get("/v2.1/limits").json()["limits"]["absolute"][
        "totalServerGroupsUsed"] == 0


def _boot(cloud: ComputeServer, hints: dict[str, Any], token: str = USER_A, version: str = "2.73",
          **server: Any) -> Any:
    body = {"name": "vm", "flavorRef": "1", "imageRef": IMAGE, "networks": "none", **server}
    return cloud.client(version, token=token).post("/v2.1/servers", json={"server": body,
                                                                           "os:scheduler_hints": hints})


def test_members_and_server_groups_of_a_server(cloud: ComputeServer) -> None:
    group = _create(cloud, "2.64", {"name": "g", "policy": "soft-affinity"}).json()["server_group"]["id"]
    first = _boot(cloud, {"group": group}).json()["server"]["id"]
    second = _boot(cloud, {"group": [group]}).json()["server"]["id"]
    outsider = cloud.boot(name="outsider", version="2.73")
    client = cloud.client("2.73", token=USER_A)
    assert client.get(f"/v2.1/os-server-groups/{group}").json()["server_group"]["members"] == [first, second]
    assert client.get(f"/v2.1/servers/{first}").json()["server"]["server_groups"] == [group]
    assert client.get(f"/v2.1/servers/{outsider}").json()["server"]["server_groups"] == []
    assert "server_groups" not in cloud.client("2.70", token=USER_A).get(f"/v2.1/servers/{first}").json()["server"]
    listed = client.get("/v2.1/os-server-groups").json()["server_groups"]
    assert listed[0]["members"] == [first, second]
    assert client.delete(f"/v2.1/servers/{first}").status_code == 204
    assert client.get(f"/v2.1/os-server-groups/{group}").json()["server_group"]["members"] == [second]


def test_boot_into_unknown_or_foreign_group(cloud: ComputeServer) -> None:
    theirs = _create(cloud, "2.64", {"name": "b", "policy": "affinity"}, token=USER_B).json()["server_group"]["id"]
    missing = "8b1c4ad7-0000-4000-8000-000000000000"
    for group in (missing, theirs):
        resp = _boot(cloud, {"group": group})
        assert resp.status_code == 400
        assert resp.json() == {"badRequest": {"code": 400, "message": f"Instance group {group} could not be found."}}
    not_uuid = _boot(cloud, {"group": "not-a-uuid"})
    assert not_uuid.status_code == 400
    assert cloud.client("2.73", token=USER_A).get("/v2.1/servers").json() == {"servers": []}


def test_server_group_members_quota(cloud: ComputeServer) -> None:
    admin = cloud.client("2.73")
    assert admin.put("/v2.1/os-quota-sets/project-a",
                     json={"quota_set": {"server_group_members": 2}}).status_code == 200
    group = _create(cloud, "2.64", {"name": "g", "policy": "soft-anti-affinity"}).json()["server_group"]["id"]
    assert _boot(cloud, {"group": group}).status_code == 202
    # Two more do not fit: nothing is booted, as upstream refuses the whole request.
    both = _boot(cloud, {"group": group}, min_count=2)
    assert both.status_code == 403
    assert both.json() == {"forbidden": {"code": 403, "message": "Quota exceeded, too many servers in group"}}
    assert len(cloud.client("2.73", token=USER_A).get("/v2.1/servers").json()["servers"]) == 1
    second = _boot(cloud, {"group": group})
    assert second.status_code == 202
    assert _boot(cloud, {"group": group}).status_code == 403
    # A deleted member no longer counts.
    assert cloud.client("2.73", token=USER_A).delete(f"/v2.1/servers/{second.json()['server']['id']}"
                                                     ).status_code == 204
    assert _boot(cloud, {"group": group}).status_code == 202


def test_numbers_of_any_length_in_queries(compute: ComputeServer) -> None:
    """Digit strings too long to convert are beyond every bound, never a 500."""
    huge = "9" * 5000
    assert _create(compute, "2.64", {"name": "g", "policy": "affinity"}).status_code == 200
    client = compute.client("2.73", token=USER_A)
    assert client.get(f"/v2.1/os-server-groups?offset={huge}").json() == {"server_groups": []}
    assert len(client.get(f"/v2.1/os-server-groups?limit={huge}").json()["server_groups"]) == 1
    assert client.get(f"/v2.1/os-keypairs?limit={huge}").json() == {"keypairs": []}
    assert compute.client("2.73").get(f"/v2.1/os-hypervisors?limit={huge}").json() == {"hypervisors": []}
    assert compute.client("2.73").get(f"/v2.1/os-simple-tenant-usage?limit={huge}").json() == {"tenant_usages": []}
    too_big = compute.client("2.64", token=USER_A).post("/v2.1/os-server-groups", json={"server_group": {
        "name": "g", "policy": "anti-affinity", "rules": {"max_server_per_host": huge}}})
    assert too_big.status_code == 400
    assert too_big.json()["badRequest"]["message"].endswith(f"{huge} is greater than the maximum of 2147483647")
