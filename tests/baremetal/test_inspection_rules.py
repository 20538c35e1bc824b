"""Inspection rules (1.96) over HTTP: stored, checked and served as upstream does."""

from __future__ import annotations

import uuid

from tests.baremetal.support import faultstring

ACTIONS = [{"op": "set-attribute", "args": ["/driver", "idrac"]}]
CONDITIONS = [{"op": "eq", "args": ["node:memory_mb", 4096], "multiple": "all"}]


def _create(client, **body):
    response = client.post("/v1/inspection_rules", json={"actions": ACTIONS, **body})
    assert response.status_code == 201, response.text
    return response.json()


def test_inspection_rule_crud(baremetal) -> None:
    client = baremetal.client()
    rule = _create(client, conditions=CONDITIONS, description="memory", phase="main", priority=100)
    assert list(rule) == ["uuid", "created_at", "updated_at", "description", "priority", "sensitive", "phase",
                          "conditions", "actions", "links"]
    # Without a loop, neither "loop" nor "multiple" is in the answer.
    assert rule["conditions"] == [{"op": "eq", "args": ["node:memory_mb", 4096]}]
    assert rule["actions"] == ACTIONS
    assert (rule["priority"], rule["sensitive"], rule["phase"]) == (100, False, "main")
    assert client.get(f"/v1/inspection_rules/{rule['uuid']}").json() == rule
    listed = client.get("/v1/inspection_rules").json()["inspection_rules"]
    assert [set(item) for item in listed] == [{"uuid", "priority", "phase", "description", "links"}]
    assert client.get("/v1/inspection_rules?detail=True").json()["inspection_rules"] == [rule]
    assert client.get("/v1/inspection_rules?fields=uuid").json()["inspection_rules"] == [
        {"uuid": rule["uuid"], "links": rule["links"]}]
    patched = client.patch(f"/v1/inspection_rules/{rule['uuid']}", json=[
        {"op": "replace", "path": "/priority", "value": 150},
        {"op": "add", "path": "/actions", "value": [{"op": "add-trait", "args": {"name": "CUSTOM_X"}}]}])
    assert patched.status_code == 200, patched.text
    assert (patched.json()["priority"], patched.json()["description"]) == (150, "memory")
    assert client.get(f"/v1/inspection_rules/{rule['uuid']}").json()["actions"] == [
        {"op": "add-trait", "args": {"name": "CUSTOM_X"}}]
    assert client.delete(f"/v1/inspection_rules/{rule['uuid']}").status_code == 204
    missing = client.get(f"/v1/inspection_rules/{rule['uuid']}")
    assert missing.status_code == 404
    assert faultstring(missing) == f"Inspection rule {rule['uuid']} could not be found."
    assert client.delete(f"/v1/inspection_rules/{uuid.uuid4()}").status_code == 404


def test_loops_are_kept(baremetal) -> None:
    client = baremetal.client()
    conditions = [{"op": "is-true", "args": ["{item}"], "loop": ["a", "b"]}]
    actions = [{"op": "add-trait", "args": ["{item}"], "loop": ["CUSTOM_A"]}]
    rule = _create(client, conditions=conditions, actions=actions)
    # A loop's "multiple" defaults to "any".
    assert rule["conditions"] == [{**conditions[0], "multiple": "any"}]
    assert rule["actions"] == actions


def test_sensitive_rules_hide_what_they_do(baremetal) -> None:
    client = baremetal.client()
    rule = _create(client, conditions=CONDITIONS, sensitive=True)
    assert (rule["conditions"], rule["actions"]) == (None, None)
    shown = client.get(f"/v1/inspection_rules/{rule['uuid']}?fields=uuid,actions").json()
    assert shown == {"uuid": rule["uuid"], "actions": None, "links": rule["links"]}
    refused = client.patch(f"/v1/inspection_rules/{rule['uuid']}", json=[
        {"op": "replace", "path": "/sensitive", "value": False}])
    assert refused.status_code == 400
    assert faultstring(refused).endswith("Reason: Inspection rules cannot have the sensitive flag unset.")


def test_bad_rules_are_refused_and_nothing_is_stored(baremetal) -> None:
    client = baremetal.client()
    cases = [
        ({"actions": []}, "Schema error: [] should be non-empty"),
        ({"actions": [{"op": "explode", "args": []}]}, None),
        ({"actions": ACTIONS, "phase": "late"}, "Invalid phase: late. Valid phases are: main"),
        ({"actions": ACTIONS, "priority": 10000}, "Priority must be between 0 and 9999 for user-defined rules."),
        ({"actions": [{"op": "set-attribute", "args": ["/driver"]}]},
         "Invalid parameters for action operator set-attribute: missing required argument(s): value"),
        ({"actions": [{"op": "add-trait", "args": {"name": "CUSTOM_A", "colour": "red"}}]},
         "Invalid parameters for action operator add-trait: unexpected argument(s): colour"),
        ({"actions": ACTIONS, "conditions": [{"op": "!in-net", "args": {"address": "10.0.0.1"}}]},
         "Invalid parameters for condition operator in-net: missing required argument(s): subnet"),
        ({"actions": ACTIONS, "name": "x"}, None),
        ({"actions": ACTIONS, "uuid": "!@#"}, "Expected UUID for uuid: !@#"),
    ]
    for body, message in cases:
        response = client.post("/v1/inspection_rules", json=body)
        assert response.status_code == 400, (body, response.text)
        if message is not None:
            assert faultstring(response) == message, body
    assert client.get("/v1/inspection_rules").json() == {"inspection_rules": []}


def test_inspection_rules_need_their_version_and_an_operator(baremetal) -> None:
    old = baremetal.client(version="1.95")
    assert old.get("/v1/inspection_rules").status_code == 404
    assert old.post("/v1/inspection_rules", json={"actions": ACTIONS}).status_code == 405
    project = baremetal.client(token="alice:p1")
    project.headers["X-Roles"] = "member,reader"
    assert project.post("/v1/inspection_rules", json={"actions": ACTIONS}).status_code == 403
    assert project.get("/v1/inspection_rules").status_code == 403
    assert baremetal.client().get("/v1/inspection_rules").json() == {"inspection_rules": []}
