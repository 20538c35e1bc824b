"""Deploy templates, runbooks, deploy and service steps, hold/unhold and events over HTTP."""

from __future__ import annotations

import uuid

import pytest
import sqlalchemy as sa

from corral.baremetal.db.tables import events
from tests.baremetal.support import faultstring, wait_for_state
from tests.baremetal.test_node_features import _set
from tests.baremetal.test_provisioning import available, manageable, provision

BIOS_STEP = {"interface": "bios", "step": "apply_configuration", "priority": 150,
             "args": {"settings": [{"name": "hyper", "value": "off"}]}}


# ---------------------------------------------------- deploy templates


def test_deploy_template_crud(baremetal) -> None:
    client = baremetal.client()
    response = client.post("/v1/deploy_templates", json={"name": "CUSTOM_HYPER_OFF", "steps": [BIOS_STEP],
                                                          "extra": {"a": 1}})
    assert response.status_code == 201, response.text
    template = response.json()
    assert list(template) == ["uuid", "created_at", "updated_at", "name", "extra", "links", "steps"]
    assert response.headers["Location"] == f"{baremetal.url}/v1/deploy_templates/{template['uuid']}"
    assert template["steps"] == [BIOS_STEP]
    listed = client.get("/v1/deploy_templates").json()["deploy_templates"]
    assert [set(item) for item in listed] == [{"uuid", "name", "links"}]
    assert client.get("/v1/deploy_templates?detail=true").json()["deploy_templates"][0]["steps"] == [BIOS_STEP]
    assert client.get("/v1/deploy_templates/CUSTOM_HYPER_OFF?fields=steps").json()["steps"] == [BIOS_STEP]
    patched = client.patch("/v1/deploy_templates/CUSTOM_HYPER_OFF", json=[
        {"op": "replace", "path": "/name", "value": "CUSTOM_RENAMED"},
        {"op": "replace", "path": "/steps/0/priority", "value": 10}]).json()
    assert (patched["name"], patched["steps"][0]["priority"]) == ("CUSTOM_RENAMED", 10)
    assert patched["updated_at"] is not None
    duplicate = client.post("/v1/deploy_templates", json={"name": "CUSTOM_RENAMED", "steps": [BIOS_STEP]})
    assert duplicate.status_code == 409
    assert faultstring(duplicate) == "A deploy template with name CUSTOM_RENAMED already exists."
    assert client.delete("/v1/deploy_templates/CUSTOM_RENAMED").status_code == 204
    missing = client.get("/v1/deploy_templates/CUSTOM_RENAMED")
    assert missing.status_code == 404
    assert faultstring(missing) == "Deploy template CUSTOM_RENAMED could not be found."
    assert baremetal.client(token="alice:p1").get("/v1/deploy_templates").status_code == 403


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"name": "not_a_trait", "steps": [BIOS_STEP]},
         "Schema error for template: 'not_a_trait' is not valid under any"),
        ({"name": "CUSTOM_X", "steps": []}, "Schema error for template: [] should be non-empty"),
        ({"name": "CUSTOM_X", "steps": [{**BIOS_STEP, "interface": "bogus"}]},
         "Schema error for template: 'bogus' is not one of"),
        ({"name": "CUSTOM_X", "steps": [BIOS_STEP, BIOS_STEP]},
         "Deploy template invalid: Duplicate deploy steps. A template cannot have multiple deploy steps with the "
         "same interface and step. Duplicates: interface: bios, step: apply_configuration."),
        ({"name": "CUSTOM_X", "steps": [BIOS_STEP], "uuid": "nope"}, "Expected UUID for uuid: nope"),
        ({"name": "CUSTOM_X", "steps": [BIOS_STEP], "bogus": 1},
         "Schema error for template: Additional properties are not allowed ('bogus' was unexpected)"),
    ],
)
def test_deploy_template_errors(baremetal, body, message) -> None:
    client = baremetal.client()
    response = client.post("/v1/deploy_templates", json=body)
    assert response.status_code == 400, response.text
    assert faultstring(response).startswith(message.split(" should be")[0]), faultstring(response)
    assert client.get("/v1/deploy_templates").json()["deploy_templates"] == []


