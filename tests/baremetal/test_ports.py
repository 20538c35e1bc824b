"""Ports over HTTP: create, list (filters, fields, detail, paging), show, patch, delete, microversions."""

from __future__ import annotations

import uuid

from corral.baremetal.microversions import MAX_VERSION
from tests.baremetal.support import faultstring, wait_for_state

# Upstream's port body at its newest version, in wire order.
PORT_KEYS = [
    "uuid", "created_at", "updated_at", "address", "extra", "internal_info", "is_smartnic", "local_link_connection",
    "physical_network", "pxe_enabled", "node_uuid", "name", "description", "vendor", "category",
    "available_for_dynamic_portgroup", "links", "portgroup_uuid",
]
FIELD_VERSIONS = {
    "internal_info": (1, 18), "pxe_enabled": (1, 19), "local_link_connection": (1, 19),
    "portgroup_uuid": (1, 24), "physical_network": (1, 34), "is_smartnic": (1, 53), "name": (1, 88),
    "description": (1, 97), "vendor": (1, 100), "category": (1, 101), "available_for_dynamic_portgroup": (1, 111),
}
MAX = tuple(int(part) for part in MAX_VERSION.split("."))


def declared(version: tuple[int, int]) -> bool:
    """Whether the service declares ``version`` (newer fields are checked in test_resource_views)."""
    return version <= MAX


def node(client, **body):
    body.setdefault("driver", "fake-hardware")
    response = client.post("/v1/nodes", json=body)
    assert response.status_code == 201, response.text
    return response.json()


def port(client, node_uuid, address, **body):
    response = client.post("/v1/ports", json={"address": address, "node_uuid": node_uuid, **body})
    assert response.status_code == 201, response.text
    return response.json()


def test_create_port_body_as_upstream(baremetal) -> None:
    client = baremetal.client()
    n1 = node(client, name="n1")
    response = client.post("/v1/ports", json={"address": "AA:BB:CC:DD:EE:01", "node_uuid": n1["uuid"]})
    assert response.status_code == 201
    created = response.json()
    assert response.headers["Location"] == f"{baremetal.url}/v1/ports/{created['uuid']}"
    assert list(created) == [key for key in PORT_KEYS if declared(FIELD_VERSIONS.get(key, (1, 1)))]
    assert created["address"] == "aa:bb:cc:dd:ee:01"  # normalised
    assert (created["extra"], created["internal_info"], created["local_link_connection"]) == ({}, {}, {})
    assert created["pxe_enabled"] is True
    if declared((1, 53)):
        assert created["is_smartnic"] is False
    assert (created["node_uuid"], created["portgroup_uuid"], created["updated_at"]) == (n1["uuid"], None, None)
    assert created["links"] == [
        {"href": f"{baremetal.url}/v1/ports/{created['uuid']}", "rel": "self"},
        {"href": f"{baremetal.url}/ports/{created['uuid']}", "rel": "bookmark"},
    ]
    assert client.get(f"/v1/ports/{created['uuid']}").json() == created


