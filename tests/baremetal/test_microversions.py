"""Microversion boundaries 1.53-1.115, table-driven: fields, body keys, filters, endpoints."""

from __future__ import annotations

import pytest

from corral.baremetal.api import views
from corral.baremetal.microversions import VERSIONS
from tests.baremetal.support import faultstring
from tests.baremetal.test_nodes import create


def before(version: str) -> str:
    major, minor = version.split(".")
    return f"{major}.{int(minor) - 1}"


def test_every_version_up_to_1_115_is_declared(baremetal) -> None:
    assert VERSIONS == tuple(f"1.{minor}" for minor in range(1, 116))
    response = baremetal.client(version="latest").get("/v1/nodes")
    assert response.headers["X-OpenStack-Ironic-API-Version"] == "1.115"
    assert response.headers["X-OpenStack-Ironic-API-Maximum-Version"] == "1.115"
    assert baremetal.client(version=None).get("/v1/").json()["version"]["version"] == "1.115"
    assert baremetal.client(version="1.116").get("/v1/nodes").status_code == 406


# Node fields of later microversions: (field, version it appeared in).
LATER_FIELDS = [(field, f"{major}.{minor}") for field, (major, minor) in views.FIELD_VERSIONS.items()
                if (major, minor) > (1, 52)]


@pytest.mark.parametrize(("field", "version"), LATER_FIELDS)
def test_node_fields_appear_from_their_version(baremetal, field, version) -> None:
    create(baremetal.client(), name="n1")
    old = baremetal.client(version=before(version))
    new = baremetal.client(version=version)
    assert field not in old.get("/v1/nodes/n1").json()
    assert field in new.get("/v1/nodes/n1").json()
    assert field not in old.get("/v1/nodes/detail").json()["nodes"][0]
    assert field in new.get("/v1/nodes/detail").json()["nodes"][0]
    # Asking for it by name is refused before its version.
    assert old.get(f"/v1/nodes/n1?fields={field}").status_code == 406
    assert list(new.get(f"/v1/nodes/n1?fields={field}").json()) == [field, "links"]


# (field, a value accepted at its version) for body keys of later microversions.
LATER_BODY_KEYS = [
    ("retired", True, "1.61"),
    ("retired_reason", "old", "1.61"),
    ("lessee", "p2", "1.65"),
    ("network_data", {"links": [], "networks": [], "services": []}, "1.66"),
    ("boot_mode", "uefi", "1.75"),
    ("secure_boot", True, "1.75"),
    ("shard", "s1", "1.82"),
    ("firmware_interface", "fake", "1.86"),
    ("disable_power_off", True, "1.95"),
    ("instance_name", "vm-1", "1.104"),
]


@pytest.mark.parametrize(("field", "value", "version"), LATER_BODY_KEYS)
def test_create_refuses_body_keys_newer_than_the_request(baremetal, field, value, version) -> None:
    old = baremetal.client(version=before(version))
    response = old.post("/v1/nodes", json={"driver": "fake-hardware", "name": "n1", field: value})
    assert response.status_code == 406, response.text
    assert faultstring(response) == "Request not acceptable."
    assert baremetal.client().get("/v1/nodes").json()["nodes"] == []
    # An empty value is what old clients send: accepted.
    assert old.post("/v1/nodes", json={"driver": "fake-hardware", "name": "n2", field: None}).status_code == 201
    new = baremetal.client(version=version)
    response = new.post("/v1/nodes", json={"driver": "fake-hardware", "name": "n3", field: value})
    assert response.status_code == 201, response.text
    assert response.json()[field] == value


@pytest.mark.parametrize(("field", "value", "version"),
                         [case for case in LATER_BODY_KEYS if case[0] not in ("boot_mode", "secure_boot")])
def test_patch_refuses_fields_newer_than_the_request(baremetal, field, value, version) -> None:
    # A retired reason is only for a retired node.
    create(baremetal.client(), name="n1", **({"retired": True} if field == "retired_reason" else {}))
    old = baremetal.client(version=before(version))
    response = old.patch("/v1/nodes/n1", json=[{"op": "add", "path": f"/{field}", "value": value}])
    assert response.status_code == 406, response.text
    new = baremetal.client(version=version)
    response = new.patch("/v1/nodes/n1", json=[{"op": "add", "path": f"/{field}", "value": value}])
    assert response.status_code == 200, response.text
    assert response.json()[field] == value


