"""Port groups and VIFs over HTTP: membership, standalone ports, attach/detach on flat and noop."""

from __future__ import annotations

import re
import uuid

from tests.baremetal.support import faultstring, wait_for_state
from tests.baremetal.test_ports import node, port


def portgroup(client, node_uuid, **body):
    response = client.post("/v1/portgroups", json={"node_uuid": node_uuid, **body})
    assert response.status_code == 201, response.text
    return response.json()


def test_create_show_list_portgroup(baremetal) -> None:
    # The fields of 1.52; later ones are checked in test_resource_views.py.
    client = baremetal.client("1.52")
    n1 = node(client, name="n1")
    response = client.post("/v1/portgroups", json={"node_uuid": n1["uuid"], "name": "pg1",
                                                   "address": "AA:BB:CC:DD:EE:10"})
    assert response.status_code == 201
    created = response.json()
    assert response.headers["Location"] == f"{baremetal.url}/v1/portgroups/{created['uuid']}"
    assert list(created) == ["uuid", "created_at", "updated_at", "address", "extra", "internal_info", "mode", "name",
                             "properties", "standalone_ports_supported", "node_uuid", "links", "ports"]
    assert (created["address"], created["mode"], created["standalone_ports_supported"]) == (
        "aa:bb:cc:dd:ee:10", "active-backup", True)
    assert created["ports"] == [
        {"href": f"{baremetal.url}/v1/portgroups/{created['uuid']}/ports", "rel": "self"},
        {"href": f"{baremetal.url}/portgroups/{created['uuid']}/ports", "rel": "bookmark"},
    ]
    assert client.get("/v1/portgroups/pg1").json() == created
    listed = client.get("/v1/portgroups").json()["portgroups"]
    assert listed == [{"uuid": created["uuid"], "address": "aa:bb:cc:dd:ee:10", "name": "pg1",
                       "links": created["links"]}]
    assert client.get(f"/v1/nodes/{n1['uuid']}/portgroups").json()["portgroups"] == listed
    assert client.get("/v1/nodes/n1/portgroups/detail").json()["portgroups"] == [created]
    for body, status, message in [
        ({"node_uuid": n1["uuid"], "name": "pg1"}, 409, "A portgroup with name pg1 already exists."),
        ({"node_uuid": n1["uuid"], "address": "aa:bb:cc:dd:ee:10"}, 409,
         "A portgroup with MAC address aa:bb:cc:dd:ee:10 already exists."),
        ({"node_uuid": n1["uuid"], "name": "bad name"}, 400, "Cannot create portgroup with invalid name 'bad name'"),
        ({"node_uuid": str(uuid.UUID(int=4))}, 400, f"Node {uuid.UUID(int=4)} could not be found."),
    ]:
        response = client.post("/v1/portgroups", json=body)
        assert (response.status_code, faultstring(response)) == (status, message)
    # Port groups arrived in 1.23; mode and properties in 1.26.
    old = baremetal.client("1.22").get("/v1/portgroups")
    assert (old.status_code, faultstring(old)) == (404, "The API is not supported for this version")
    assert "mode" not in baremetal.client("1.25").get("/v1/portgroups/pg1").json()
    assert baremetal.client("1.25").get("/v1/portgroups/pg1?fields=mode").status_code == 406
    assert baremetal.client("1.25").post("/v1/portgroups", json={"node_uuid": n1["uuid"],
                                                                  "mode": "802.3ad"}).status_code == 406
    assert baremetal.client("1.23").get("/v1/nodes/n1/portgroups").status_code == 404