def test_create_errors_change_nothing(baremetal) -> None:
    client = baremetal.client()
    n1 = node(client, name="n1")
    port(client, n1["uuid"], "aa:bb:cc:dd:ee:01")
    cases = [
        ({"address": "aa:bb:cc:dd:ee:01", "node_uuid": n1["uuid"]}, 409,
         "A port with MAC address aa:bb:cc:dd:ee:01 already exists."),
        ({"address": "AA:BB:CC:DD:EE:01", "node_uuid": n1["uuid"]}, 409,
         "A port with MAC address aa:bb:cc:dd:ee:01 already exists."),
        ({"address": "zz", "node_uuid": n1["uuid"]}, 400, "Expected valid MAC address for address: zz"),
        ({"address": "aa:bb:cc:dd:ee:02", "node_uuid": "nope"}, 400, "Expected UUID for node_uuid: nope"),
        ({"address": "aa:bb:cc:dd:ee:02", "node_uuid": str(uuid.UUID(int=7))}, 400,
         f"Node {uuid.UUID(int=7)} could not be found."),
        ({"address": "aa:bb:cc:dd:ee:02", "node_uuid": n1["uuid"], "portgroup_uuid": str(uuid.UUID(int=8))}, 400,
         f"Portgroup {uuid.UUID(int=8)} could not be found."),
        ({"address": "aa:bb:cc:dd:ee:02", "node_uuid": n1["uuid"], "bogus": 1}, 400,
         "Schema error for port: Additional properties are not allowed ('bogus' was unexpected)"),
        ({"address": "aa:bb:cc:dd:ee:02", "node_uuid": n1["uuid"], "physical_network": ""}, 400,
         "A non-empty value is required when setting physical_network"),
        ({"address": "aa:bb:cc:dd:ee:02", "node_uuid": n1["uuid"], "is_smartnic": True},
         *((400, "Smart NIC port must have port_id and hostname in local_link_connection") if declared((1, 53))
           else (406, "Request not acceptable."))),
        ({"address": "aa:bb:cc:dd:ee:02", "node_uuid": n1["uuid"],
          "local_link_connection": {"port_id": "p1", "switch_id": "not-a-switch"}}, 400,
         "Expected a MAC address or OpenFlow datapath ID but received not-a-switch."),
        ({"address": "aa:bb:cc:dd:ee:02", "node_uuid": n1["uuid"], "pxe_enabled": "maybe"}, 400, None),
    ]
    for body, status, message in cases:
        response = client.post("/v1/ports", json=body)
        assert response.status_code == status, (body, response.text)
        if message is not None:
            assert faultstring(response) == message
    response = client.post("/v1/ports", json={"address": "aa:bb:cc:dd:ee:03"})
    assert response.status_code == 400
    assert faultstring(response).startswith("Schema error for port:")
    assert len(client.get("/v1/ports").json()["ports"]) == 1


def test_local_link_connection_normalised_and_validated(baremetal) -> None:
    client = baremetal.client()
    n1 = node(client)
    created = port(client, n1["uuid"], "aa:bb:cc:dd:ee:01",
                   local_link_connection={"port_id": "Ethernet1/1", "switch_id": "0A:1B:2C:3D:4E:5F",
                                          "switch_info": "tor1"})
    assert created["local_link_connection"]["switch_id"] == "0a:1b:2c:3d:4e:5f"
    smart_nic = port(client, n1["uuid"], "aa:bb:cc:dd:ee:02", local_link_connection={"port_id": "p", "hostname": "h"})
    assert smart_nic["local_link_connection"] == {"port_id": "p", "hostname": "h"}
    response = client.post("/v1/ports", json={"address": "aa:bb:cc:dd:ee:03", "node_uuid": n1["uuid"],
                                              "local_link_connection": {"port_id": "p"}})
    assert response.status_code == 400
    assert faultstring(response).startswith("Schema error for local_link_connection:")
    # network_type arrived in 1.64.
    response = baremetal.client("1.52").post("/v1/ports", json={
        "address": "aa:bb:cc:dd:ee:04", "node_uuid": n1["uuid"], "local_link_connection": {"network_type": "unmanaged"}})
    assert response.status_code == 406