def test_instance_traits_select_deploy_templates(baremetal) -> None:
    client = baremetal.client()
    client.post("/v1/deploy_templates", json={"name": "CUSTOM_HYPER_OFF", "steps": [BIOS_STEP]})
    client.post("/v1/deploy_templates", json={"name": "CUSTOM_UNUSED", "steps": [
        {"interface": "bios", "step": "factory_reset", "args": {}, "priority": 200}]})
    available(client)
    client.patch("/v1/nodes/n1", json=[{"op": "add", "path": "/instance_info/traits",
                                        "value": ["CUSTOM_HYPER_OFF"]}])
    assert provision(client, "n1", "active").status_code == 202
    node = wait_for_state(client, "n1", "active")
    actions = node["driver_internal_info"]["fake_actions"]
    # The template's step (priority 150) ran before the driver's deploy step (100); the unused one did not.
    assert actions[-2:] == ["bios.apply_configuration", "deploy.deploy"]
    assert "bios.factory_reset" not in actions
    assert client.get("/v1/nodes/n1/bios").json()["bios"][0]["name"] == "hyper"
    assert node["deploy_step"] == {}


def test_deploy_steps_with_the_deploy_verb(baremetal) -> None:
    client = baremetal.client()
    available(client)
    steps = [{"interface": "bios", "step": "factory_reset", "args": {}, "priority": 120}]
    assert provision(client, "n1", "deploy", deploy_steps=steps).status_code == 202
    node = wait_for_state(client, "n1", "active")
    assert node["driver_internal_info"]["fake_actions"][-2:] == ["bios.factory_reset", "deploy.deploy"]
    # An unknown step fails the deployment with a clear error; nothing ran.
    bad = [{"interface": "bios", "step": "no_such_step", "args": {}, "priority": 10}]
    assert provision(client, "n1", "rebuild", deploy_steps=bad).status_code == 202
    failed = wait_for_state(client, "n1", "deploy failed")
    assert "node does not support this deploy step" in failed["last_error"]
    response = provision(client, "n1", "active", deploy_steps=[{"interface": "bios", "step": "x"}])
    assert response.status_code == 400
    assert faultstring(response).startswith("Invalid deploy_steps: 'args' is a required property")


# ------------------------------------------------ service, hold, unhold


def test_service_steps_run_on_an_active_node(baremetal) -> None:
    client = baremetal.client()
    available(client)
    provision(client, "n1", "active")
    active = wait_for_state(client, "n1", "active")
    steps = [{"interface": "vendor", "step": "log_passthrough"}]
    assert provision(client, "n1", "service", service_steps=steps).status_code == 202
    node = wait_for_state(client, "n1", "active", changed_since=active["provision_updated_at"])
    assert node["driver_internal_info"]["fake_actions"][-1] == "vendor.log_passthrough"
    assert node["service_step"] == {}
    response = provision(client, "n1", "service")
    assert response.status_code == 400
    assert faultstring(response) == '"service_steps" is required when setting target provision state to service'
    response = provision(client, "n1", "active", service_steps=steps)
    assert response.status_code == 400
    # disable_ramdisk with servicing from 1.108; this step needs no ramdisk.
    assert baremetal.client(version="1.107").put("/v1/nodes/n1/states/provision", json={
        "target": "service", "service_steps": steps, "disable_ramdisk": True}).status_code == 406
    assert provision(client, "n1", "service", service_steps=steps, disable_ramdisk=True).status_code == 202
    wait_for_state(client, "n1", "active", changed_since=node["provision_updated_at"])


def test_failed_service_is_aborted_back_to_active(baremetal) -> None:
    client = baremetal.client()
    available(client)
    provision(client, "n1", "active")
    wait_for_state(client, "n1", "active")
    provision(client, "n1", "service", service_steps=[{"interface": "bios", "step": "no_such"}])
    failed = wait_for_state(client, "n1", "service failed")
    assert failed["last_error"].startswith(f"Cannot service node {failed['uuid']}: node does not support this "
                                           "service step")
    assert provision(client, "n1", "abort").status_code == 202
    node = wait_for_state(client, "n1", "active")
    assert node["last_error"] is None