def test_ports_of_a_group_and_delete_rules(baremetal) -> None:
    client = baremetal.client()
    n1, n2 = node(client, name="n1"), node(client, name="n2")
    group = portgroup(client, n1["uuid"], name="bond0")
    member = port(client, n1["uuid"], "aa:bb:cc:dd:ee:01", portgroup_uuid=group["uuid"])
    port(client, n1["uuid"], "aa:bb:cc:dd:ee:02")
    assert member["portgroup_uuid"] == group["uuid"]
    assert [p["uuid"] for p in client.get("/v1/portgroups/bond0/ports").json()["ports"]] == [member["uuid"]]
    assert [p["uuid"] for p in client.get(f"/v1/ports?portgroup={group['uuid']}").json()["ports"]] == [
        member["uuid"]]
    response = client.post("/v1/ports", json={"address": "aa:bb:cc:dd:ee:03", "node_uuid": n2["uuid"],
                                              "portgroup_uuid": group["uuid"]})
    assert (response.status_code, faultstring(response)) == (
        400, "Port can not be added to a portgroup belonging to a different node.")
    response = client.delete("/v1/portgroups/bond0")
    assert response.status_code == 400
    # Upstream names the group by its database id in this message.
    assert re.fullmatch(r"Cannot complete the requested action because portgroup \d+ contains ports\.",
                        faultstring(response))
    assert client.patch(f"/v1/ports/{member['uuid']}", json=[
        {"op": "remove", "path": "/portgroup_uuid"}]).json()["portgroup_uuid"] is None
    assert client.delete("/v1/portgroups/bond0").status_code == 204
    assert client.get("/v1/portgroups/bond0").status_code == 404


def test_standalone_ports_and_physical_networks(baremetal) -> None:
    client = baremetal.client()
    # The flat network interface checks port changes against their group (noop does not).
    n1 = node(client, network_interface="flat")
    group = portgroup(client, n1["uuid"], standalone_ports_supported=False)
    response = client.post("/v1/ports", json={"address": "aa:bb:cc:dd:ee:01", "node_uuid": n1["uuid"],
                                              "portgroup_uuid": group["uuid"], "pxe_enabled": True})
    assert response.status_code == 409
    assert faultstring(response).startswith(f"Port group {group['uuid']} doesn't support standalone ports.")
    member = port(client, n1["uuid"], "aa:bb:cc:dd:ee:01", portgroup_uuid=group["uuid"], pxe_enabled=False,
                  physical_network="physnet1")
    response = client.post("/v1/ports", json={"address": "aa:bb:cc:dd:ee:02", "node_uuid": n1["uuid"],
                                              "portgroup_uuid": group["uuid"], "pxe_enabled": False,
                                              "physical_network": "physnet2"})
    assert (response.status_code, faultstring(response)) == (
        409, f"Port with physical network physnet2 cannot become a member of port group {group['uuid']} which "
             "has ports in physical network physnet1.")
    response = client.patch(f"/v1/ports/{member['uuid']}", json=[
        {"op": "replace", "path": "/pxe_enabled", "value": True}])
    assert response.status_code == 409
    other = portgroup(client, n1["uuid"])
    port(client, n1["uuid"], "aa:bb:cc:dd:ee:03", portgroup_uuid=other["uuid"])
    response = client.patch(f"/v1/portgroups/{other['uuid']}", json=[
        {"op": "replace", "path": "/standalone_ports_supported", "value": False}])
    assert (response.status_code, faultstring(response)) == (
        409, f"standalone_ports_supported can not be set to False, because the port group {other['uuid']} "
             "contains port with 'pxe_enabled' is set to True")


def test_patch_portgroup(baremetal) -> None:
    client = baremetal.client()
    n1 = node(client)
    group = portgroup(client, n1["uuid"], name="bond0")
    response = client.patch("/v1/portgroups/bond0", json=[
        {"op": "replace", "path": "/mode", "value": "802.3ad"},
        {"op": "add", "path": "/properties/miimon", "value": "100"},
        {"op": "replace", "path": "/name", "value": "bond1"},
    ])
    assert response.status_code == 200, response.text
    patched = response.json()
    assert (patched["mode"], patched["properties"], patched["name"]) == ("802.3ad", {"miimon": "100"}, "bond1")
    for operations, message in [
        ([{"op": "remove", "path": "/mode"}], "'mode' is a mandatory attribute and can not be removed"),
        ([{"op": "replace", "path": "/name", "value": "bad name"}],
         "Portgroup bond1: Cannot change name to invalid name 'bad name'"),
        ([{"op": "replace", "path": "/internal_info", "value": {}}], None),
    ]:
        response = client.patch("/v1/portgroups/bond1", json=operations)
        assert response.status_code == 400
        if message:
            assert faultstring(response) == message
    assert client.get(f"/v1/portgroups/{group['uuid']}").json() == patched


