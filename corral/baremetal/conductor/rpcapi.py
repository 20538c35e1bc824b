"""How the API reaches the conductor that owns a node.

The owner comes from the hash ring over live conductors; a conductor in
this process is called directly, any other over JSON-RPC.

A conductor that died keeps looking alive until its heartbeat is older
than ``[conductor] heartbeat_timeout``.  Meanwhile a call to it fails to
connect; that call goes at once to the conductor the ring picks without
it (the node's lock in the database keeps two conductors from working on
one node), and the dead one is passed over until it heartbeats again.
A call that reached a conductor is never repeated elsewhere.
"""

from __future__ import annotations

import datetime
import random
import threading
from collections.abc import Callable, Mapping
from typing import Any

from oslo_config import cfg

from corral.baremetal.conductor.jsonrpc import Client, ConductorUnreachable
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


class _Unreachable:
    """Conductors that refused a connection, each until its heartbeat moves on."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # hostname -> the heartbeat (updated_at) it had when it could not be reached
        self._since: dict[str, datetime.datetime | None] = {}

    def mark(self, conductor: Mapping[str, Any]) -> None:
        with self._lock:
            self._since[conductor["hostname"]] = conductor.get("updated_at")

    def filter(self, live: list[dict[str, Any]]) -> list[dict[str, Any]]:
        with self._lock:
            if not self._since:
                return live
            kept = []
            for conductor in live:
                host = conductor["hostname"]
                if host in self._since and self._since[host] == conductor.get("updated_at"):
                    continue
                self._since.pop(host, None)  # it heartbeated since: try it again
                kept.append(conductor)
            return kept


class ConductorAPI:
    def __init__(self, conf: cfg.ConfigOpts, db: Database) -> None:
        self.conf = conf
        self.db = db
        self.client = Client.from_conf(conf)
        self._unreachable = _Unreachable()

    def live(self) -> list[dict[str, Any]]:
        """Conductors with a recent heartbeat, less those this process could not reach since."""
        with self.db.read() as conn:
            return self._unreachable.filter(conductor_db.alive(conn, self.conf.conductor.heartbeat_timeout))

    def owner(self, node: Mapping[str, Any], live: list[dict[str, Any]] | None = None) -> str | None:
        return owner_of(node, self.live() if live is None else live)

    def check_driver(self, driver: str, group: str) -> None:
        """400 unless a live conductor of ``group`` supports ``driver``."""
        node = {"uuid": "", "driver": driver, "conductor_group": group}
        if self.owner(node) is None:
            raise no_valid_host(driver, group)

    def call(self, node: Mapping[str, Any], method: str, **params: Any) -> Any:
        """Call ``method`` on the conductor owning ``node`` (the next one if it cannot be reached)."""
        if method not in RPC_METHODS:
            raise ValueError(f"unknown conductor method {method}")

        def pick(live: list[dict[str, Any]]) -> dict[str, Any] | None:
            host = owner_of(node, live)
            return next((c for c in live if c["hostname"] == host), None)

        def none_left() -> Exception:
            return no_valid_host(node["driver"], node.get("conductor_group") or "")

        return self._call(pick, none_left, method, params)

    def call_any(self, method: str, **params: Any) -> Any:
        """Call ``method`` on any live conductor (allocations are not tied to one node)."""
        if method not in RPC_METHODS:
            raise ValueError(f"unknown conductor method {method}")

        def none_left() -> Exception:
            return ServiceUnavailable("No conductor service is available to process allocations; please retry later.")

        return self._call(lambda live: random.choice(live) if live else None, none_left, method, params)

    def _call(self, pick: Callable[[list[dict[str, Any]]], dict[str, Any] | None],
              none_left: Callable[[], Exception], method: str, params: dict[str, Any]) -> Any:
        live = self.live()
        while True:
            conductor = pick(live)
            if conductor is None:
                raise none_left()
            local = LOCAL.get(conductor["hostname"])
            if local is not None:
                return getattr(local, method)(**params)
            address = conductor.get("rpc_address")
            if not address:
                raise ServiceUnavailable(
                    f"Conductor {conductor['hostname']} has no RPC address and does not run in this process.")
            try:
                return self.client.call(address, method, **params)
            except ConductorUnreachable:
                self._unreachable.mark(conductor)
                live = [c for c in live if c["hostname"] != conductor["hostname"]]

    def close(self) -> None:
        self.client.close()
