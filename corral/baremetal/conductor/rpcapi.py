"""How the API reaches the conductor that owns a node.

The owner comes from the hash ring over live conductors; a conductor in
this process is called directly, any other over JSON-RPC.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from oslo_config import cfg

from corral.baremetal.conductor.jsonrpc import Client
from corral.baremetal.conductor.local import LOCAL
from corral.baremetal.conductor.manager import RPC_METHODS, owner_of
from corral.baremetal.db import conductors as conductor_db
from corral.core.db import Database
from corral.core.errors import BadRequest, ServiceUnavailable


def no_valid_host(driver: str, group: str) -> BadRequest:
    return BadRequest(
        f"No valid host was found. Reason: No conductor service registered which supports driver {driver} "
        f'for conductor group "{group}". Ensure the driver is valid and enabled.'
    )


class ConductorAPI:
    def __init__(self, conf: cfg.ConfigOpts, db: Database) -> None:
        self.conf = conf
        self.db = db
        self.client = Client.from_conf(conf)

    def live(self) -> list[dict[str, Any]]:
        with self.db.read() as conn:
            return conductor_db.alive(conn, self.conf.conductor.heartbeat_timeout)

    def owner(self, node: Mapping[str, Any], live: list[dict[str, Any]] | None = None) -> str | None:
        return owner_of(node, self.live() if live is None else live)

    def check_driver(self, driver: str, group: str) -> None:
        """400 unless a live conductor of ``group`` supports ``driver``."""
        node = {"uuid": "", "driver": driver, "conductor_group": group}
        if self.owner(node) is None:
            raise no_valid_host(driver, group)

    def call(self, node: Mapping[str, Any], method: str, **params: Any) -> Any:
        if method not in RPC_METHODS:
            raise ValueError(f"unknown conductor method {method}")
        live = self.live()
        host = owner_of(node, live)
        if host is None:
            raise no_valid_host(node["driver"], node.get("conductor_group") or "")
        local = LOCAL.get(host)
        if local is not None:
            return getattr(local, method)(**params)
        address = next((c["rpc_address"] for c in live if c["hostname"] == host), None)
        if not address:
            raise ServiceUnavailable(f"Conductor {host} has no RPC address and does not run in this process.")
        return self.client.call(address, method, **params)

    def close(self) -> None:
        self.client.close()