def test_unknown_and_read_only_keys_are_refused(baremetal) -> None:
    client = baremetal.client()
    for key in ("bogus_field", "traits", "provision_state", "service_step", "health"):
        response = client.post("/v1/nodes", json={"driver": "fake-hardware", key: "x"})
        assert response.status_code == 400, key
        assert faultstring(response) == (f"Schema error for node: Additional properties are not allowed "
                                         f"('{key}' was unexpected)")
    create(client, name="n1")
    response = client.patch("/v1/nodes/n1", json=[{"op": "add", "path": "/health", "value": "OK"}])
    assert response.status_code == 400
    assert faultstring(response).startswith("Cannot patch /health. Only the following can be updated: "
                                            "automated_clean, bios_interface, boot_interface, chassis_uuid, "
                                            "conductor_group, console_interface, deploy_interface, description, "
                                            "disable_power_off, driver,")
    assert faultstring(response).endswith("vendor_interface, parent_node, firmware_interface")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"uuid": "not-a-uuid"}, "Expected UUID for uuid: not-a-uuid"),
        ({"instance_uuid": "1234"}, "Expected UUID for instance_uuid: 1234"),
        ({"chassis_uuid": "zz"}, "Expected UUID for chassis_uuid: zz"),
        ({"maintenance": "perhaps"}, "Invalid maintenance: Unrecognized value 'perhaps', acceptable values are:"),
        ({"automated_clean": "x"}, "Invalid automated_clean: Unrecognized value 'x'"),
        ({"retired": "sometimes"}, "Invalid retired: Unrecognized value 'sometimes'"),
        ({"name": "bad name!"}, "Cannot create node with invalid name 'bad name!'"),
        ({"conductor_group": "no spaces"}, "Expected a conductor group but received no spaces."),
        ({"description": 5}, "Schema error for node: 5 is not of type 'string', 'null'"),
        ({"resource_class": "x" * 81}, "Schema error for node: "),
        ({"driver_info": []}, "Schema error for node: [] is not of type 'object', 'null'"),
        ({"instance_name": ""}, "Schema error for node: ''"),
        ({"network_data": {"links": "x"}}, "Invalid network_data: "),
        ({"parent_node": "no-such-node"}, "Node no-such-node could not be found."),
    ],
)
def test_field_format_errors_use_upstream_wording(baremetal, body, message) -> None:
    client = baremetal.client()
    response = client.post("/v1/nodes", json={"driver": "fake-hardware", **body})
    assert response.status_code == 400, response.text
    assert faultstring(response).startswith(message), faultstring(response)
    assert client.get("/v1/nodes").json()["nodes"] == []


def test_booleans_given_as_text_are_accepted(baremetal) -> None:
    client = baremetal.client()
    response = client.post("/v1/nodes", json={"driver": "fake-hardware", "maintenance": "yes", "retired": "off"})
    assert response.status_code == 201
    assert (response.json()["maintenance"], response.json()["retired"]) == (True, False)


# (query, version it appeared in)
LATER_FILTERS = [
    ("retired=true", "1.61"),
    ("lessee=p1", "1.65"),
    ("shard=s1", "1.82"),
    ("sharded=true", "1.82"),
    ("parent_node=n1", "1.83"),
    ("include_children=true", "1.83"),
    ("instance_name=vm", "1.104"),
]


@pytest.mark.parametrize(("query", "version"), LATER_FILTERS)
def test_node_filters_exist_from_their_version(baremetal, query, version) -> None:
    create(baremetal.client(), name="n1")
    response = baremetal.client(version=before(version)).get(f"/v1/nodes?{query}")
    assert response.status_code == 406
    assert faultstring(response) == f"Request not acceptable. The minimal required API version should be {version}"
    assert baremetal.client(version=version).get(f"/v1/nodes?{query}").status_code == 200


