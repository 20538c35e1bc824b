"""Upstream behaviour that openstacksdk's and python-ironicclient's own functional suites rely on."""

from __future__ import annotations

from tests.baremetal.support import faultstring
from tests.baremetal.test_ports import node
from tests.baremetal.test_provisioning import available, manageable

RUNBOOK_STEP = {"interface": "bios", "step": "factory_reset", "args": {}, "order": 10}


def _patch(client, ident, *operations):
    return client.patch(f"/v1/nodes/{ident}", json=list(operations))


def test_retiring_clears_the_reason_when_undone(baremetal) -> None:
    client = baremetal.client()
    manageable(client)
    retired = _patch(client, "n1", {"op": "replace", "path": "/retired", "value": True}).json()
    assert (retired["retired"], retired["retired_reason"]) == (True, None)
    reason = _patch(client, "n1", {"op": "replace", "path": "/retired_reason", "value": "old"}).json()
    assert (reason["retired"], reason["retired_reason"]) == (True, "old")
    undone = _patch(client, "n1", {"op": "replace", "path": "/retired", "value": False}).json()
    assert (undone["retired"], undone["retired_reason"]) == (False, None)
    assert client.get("/v1/nodes/n1").json()["retired_reason"] is None
    refused = _patch(client, "n1", {"op": "replace", "path": "/retired_reason", "value": "why"})
    assert refused.status_code == 400
    assert faultstring(refused) == "The retired_reason field can only be set when retired is True"
    both = _patch(client, "n1", {"op": "replace", "path": "/retired", "value": True},
                  {"op": "replace", "path": "/retired_reason", "value": "eol"}).json()
    assert (both["retired"], both["retired_reason"]) == (True, "eol")


def test_an_available_node_cannot_be_retired(baremetal) -> None:
    client = baremetal.client()
    created = available(client)
    response = _patch(client, "n1", {"op": "replace", "path": "/retired", "value": True})
    assert response.status_code == 409
    assert faultstring(response) == (f"Node {created['uuid']} can not have 'retired' set in provision state "
                                     "'available', the current state is 'available'")
    assert client.get("/v1/nodes/n1").json()["retired"] is False


def test_fake_hardware_supports_the_no_interfaces(baremetal) -> None:
    client = baremetal.client()
    created = node(client, name="plain", firmware_interface="no-firmware", bios_interface="no-bios",
                   vendor_interface="no-vendor")
    assert (created["firmware_interface"], created["bios_interface"], created["vendor_interface"]) == (
        "no-firmware", "no-bios", "no-vendor")
    assert client.get("/v1/nodes/plain/firmware").json() == {"firmware": []}
    # The fake implementations stay the defaults.
    assert node(client, name="default")["firmware_interface"] == "fake"
    driver = client.get("/v1/drivers/fake-hardware").json()
    assert driver["enabled_firmware_interfaces"] == ["fake", "no-firmware"]
    assert driver["default_firmware_interface"] == "fake"


def test_instance_name_follows_the_display_name_until_set(baremetal) -> None:
    client = baremetal.client()
    node(client, name="n1")
    _patch(client, "n1", {"op": "add", "path": "/instance_info", "value": {"display_name": "web-1"}})
    shown = client.get("/v1/nodes/n1").json()
    assert (shown["instance_name"], shown["instance_info"]) == ("web-1", {"display_name": "web-1"})
    assert [item["name"] for item in client.get("/v1/nodes?instance_name=web-1").json()["nodes"]] == ["n1"]
    _patch(client, "n1", {"op": "replace", "path": "/instance_name", "value": "explicit"})
    _patch(client, "n1", {"op": "replace", "path": "/instance_info", "value": {"display_name": "web-2"}})
    assert client.get("/v1/nodes/n1").json()["instance_name"] == "explicit"
    # A display name given together with an instance_name does not win over it.
    node(client, name="n2")
    _patch(client, "n2", {"op": "add", "path": "/instance_info", "value": {"display_name": "ignored"}},
           {"op": "add", "path": "/instance_name", "value": "chosen"})
    assert client.get("/v1/nodes/n2").json()["instance_name"] == "chosen"


def test_project_admin_runbooks_belong_to_its_project(baremetal) -> None:
    project_admin = baremetal.client(token="alice:p1")
    project_admin.headers["X-Roles"] = "admin,manager,member,reader"
    response = project_admin.post("/v1/runbooks", json={"name": "CUSTOM_MINE", "steps": [RUNBOOK_STEP]})
    assert response.status_code == 201, response.text
    assert (response.json()["owner"], response.json()["public"]) == ("p1", False)
    assert project_admin.get("/v1/runbooks/CUSTOM_MINE").json()["owner"] == "p1"
    public = project_admin.post("/v1/runbooks", json={"name": "CUSTOM_PUB", "steps": [RUNBOOK_STEP], "public": True})
    assert public.status_code == 400
    assert faultstring(public) == "Cannot create a public runbook as a project scoped admin."
    system_admin = baremetal.client(token="root")
    system_admin.headers["OpenStack-System-Scope"] = "all"
    system_admin.headers["X-Roles"] = "admin,member,reader"
    response = system_admin.post("/v1/runbooks", json={"name": "CUSTOM_SYS", "steps": [RUNBOOK_STEP]})
    assert response.status_code == 201, response.text
    assert response.json()["owner"] is None


