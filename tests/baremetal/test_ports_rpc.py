"""Port, port group, volume and VIF work done by conductors in other processes, over JSON-RPC."""

from __future__ import annotations

import pytest

from tests.baremetal.cluster_support import ConductorCluster
from tests.baremetal.support import faultstring, split_uuids
from tests.baremetal.test_conductors_ha import cluster  # noqa: F401 - the fixture


@pytest.mark.backends("postgresql")
def test_port_and_vif_work_over_json_rpc(cluster: ConductorCluster) -> None:  # noqa: F811 - the fixture
    client = cluster.client
    nodes = []
    for index, node_uuid in enumerate(split_uuids(("cond-fast", "cond-slow"), 4)):
        response = client.post("/v1/nodes", json={"driver": "fake-hardware", "name": f"r{index}", "uuid": node_uuid,
                                                  "network_interface": "flat"})
        assert response.status_code == 201, response.text
        nodes.append(response.json())
    # Every conductor gets some of the nodes.
    assert {node["conductor"] for node in client.get("/v1/nodes?fields=conductor").json()["nodes"]} == {
        "cond-fast", "cond-slow"}
    for index, node in enumerate(nodes):
        port = client.post("/v1/ports", json={"address": f"52:54:00:00:03:0{index}", "node_uuid": node["uuid"]})
        assert port.status_code == 201, port.text
        port_uuid = port.json()["uuid"]
        assert client.patch(f"/v1/ports/{port_uuid}", json=[
            {"op": "add", "path": "/extra/slot", "value": index}]).status_code == 200
        assert client.post(f"/v1/nodes/{node['uuid']}/vifs", json={"id": f"vif-{index}"}).status_code == 204
        assert client.get(f"/v1/nodes/{node['uuid']}/vifs").json() == {"vifs": [{"id": f"vif-{index}"}]}
        # Errors keep their status and text across the RPC hop.
        response = client.post(f"/v1/nodes/{node['uuid']}/vifs", json={"id": "vif-extra"})
        assert (response.status_code, faultstring(response)) == (
            400, "Unable to attach VIF vif-extra, not enough free physical ports.")
        response = client.delete(f"/v1/ports/{port_uuid}")
        assert (response.status_code, faultstring(response)) == (
            409, f"Cannot delete the port {port_uuid} as it is bound to VIF vif-{index} for use.")
        assert client.delete(f"/v1/nodes/{node['uuid']}/vifs/vif-{index}").status_code == 204
        assert client.delete(f"/v1/ports/{port_uuid}").status_code == 204
        connector = client.post("/v1/volume/connectors", json={"node_uuid": node["uuid"], "type": "iqn",
                                                               "connector_id": f"iqn.{index}"}).json()
        response = client.patch(f"/v1/volume/connectors/{connector['uuid']}", json=[
            {"op": "add", "path": "/extra/a", "value": 1}])
        assert (response.status_code, faultstring(response)) == (
            400, f'The requested action "volume connector update" can not be performed on node "{node["uuid"]}" '
                 'while it is in state "None".')
    assert client.get("/v1/ports").json() == {"ports": []}