def test_list_filters_paging_and_fields(baremetal) -> None:
    client = baremetal.client()
    n1, n2 = node(client, name="n1"), node(client, name="n2")
    p1 = port(client, n1["uuid"], "aa:bb:cc:dd:ee:01", extra={"description": "uplink one"})
    p2 = port(client, n1["uuid"], "aa:bb:cc:dd:ee:02")
    p3 = port(client, n2["uuid"], "aa:bb:cc:dd:ee:03")
    listed = client.get("/v1/ports").json()
    assert [item["uuid"] for item in listed["ports"]] == [p1["uuid"], p2["uuid"], p3["uuid"]]
    assert set(listed["ports"][0]) == {"uuid", "address", "links"}
    assert "next" not in listed
    assert [p["uuid"] for p in client.get("/v1/ports?node=n1").json()["ports"]] == [p1["uuid"], p2["uuid"]]
    assert [p["uuid"] for p in client.get(f"/v1/ports?node_uuid={n2['uuid']}").json()["ports"]] == [p3["uuid"]]
    assert [p["uuid"] for p in client.get("/v1/nodes/n2/ports").json()["ports"]] == [p3["uuid"]]
    assert [p["uuid"] for p in client.get("/v1/ports?address=AA:BB:CC:DD:EE:02").json()["ports"]] == [p2["uuid"]]
    assert client.get("/v1/ports?address=aa:bb:cc:dd:ee:09").json() == {"ports": []}
    if not declared((1, 97)):
        assert client.get("/v1/ports?description_contains=uplink").status_code == 406
    response = client.get("/v1/ports?node=nope")
    assert (response.status_code, faultstring(response)) == (404, "Node nope could not be found.")
    # Paging: the next link keeps sort, fields and limit, as upstream builds it.
    page = client.get("/v1/ports?limit=2&sort_key=address&sort_dir=desc").json()
    assert [p["uuid"] for p in page["ports"]] == [p3["uuid"], p2["uuid"]]
    assert page["next"] == (f"{baremetal.url}/v1/ports?sort_key=address&sort_dir=desc&fields=uuid,address&limit=2"
                            f"&marker={p2['uuid']}")
    rest = client.get(page["next"].replace(baremetal.url, "")).json()
    assert [p["uuid"] for p in rest["ports"]] == [p1["uuid"]]
    fields = client.get("/v1/ports?fields=uuid,node_uuid,pxe_enabled").json()["ports"][0]
    assert fields == {"uuid": p1["uuid"], "node_uuid": n1["uuid"], "pxe_enabled": True, "links": p1["links"]}
    detail = client.get("/v1/ports?detail=True").json()["ports"]
    assert detail[0] == p1 and len(detail) == 3
    assert client.get("/v1/ports/detail").json()["ports"] == detail
    assert client.get("/v1/nodes/n1/ports/detail").json()["ports"] == detail[:2]
    for query, status, message in [
        ("fields=bogus", 400, 'Field(s) "bogus" are not valid'),
        ("sort_key=extra", 400, "The sort_key value extra is an invalid field for sorting"),
        ("sort_key=bogus", 400, 'The sort_key value "bogus" is an invalid field for sorting'),
        ("fields=uuid&detail=True", 400, "Can not specify ?detail=True and fields in the same request."),
        (f"node=n1&portgroup={uuid.UUID(int=1)}", 403, "Operation not permitted."),
        ("limit=0", 400, "Limit must be positive"),
        ("limit=cow", 400, "Expected an integer for limit: cow"),
        ("marker=nope", 400, "Expected UUID for marker: nope"),
        ("detail=maybe", 400, "Invalid detail: Unrecognized value 'maybe', acceptable values are: '0', '1', 'f', "
                              "'false', 'n', 'no', 'off', 'on', 't', 'true', 'y', 'yes'"),
        (f"marker={uuid.UUID(int=3)}", 404, f"Port {uuid.UUID(int=3)} could not be found."),
    ]:
        response = client.get(f"/v1/ports?{query}")
        assert (response.status_code, faultstring(response)) == (status, message), query
    response = client.get("/v1/ports/detail?fields=uuid")
    assert (response.status_code, faultstring(response)) == (400, "Unexpected arguments: fields")