def test_unhold_and_abort_of_waiting_deployments(baremetal) -> None:
    client = baremetal.client()
    node = available(client)
    _set(baremetal, "n1", provision_state="deploy hold", target_provision_state="active")
    assert baremetal.client(version="1.84").put("/v1/nodes/n1/states/provision",
                                                json={"target": "unhold"}).status_code == 406
    assert provision(client, "n1", "unhold").status_code == 202
    waiting = client.get("/v1/nodes/n1").json()
    assert (waiting["provision_state"], waiting["target_provision_state"]) == ("wait call-back", "active")
    # Abort from wait call-back arrived in 1.110.
    assert baremetal.client(version="1.109").put("/v1/nodes/n1/states/provision",
                                                 json={"target": "abort"}).status_code == 406
    assert provision(client, "n1", "abort").status_code == 202
    assert client.get(f"/v1/nodes/{node['uuid']}").json()["provision_state"] == "deploy failed"


# ------------------------------------------------------------- runbooks

RUNBOOK_STEP = {"interface": "vendor", "step": "log_passthrough", "args": {}, "order": 0}


def test_runbook_crud_and_traits(baremetal) -> None:
    client = baremetal.client()
    legacy = baremetal.client(version="1.92")
    response = legacy.post("/v1/runbooks", json={"name": "CUSTOM_RB", "steps": [RUNBOOK_STEP]})
    assert response.status_code == 201, response.text
    runbook = response.json()
    assert list(runbook) == ["uuid", "created_at", "updated_at", "name", "extra", "public", "owner",
                             "disable_ramdisk", "links", "steps"]
    # Before 1.112 a runbook's name is a trait; from 1.112 any logical name, and traits of its own.
    assert legacy.post("/v1/runbooks", json={"name": "plain", "steps": [RUNBOOK_STEP]}).status_code == 400
    response = client.post("/v1/runbooks", json={"name": "plain", "steps": [RUNBOOK_STEP], "description": "d"})
    assert response.status_code == 201, response.text
    assert response.json()["traits"] == [] and response.json()["description"] == "d"
    assert client.get("/v1/runbooks/CUSTOM_RB").json()["traits"] == ["CUSTOM_RB"]
    assert client.put("/v1/runbooks/plain/traits", json={"traits": ["CUSTOM_A", "CUSTOM_B"]}).status_code == 204
    assert client.put("/v1/runbooks/plain/traits/CUSTOM_C").status_code == 204
    assert client.get("/v1/runbooks/plain/traits").json() == {"traits": ["CUSTOM_A", "CUSTOM_B", "CUSTOM_C"]}
    assert client.delete("/v1/runbooks/plain/traits/CUSTOM_A").status_code == 204
    # Removing a trait the runbook no longer has is a no-op, as upstream.
    assert client.delete("/v1/runbooks/plain/traits/CUSTOM_A").status_code == 204
    assert client.put("/v1/runbooks/plain/traits/lower").status_code == 400
    assert baremetal.client(version="1.111").get("/v1/runbooks/plain/traits").status_code == 404
    patched = client.patch("/v1/runbooks/plain", json=[{"op": "replace", "path": "/disable_ramdisk",
                                                        "value": True}]).json()
    assert patched["disable_ramdisk"] is True
    names = [item["name"] for item in client.get("/v1/runbooks").json()["runbooks"]]
    assert names == ["CUSTOM_RB", "plain"]
    duplicate = client.post("/v1/runbooks", json={"name": "plain", "steps": [RUNBOOK_STEP]})
    assert duplicate.status_code == 409
    assert faultstring(duplicate) == "A runbook with name plain already exists."
    assert client.delete("/v1/runbooks/plain").status_code == 204
    assert client.get("/v1/runbooks/plain").status_code == 404