def _flat_node(client, name):
    return node(client, name=name, network_interface="flat")


def test_vif_attach_picks_free_port_and_detach_frees_it(baremetal) -> None:
    client = baremetal.client()
    n1 = _flat_node(client, "n1")
    no_pxe = port(client, n1["uuid"], "aa:bb:cc:dd:ee:01", pxe_enabled=False)
    pxe = port(client, n1["uuid"], "aa:bb:cc:dd:ee:02")
    assert client.post("/v1/nodes/n1/vifs", json={"id": "vif-a"}).status_code == 204
    # PXE-enabled ports are preferred.
    assert client.get(f"/v1/ports/{pxe['uuid']}").json()["internal_info"] == {"tenant_vif_port_id": "vif-a"}
    response = client.post("/v1/nodes/n1/vifs", json={"id": "vif-a"})
    assert (response.status_code, faultstring(response)) == (
        409, f"Unable to attach VIF because VIF vif-a is already attached to Ironic Port {pxe['uuid']}")
    assert client.post("/v1/nodes/n1/vifs", json={"id": "vif-b"}).status_code == 204
    assert client.get(f"/v1/ports/{no_pxe['uuid']}").json()["internal_info"] == {"tenant_vif_port_id": "vif-b"}
    # Listed in port order.
    assert client.get("/v1/nodes/n1/vifs").json() == {"vifs": [{"id": "vif-b"}, {"id": "vif-a"}]}
    response = client.post("/v1/nodes/n1/vifs", json={"id": "vif-c"})
    assert (response.status_code, faultstring(response)) == (
        400, "Unable to attach VIF vif-c, not enough free physical ports.")
    # A port carrying a VIF is not deleted (outside maintenance).
    response = client.delete(f"/v1/ports/{pxe['uuid']}")
    assert (response.status_code, faultstring(response)) == (
        409, f"Cannot delete the port {pxe['uuid']} as it is bound to VIF vif-a for use.")
    assert client.delete("/v1/nodes/n1/vifs/vif-a").status_code == 204
    assert client.get("/v1/nodes/n1/vifs").json() == {"vifs": [{"id": "vif-b"}]}
    assert client.get(f"/v1/ports/{pxe['uuid']}").json()["internal_info"] == {}
    assert client.delete(f"/v1/ports/{pxe['uuid']}").status_code == 204
    response = client.delete("/v1/nodes/n1/vifs/vif-a")
    assert (response.status_code, faultstring(response)) == (
        400, f"Unable to detach VIF vif-a from node {n1['uuid']} because it is not attached to it.")


def test_vif_prefers_port_group_with_members(baremetal) -> None:
    client = baremetal.client()
    n1 = _flat_node(client, "n1")
    empty = portgroup(client, n1["uuid"], name="empty")
    group = portgroup(client, n1["uuid"], name="bond0")
    port(client, n1["uuid"], "aa:bb:cc:dd:ee:01", portgroup_uuid=group["uuid"])
    port(client, n1["uuid"], "aa:bb:cc:dd:ee:02")
    assert client.post("/v1/nodes/n1/vifs", json={"id": "vif-a"}).status_code == 204
    assert client.get("/v1/portgroups/bond0").json()["internal_info"] == {"tenant_vif_port_id": "vif-a"}
    assert client.get(f"/v1/portgroups/{empty['uuid']}").json()["internal_info"] == {}
    assert client.get("/v1/nodes/n1/vifs").json() == {"vifs": [{"id": "vif-a"}]}
    assert client.delete("/v1/nodes/n1/vifs/vif-a").status_code == 204
    assert client.get("/v1/portgroups/bond0").json()["internal_info"] == {}


def test_vif_on_node_being_worked_on_is_locked_out(baremetal) -> None:
    client = baremetal.client()
    _flat_node(client, "n1")
    client.put("/v1/nodes/n1/states/provision", json={"target": "manage"})
    wait_for_state(client, "n1", "manageable")
    response = client.post("/v1/nodes/n1/vifs", json={})
    assert (response.status_code, faultstring(response)) == (400, "Schema error for vif: 'id' is a required property")