def test_field_microversions(baremetal) -> None:
    client = baremetal.client()
    n1 = node(client)
    extra = {key: value for key, value in {"physical_network": "physnet1", "is_smartnic": False}.items()
             if declared(FIELD_VERSIONS[key])}
    created = port(client, n1["uuid"], "aa:bb:cc:dd:ee:01",
                   local_link_connection={"port_id": "p", "switch_id": "aa:aa:aa:aa:aa:aa"}, **extra)
    ident = created["uuid"]
    checked = 0
    for field, (major, minor) in FIELD_VERSIONS.items():
        if not declared((major, minor)):
            continue
        before = baremetal.client(f"{major}.{minor - 1}").get(f"/v1/ports/{ident}").json()
        at = baremetal.client(f"{major}.{minor}").get(f"/v1/ports/{ident}").json()
        assert field not in before and field in at, field
        if field != "internal_info" and minor - 1 >= 8:
            response = baremetal.client(f"{major}.{minor - 1}").get(f"/v1/ports/{ident}?fields={field}")
            assert response.status_code == 406, field
            assert faultstring(response) == "Request not acceptable."
        checked += 1
    assert checked >= 5
    assert baremetal.client("1.7").get(f"/v1/ports/{ident}?fields=uuid").status_code == 406
    # Body keys newer than the request: 406, nothing stored.
    for key, value, version in [("pxe_enabled", True, "1.18"), ("physical_network", "p", "1.33"),
                                ("portgroup_uuid", str(uuid.UUID(int=1)), "1.23"),
                                ("name", "eth1", "1.52"), ("description", "x", "1.52"), ("vendor", "x", "1.52"),
                                ("category", "x", "1.52"), ("available_for_dynamic_portgroup", True, "1.52")]:
        response = baremetal.client(version).post("/v1/ports", json={
            "address": "aa:bb:cc:dd:ee:02", "node_uuid": n1["uuid"], key: value})
        assert (response.status_code, faultstring(response)) == (406, "Request not acceptable."), key
    response = baremetal.client("1.52").post("/v1/ports", json={"address": "aa:bb:cc:dd:ee:02", "node_ident": "x"})
    assert response.status_code == 406
    assert len(client.get("/v1/ports").json()["ports"]) == 1


def test_ovn_vtep_keys_refused_before_1_90(baremetal) -> None:
    client = baremetal.client("1.52")
    n1 = node(client)
    link = {"port_id": "p", "vtep-logical-switch": "ls", "vtep-physical-switch": "ps"}
    response = client.post("/v1/ports", json={"address": "aa:bb:cc:dd:ee:01", "node_uuid": n1["uuid"],
                                              "local_link_connection": link})
    assert response.status_code == 406


def test_patch_port(baremetal) -> None:
    client = baremetal.client()
    n1, n2 = node(client, name="n1"), node(client, name="n2")
    created = port(client, n1["uuid"], "aa:bb:cc:dd:ee:01")
    ident = created["uuid"]
    response = client.patch(f"/v1/ports/{ident}", json=[
        {"op": "replace", "path": "/address", "value": "AA:BB:CC:DD:EE:09"},
        {"op": "add", "path": "/extra/rack", "value": "r1"},
        {"op": "replace", "path": "/pxe_enabled", "value": False},
        {"op": "replace", "path": "/node_uuid", "value": n2["uuid"]},
    ])
    assert response.status_code == 200, response.text
    patched = response.json()
    assert (patched["address"], patched["extra"], patched["pxe_enabled"], patched["node_uuid"]) == (
        "aa:bb:cc:dd:ee:09", {"rack": "r1"}, False, n2["uuid"])
    assert patched["updated_at"] is not None
    other = port(client, n1["uuid"], "aa:bb:cc:dd:ee:02")
    response = client.patch(f"/v1/ports/{other['uuid']}", json=[
        {"op": "replace", "path": "/address", "value": "aa:bb:cc:dd:ee:09"}])
    assert (response.status_code, faultstring(response)) == (409, "A port with MAC address aa:bb:cc:dd:ee:09 "
                                                                  "already exists.")
    for operations, status, message in [
        ([{"op": "replace", "path": "/uuid", "value": str(uuid.uuid4())}], 400, None),
        ([{"op": "replace", "path": "/internal_info", "value": {}}], 400, None),
        ([{"op": "replace", "path": "/address", "value": "nope"}], 400, "Expected valid MAC address for address: nope"),
        ([{"op": "replace", "path": "/physical_network", "value": ""}], 400,
         "A non-empty value is required when setting physical_network"),
        ([{"op": "replace", "path": "/node_uuid", "value": str(uuid.UUID(int=5))}], 400,
         f"Unable to apply the requested node_uuid '{uuid.UUID(int=5)}'. Requested value was invalid."),
        ([{"op": "remove", "path": "/address"}], 400, "Schema error for patch: 'address' is a required property"),
        ([{"op": "remove", "path": "/extra/missing"}], 400, None),
    ]:
        response = client.patch(f"/v1/ports/{ident}", json=operations)
        assert response.status_code == status, (operations, response.text)
        if message:
            assert faultstring(response) == message
    assert client.get(f"/v1/ports/{ident}").json() == patched
    # name (1.88) cannot be patched with an older version.
    response = baremetal.client("1.52").patch(f"/v1/ports/{ident}", json=[
        {"op": "add", "path": "/name", "value": "eth0"}])
    assert response.status_code == 406