# (method, path, version): endpoints answer 404 (reads) or 405 (writes) before their version.
LATER_ENDPOINTS = [
    ("POST", "/v1/events", "1.54"),
    ("GET", "/v1/deploy_templates", "1.55"),
    ("POST", "/v1/deploy_templates", "1.55"),
    ("GET", "/v1/nodes/n1/management/indicators", "1.63"),
    ("GET", "/v1/nodes/n1/history", "1.78"),
    ("GET", "/v1/nodes/n1/inventory", "1.81"),
    ("GET", "/v1/shards", "1.82"),
    ("GET", "/v1/nodes/n1/children", "1.83"),
    ("GET", "/v1/nodes/n1/firmware", "1.86"),
    ("POST", "/v1/nodes/n1/vmedia", "1.89"),
    ("DELETE", "/v1/nodes/n1/vmedia", "1.89"),
    ("GET", "/v1/runbooks", "1.92"),
    ("POST", "/v1/runbooks", "1.92"),
    ("GET", "/v1/nodes/n1/vmedia", "1.93"),
    ("GET", "/v1/runbooks/rb/traits", "1.112"),
]


@pytest.mark.parametrize(("method", "path", "version"), LATER_ENDPOINTS)
def test_endpoints_exist_from_their_version(baremetal, method, path, version) -> None:
    create(baremetal.client(), name="n1")
    response = baremetal.client(version=before(version)).request(method, path, json={})
    assert response.status_code == (404 if method == "GET" else 405), response.text
    # From their version they exist: whatever they answer, it is not "no such resource or method".
    response = baremetal.client(version=version).request(method, path, json={})
    assert response.status_code not in (405,), response.text
    if response.status_code == 404:
        assert "could not be found" in faultstring(response)


@pytest.mark.parametrize(
    ("target", "version"),
    [("deploy", "1.73"), ("undeploy", "1.73"), ("unhold", "1.85"), ("service", "1.87")],
)
def test_provision_verbs_exist_from_their_version(baremetal, target, version) -> None:
    create(baremetal.client(), name="n1")
    response = baremetal.client(version=before(version)).put("/v1/nodes/n1/states/provision",
                                                             json={"target": target})
    assert response.status_code == 406
    response = baremetal.client(version=version).put("/v1/nodes/n1/states/provision", json={"target": target})
    # The verb is known; a node in enroll cannot do it.
    assert response.status_code == 400
    assert faultstring(response).startswith(f'The requested action "{target}" can not be performed')


def test_provision_parameters_exist_from_their_version(baremetal) -> None:
    from tests.baremetal.test_provisioning import manageable

    client = baremetal.client()
    manageable(client)
    steps = [{"interface": "deploy", "step": "deploy", "args": {}, "priority": 50}]
    clean = [{"interface": "vendor", "step": "log_passthrough"}]
    old = baremetal.client(version="1.68")
    response = old.put("/v1/nodes/n1/states/provision", json={"target": "provide", "deploy_steps": steps})
    assert response.status_code == 406
    response = baremetal.client(version="1.69").put("/v1/nodes/n1/states/provision",
                                                    json={"target": "provide", "deploy_steps": steps})
    assert response.status_code == 400
    assert faultstring(response) == '"deploy_steps" is only valid when setting target provision state to active or ' \
                                    'rebuild'
    response = baremetal.client(version="1.69").put(
        "/v1/nodes/n1/states/provision", json={"target": "clean", "clean_steps": clean, "disable_ramdisk": True})
    assert response.status_code == 406
    assert faultstring(response) == "disable_ramdisk is not acceptable in this API version"
    response = client.put("/v1/nodes/n1/states/provision",
                          json={"target": "provide", "disable_ramdisk": True})
    assert response.status_code == 400
    assert faultstring(response) == "disable_ramdisk is supported only with manual cleaning or servicing"
    response = baremetal.client(version="1.91").put("/v1/nodes/n1/states/provision",
                                                    json={"target": "clean", "runbook": "rb"})
    assert response.status_code == 406


def test_json_suffix_is_part_of_names_from_1_91(baremetal) -> None:
    create(baremetal.client(), name="n1")
    assert baremetal.client(version="1.90").get("/v1/nodes/n1.json").json()["name"] == "n1"
    response = baremetal.client(version="1.91").get("/v1/nodes/n1.json")
    assert response.status_code == 404
    assert faultstring(response) == "Node n1.json could not be found."