def test_removing_a_trait_a_runbook_lacks_is_a_no_op(baremetal) -> None:
    client = baremetal.client()
    client.post("/v1/runbooks", json={"name": "rb", "steps": [RUNBOOK_STEP]})
    assert client.put("/v1/runbooks/rb/traits/CUSTOM_A").status_code == 204
    assert client.delete("/v1/runbooks/rb/traits/CUSTOM_A").status_code == 204
    assert client.get("/v1/runbooks/rb/traits").json() == {"traits": []}
    response = client.delete("/v1/runbooks/rb/traits/CUSTOM_A")
    assert (response.status_code, response.content) == (204, b"")
    assert client.get("/v1/runbooks/rb/traits").json() == {"traits": []}


def test_volume_lists_take_detail_at_every_version(baremetal) -> None:
    client = baremetal.client()
    owner = node(client, name="n1")
    connector = client.post("/v1/volume/connectors", json={
        "node_uuid": owner["uuid"], "type": "iqn", "connector_id": "iqn.2010-10.org.openstack:n1"}).json()
    target = client.post("/v1/volume/targets", json={
        "node_uuid": owner["uuid"], "volume_type": "iscsi", "boot_index": 0, "volume_id": "vol-1"}).json()
    old = baremetal.client(version="1.32")
    connectors = old.get(f"/v1/volume/connectors?node={owner['uuid']}&detail=True")
    assert connectors.status_code == 200, connectors.text
    assert connectors.json()["connectors"][0]["connector_id"] == connector["connector_id"]
    assert "extra" in connectors.json()["connectors"][0]
    targets = old.get("/v1/volume/targets?detail=True")
    assert targets.status_code == 200, targets.text
    assert targets.json()["targets"][0]["volume_id"] == target["volume_id"]
    assert "extra" in targets.json()["targets"][0]
    short = old.get("/v1/volume/targets?detail=False").json()["targets"][0]
    assert "extra" not in short
    both = old.get("/v1/volume/targets?detail=True&fields=uuid")
    assert both.status_code == 400


def test_step_sets_name_a_bad_uuid_in_upstreams_words(baremetal) -> None:
    client = baremetal.client()
    template = client.post("/v1/deploy_templates", json={
        "name": "CUSTOM_X", "uuid": "!@#$^*&%^",
        "steps": [{"interface": "bios", "step": "factory_reset", "args": {}, "priority": 10}]})
    assert template.status_code == 400
    assert faultstring(template) == "Expected UUID for uuid: !@#$^*&%^"
    runbook = client.post("/v1/runbooks", json={"name": "CUSTOM_X", "uuid": "nope", "steps": [RUNBOOK_STEP]})
    assert runbook.status_code == 400
    assert faultstring(runbook) == "Expected UUID for uuid: nope"
    assert client.get("/v1/deploy_templates").json() == {"deploy_templates": []}
    assert client.get("/v1/runbooks").json() == {"runbooks": []}


def test_drivers_list_raid_logical_disk_properties(baremetal) -> None:
    client = baremetal.client()
    properties = client.get("/v1/drivers/fake-hardware/raid/logical_disk_properties")
    assert properties.status_code == 200, properties.text
    assert sorted(properties.json()) == [
        "controller", "disk_type", "interface_type", "is_root_volume", "number_of_physical_disks",
        "physical_disks", "raid_level", "share_physical_disks", "size_gb", "volume_name"]
    assert properties.json()["size_gb"].endswith("Required.")
    assert baremetal.client(version="1.12").get(
        "/v1/drivers/fake-hardware/raid/logical_disk_properties").json() == properties.json()
    old = baremetal.client(version="1.11").get("/v1/drivers/fake-hardware/raid/logical_disk_properties")
    assert (old.status_code, faultstring(old)) == (406, "Request not acceptable.")
    unknown = client.get("/v1/drivers/nope/raid/logical_disk_properties")
    assert (unknown.status_code, faultstring(unknown)) == (404, "The driver 'nope' is unknown.")
    # Redfish's default RAID interface is "no-raid".
    redfish = client.get("/v1/drivers/redfish/raid/logical_disk_properties")
    assert (redfish.status_code, faultstring(redfish)) == (
        400, "Driver redfish does not support raid (disabled or not implemented).")


def test_step_set_schema_errors_name_the_document(baremetal) -> None:
    client = baremetal.client()
    runbook = client.post("/v1/runbooks", json={"name": "CUSTOM_Y", "steps": []})
    assert faultstring(runbook) == "Schema error for runbook: [] should be non-empty"
    template = client.post("/v1/deploy_templates", json={"name": "CUSTOM_Y", "steps": []})
    assert faultstring(template) == "Schema error for template: [] should be non-empty"
    client.post("/v1/runbooks", json={"name": "CUSTOM_RB", "steps": [RUNBOOK_STEP]})
    client.post("/v1/deploy_templates", json={"name": "CUSTOM_DT", "steps": [
        {"interface": "bios", "step": "factory_reset", "args": {}, "priority": 10}]})
    for path in ("/v1/runbooks/CUSTOM_RB", "/v1/deploy_templates/CUSTOM_DT"):
        response = client.patch(path, json=[{"op": "replace", "path": "/steps", "value": []}])
        assert (response.status_code, faultstring(response)) == (400, "Schema error for patch: [] should be non-empty")