def test_projects_see_their_own_and_public_runbooks(baremetal) -> None:
    admin = baremetal.client()
    admin.post("/v1/runbooks", json={"name": "public", "steps": [RUNBOOK_STEP], "public": True})
    admin.post("/v1/runbooks", json={"name": "theirs", "steps": [RUNBOOK_STEP], "owner": "p2"})
    manager = baremetal.client(token="carol:p1")
    manager.headers["X-Roles"] = "manager,member,reader"
    response = manager.post("/v1/runbooks", json={"name": "mine", "steps": [RUNBOOK_STEP]})
    assert response.status_code == 201, response.text
    assert response.json()["owner"] == "p1"
    response = manager.post("/v1/runbooks", json={"name": "sneaky", "steps": [RUNBOOK_STEP], "owner": "p2"})
    assert response.status_code == 400
    assert sorted(item["name"] for item in manager.get("/v1/runbooks").json()["runbooks"]) == ["mine", "public"]
    assert manager.get("/v1/runbooks/theirs").status_code == 404
    assert manager.delete("/v1/runbooks/public").status_code == 403
    assert baremetal.client(token="dave:p1").post("/v1/runbooks", json={
        "name": "member", "steps": [RUNBOOK_STEP]}).status_code == 403


def test_clean_and_service_with_a_runbook(baremetal) -> None:
    client = baremetal.client()
    client.post("/v1/runbooks", json={"name": "rb", "steps": [RUNBOOK_STEP]})
    node = manageable(client)
    response = provision(client, "n1", "clean", runbook="rb")
    assert response.status_code == 400
    assert faultstring(response) == (f"Runbook {client.get('/v1/runbooks/rb').json()['uuid']} has no traits "
                                     "configured. Please ask an administrator to add traits to the runbook.")
    client.put("/v1/runbooks/rb/traits", json={"traits": ["CUSTOM_OK"]})
    response = provision(client, "n1", "clean", runbook="rb")
    assert response.status_code == 400
    assert faultstring(response).startswith(f"This runbook has not been approved for use on this node "
                                            f"{node['uuid']}.")
    client.put("/v1/nodes/n1/traits", json={"traits": ["CUSTOM_OK"]})
    response = provision(client, "n1", "clean", runbook="rb",
                         clean_steps=[{"interface": "vendor", "step": "log_passthrough"}])
    assert response.status_code == 400
    assert faultstring(response) == 'Please provide either "clean_steps" or a runbook, but not both.'
    assert provision(client, "n1", "clean", runbook="rb").status_code == 202
    cleaned = wait_for_state(client, "n1", "manageable", changed_since=node["provision_updated_at"])
    assert cleaned["driver_internal_info"]["fake_actions"] == ["vendor.log_passthrough"]
    assert provision(client, "n1", "provide", runbook="rb").status_code == 400
    missing = provision(client, "n1", "clean", runbook="nope")
    assert missing.status_code == 404
    assert faultstring(missing) == "Runbook nope could not be found."


# --------------------------------------------------------------- events


def test_events_are_validated_and_stored(baremetal) -> None:
    client = baremetal.client()
    port = str(uuid.uuid4())
    event = {"event": "network.bind_port", "port_id": port, "mac_address": "52:54:00:AA:BB:CC",
             "status": "ACTIVE", "device_id": str(uuid.uuid4()), "binding:host_id": str(uuid.uuid4()),
             "binding:vnic_type": "baremetal"}
    response = client.post("/v1/events", json={"events": [event]})
    assert response.status_code == 204, response.text
    with baremetal.state.db.read() as conn:
        stored = [dict(row._mapping) for row in conn.execute(sa.select(events))]
    assert [(row["event"], row["port_id"], row["mac_address"], row["vnic_type"]) for row in stored] == [
        ("network.bind_port", port, "52:54:00:aa:bb:cc", "baremetal")]
    for bad, message in (
        ({"events": []}, "Schema error: [] "),
        ({"events": [{**event, "event": "network.explode"}]}, "Schema error: 'network.explode' is not one of"),
        ({"events": [{**event, "port_id": "nope"}]}, "Schema error: 'nope' is not a 'uuid'"),
        ({"events": [{**event, "mac_address": "zz"}]}, "Schema error: 'zz' is not a 'mac-address'"),
        ({"events": [{**event, "extra": 1}]}, "Schema error: Additional properties are not allowed"),
    ):
        response = client.post("/v1/events", json=bad)
        assert response.status_code == 400, bad
        assert faultstring(response).startswith(message), faultstring(response)
    assert baremetal.client(token="alice:p1").post("/v1/events", json={"events": [event]}).status_code == 403
    with baremetal.state.db.read() as conn:
        assert len(list(conn.execute(sa.select(events)))) == 1