def test_configdrive_objects_from_1_56_and_vendor_data_from_1_59(baremetal) -> None:
    from tests.baremetal.test_provisioning import available

    client = baremetal.client()
    available(client)
    drive = {"meta_data": {"hostname": "h"}, "user_data": "#!/bin/sh"}
    response = baremetal.client(version="1.55").put("/v1/nodes/n1/states/provision",
                                                    json={"target": "active", "configdrive": drive})
    assert response.status_code == 400
    assert faultstring(response) == ("Providing a JSON object for configdrive is only supported starting with API "
                                     "version 1.56")
    response = baremetal.client(version="1.58").put("/v1/nodes/n1/states/provision", json={
        "target": "active", "configdrive": {**drive, "vendor_data": {}}})
    assert response.status_code == 400
    assert faultstring(response).endswith("starting with API version 1.59")
    response = client.put("/v1/nodes/n1/states/provision", json={"target": "active", "configdrive": "not base64!"})
    assert response.status_code == 400
    assert faultstring(response) == "Invalid configdrive format: it is neither a JSON, nor a URL, nor a base64 string"
    response = client.put("/v1/nodes/n1/states/provision", json={"target": "active", "configdrive": {"bogus": 1}})
    assert response.status_code == 400
    assert faultstring(response).startswith("Invalid configdrive format: Additional properties are not allowed")
    response = client.put("/v1/nodes/n1/states/provision", json={"target": "active", "bogus": 1})
    assert response.status_code == 400
    assert faultstring(response) == ("Schema error for provision: Additional properties are not allowed ('bogus' "
                                     "was unexpected)")
    assert client.put("/v1/nodes/n1/states/provision", json={"target": "active",
                                                             "configdrive": drive}).status_code == 202


def test_bios_registry_fields_from_1_74(baremetal) -> None:
    from tests.baremetal.test_provisioning import manageable, provision
    from tests.baremetal.support import wait_for_state

    client = baremetal.client()
    node = manageable(client)
    provision(client, "n1", "clean", clean_steps=[{"interface": "bios", "step": "apply_configuration",
                                                    "args": {"settings": [{"name": "a", "value": "b"}]}}])
    wait_for_state(client, "n1", "manageable", changed_since=node["provision_updated_at"])
    old = baremetal.client(version="1.73")
    assert list(old.get("/v1/nodes/n1/bios").json()["bios"][0]) == ["name", "value", "created_at", "updated_at",
                                                                    "links"]
    assert old.get("/v1/nodes/n1/bios?detail=true").status_code == 406
    assert "attribute_type" not in old.get("/v1/nodes/n1/bios/a").json()["a"]
    detail = client.get("/v1/nodes/n1/bios?detail=true").json()["bios"][0]
    assert detail["attribute_type"] is None and detail["read_only"] is None
    assert "attribute_type" in client.get("/v1/nodes/n1/bios/a").json()["a"]
    assert list(client.get("/v1/nodes/n1/bios?fields=name").json()["bios"][0]) == ["name", "links"]


def test_driver_fields_from_1_77(baremetal) -> None:
    assert baremetal.client(version="1.76").get("/v1/drivers?fields=name").status_code == 406
    drivers = baremetal.client(version="1.77").get("/v1/drivers?fields=name,hosts").json()["drivers"]
    assert drivers and all(set(item) == {"name", "hosts"} for item in drivers)
    one = baremetal.client().get("/v1/drivers/fake-hardware?fields=name").json()
    assert one == {"name": "fake-hardware"}


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        ("/instance_uuid", "1234", "Expected UUID for instance_uuid: 1234"),
        ("/maintenance", "perhaps", "Invalid maintenance: Unrecognized value 'perhaps'"),
        ("/name", "bad name!", "Cannot change name to invalid name 'bad name!'"),
        ("/description", 5, "Schema error for node: 5 is not of type 'string', 'null'"),
        ("/network_data", {"links": 1}, "Invalid network_data: "),
        ("/parent_node", "ghost", "Node ghost could not be found."),
    ],
)
def test_patch_format_errors_use_upstream_wording(baremetal, path, value, message) -> None:
    client = baremetal.client()
    node = create(client, name="n1")
    response = client.patch("/v1/nodes/n1", json=[{"op": "add", "path": path, "value": value}])
    assert response.status_code == 400, response.text
    text = faultstring(response)
    assert text.startswith(message) or text == f"Node {node['uuid']}: {message}", text
    assert client.get("/v1/nodes/n1").json()["updated_at"] is None