def test_connectivity_changes_only_in_allowed_states(baremetal) -> None:
    client = baremetal.client()
    n1 = node(client, name="n1")
    created = port(client, n1["uuid"], "aa:bb:cc:dd:ee:01")
    client.put("/v1/nodes/n1/states/provision", json={"target": "manage"})
    wait_for_state(client, "n1", "manageable")
    client.put("/v1/nodes/n1/states/provision", json={"target": "provide"})
    wait_for_state(client, "n1", "available")
    response = client.patch(f"/v1/ports/{created['uuid']}", json=[
        {"op": "replace", "path": "/pxe_enabled", "value": False}])
    assert response.status_code == 409
    assert faultstring(response).startswith(
        f"Port {created['uuid']} can not have any connectivity attributes (local_link_connection, "
        "physical_network, portgroup_id, pxe_enabled) updated unless node")
    assert faultstring(response).endswith("The current state is available.")
    # Extra is not a connectivity attribute; maintenance lifts the rule.
    assert client.patch(f"/v1/ports/{created['uuid']}", json=[
        {"op": "add", "path": "/extra/a", "value": 1}]).status_code == 200
    client.put("/v1/nodes/n1/maintenance", json={})
    assert client.patch(f"/v1/ports/{created['uuid']}", json=[
        {"op": "replace", "path": "/pxe_enabled", "value": False}]).status_code == 200


def test_delete_port_and_node_deletes_its_ports(baremetal) -> None:
    client = baremetal.client()
    n1 = node(client, name="n1")
    p1 = port(client, n1["uuid"], "aa:bb:cc:dd:ee:01")
    port(client, n1["uuid"], "aa:bb:cc:dd:ee:02")
    response = client.delete("/v1/ports/not-a-uuid")
    assert (response.status_code, faultstring(response)) == (400, "Expected UUID for port_uuid: not-a-uuid")
    assert client.delete(f"/v1/ports/{p1['uuid']}").status_code == 204
    response = client.get(f"/v1/ports/{p1['uuid']}")
    assert (response.status_code, faultstring(response)) == (404, f"Port {p1['uuid']} could not be found.")
    assert client.delete("/v1/nodes/n1").status_code == 204
    assert client.get("/v1/ports").json() == {"ports": []}
    # The address is free again.
    n2 = node(client, name="n2")
    port(client, n2["uuid"], "aa:bb:cc:dd:ee:02")


def test_ports_of_other_projects_are_hidden(baremetal) -> None:
    admin = baremetal.client()
    mine = node(admin, name="mine", owner="p1")
    theirs = node(admin, name="theirs", owner="p2")
    p1 = port(admin, mine["uuid"], "aa:bb:cc:dd:ee:01")
    p2 = port(admin, theirs["uuid"], "aa:bb:cc:dd:ee:02")
    member = baremetal.client(token="someone:p1").with_headers(X_Roles="reader")
    assert [p["uuid"] for p in member.get("/v1/ports").json()["ports"]] == [p1["uuid"]]
    assert member.get(f"/v1/ports/{p2['uuid']}").status_code == 404
    assert member.get(f"/v1/ports/{p1['uuid']}").status_code == 200
    response = member.post("/v1/ports", json={"address": "aa:bb:cc:dd:ee:03", "node_uuid": mine["uuid"]})
    assert response.status_code == 403
