"""What the ironic virt driver tests share: ``corral serve`` with its clouds.yaml, driven as a user would."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import requests

from tests.baremetal.support import wait_for
from tests.support import osc
from tests.support.databases import DatabaseFactory
from tests.support.process import CorralProcess

IRONIC = {"X-OpenStack-Ironic-API-Version": "1.82"}


def corral_sections(database_factory: DatabaseFactory, host: str, baremetal_url: str) -> dict[str, dict[str, Any]]:
    """``corral serve``'s configuration, every service's database on the factory's backend, fast intervals."""
    return {
        "DEFAULT": {"host": host, "update_resources_interval": 1, "sync_power_state_interval": 1},
        "compute": {"poll_interval": 0.1, "cell0_connection": database_factory.new_url("cell0")},
        "ironic": {"api_retry_interval": 0.1},
        "identity": {"password_hash_rounds": 8},
        "identity_database": {"connection": database_factory.new_url("identity")},
        "placement_database": {"connection": database_factory.new_url("placement")},
        "image_database": {"connection": database_factory.new_url("image")},
        "baremetal_database": {"connection": baremetal_url},
        "api_database": {"connection": database_factory.new_url("compute_api")},
        "database": {"connection": database_factory.new_url("cell1")},
        "corral_database": {"max_pool_size": 4, "max_overflow": 8},
    }


class BareMetalCloud:
    def __init__(self, process: CorralProcess, data_dir: Path, baremetal_url: str) -> None:
        self.process = process
        self.url = process.url
        self.baremetal_url = baremetal_url
        self.env = {"OS_CLIENT_CONFIG_FILE": str(data_dir / "clouds.yaml"), "OS_CLOUD": "corral"}
        self.token = self.osc("token", "issue")["id"]
        self.nodes: dict[str, str] = {}
        # The public image the servers boot from.
        self.image = ""

    def run(self, *args: str, json_output: bool = True) -> osc.OscResult:
        """``openstack`` in this process (a child process per command would cost seconds)."""
        command = ["--os-compute-api-version", "2.73", *args]
        if json_output:
            command += ["-f", "json"]
        return osc.run(command, env=self.env)

    def osc(self, *args: str, json_output: bool = True) -> Any:
        result = self.run(*args, json_output=json_output)
        assert result.code == 0, f"openstack {' '.join(args)} failed:\n{result.stderr}\n{self.process.log()[-3000:]}"
        return json.loads(result.stdout) if json_output and result.stdout.strip() else result.stdout

    def api(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        headers = {"X-Auth-Token": self.token, **IRONIC, **kwargs.pop("headers", {})}
        return requests.request(method, self.url + path, headers=headers, timeout=30, **kwargs)

    def node(self, name: str) -> dict[str, Any]:
        response = self.api("GET", f"/baremetal/v1/nodes/{name}")
        assert response.status_code == 200, response.text
        return response.json()  # type: ignore[no-any-return]

    def wait_node(self, name: str, provision_state: str, timeout: float = 30) -> dict[str, Any]:
        def reached() -> dict[str, Any] | None:
            node = self.node(name)
            settled = node["provision_state"] == provision_state and node["target_provision_state"] is None
            return node if settled and node["reservation"] is None else None

        return wait_for(reached, timeout=timeout, interval=0.1)  # type: ignore[no-any-return]

    def server(self, server_id: str) -> dict[str, Any]:
        response = self.api("GET", f"/compute/v2.1/servers/{server_id}",
                            headers={"OpenStack-API-Version": "compute 2.73"})
        assert response.status_code == 200, response.text
        return response.json()["server"]  # type: ignore[no-any-return]

    def wait_server(self, server_id: str, status: str, timeout: float = 30) -> dict[str, Any]:
        def reached() -> dict[str, Any] | None:
            server = self.server(server_id)
            return server if server["status"] == status and server["OS-EXT-STS:task_state"] is None else None

        return wait_for(reached, timeout=timeout, interval=0.1)  # type: ignore[no-any-return]

    def placement(self, path: str) -> requests.Response:
        return self.api("GET", "/placement" + path, headers={"OpenStack-API-Version": "placement 1.36"})

    def allocations(self, consumer: str) -> dict[str, Any]:
        response = self.placement(f"/allocations/{consumer}")
        return response.json()["allocations"]  # type: ignore[no-any-return]

    def inventory(self, node_uuid: str, resource_class: str) -> dict[str, Any]:
        response = self.placement(f"/resource_providers/{node_uuid}/inventories")
        assert response.status_code == 200, response.text
        return response.json()["inventories"][resource_class]  # type: ignore[no-any-return]


