"""How the API reaches the conductor that owns a node.

The owner comes from the hash ring over live conductors; a conductor in
this process is called directly, any other over JSON-RPC.

A conductor that died keeps looking alive until its heartbeat is older
than ``[conductor] heartbeat_timeout``, and one cut off from this host
only (a partial partition) looks alive for as long as it lasts.  A call
to either fails to connect; that call goes at once to the conductor the
ring picks without it (the node's lock in the database keeps two
conductors from working on one node), and the circuit breaker of its
address (:mod:`corral.baremetal.conductor.breaker`) passes it over until
a probe in the background reaches it again.  When the ring has no
reachable conductor left for a node, the call fails at once with 503.
A call that reached a conductor is never repeated elsewhere.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from typing import Any

from oslo_config import cfg

from corral.baremetal.conductor.breaker import CircuitBreaker, tcp_probe
from corral.baremetal.conductor.jsonrpc import CONNECT_TIMEOUT, Client, ConductorUnreachable
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


def unreachable(node: Mapping[str, Any], hosts: list[str]) -> ServiceUnavailable:
    serving = f"serving node {node['uuid']}" if node.get("uuid") else f"supporting driver {node['driver']}"
    return ServiceUnavailable(
        f"Requested action cannot be performed: the conductor(s) {', '.join(hosts)} {serving} "
        "cannot be reached from this API service; please retry later."
    )


class ConductorAPI:
    def __init__(self, conf: cfg.ConfigOpts, db: Database, *, breaker: CircuitBreaker | None = None) -> None:
        self.conf = conf
        self.db = db
        self.client = Client.from_conf(conf)
        timeout = min(CONNECT_TIMEOUT, conf.json_rpc.timeout)
        self.breaker = breaker or CircuitBreaker(lambda address: tcp_probe(address, timeout))

    def live(self) -> list[dict[str, Any]]:
        """Conductors with a recent heartbeat, less those this process cannot reach now."""
        return self._reachable(self._alive())

    def _alive(self) -> list[dict[str, Any]]:
        with self.db.read() as conn:
            return conductor_db.alive(conn, self.conf.conductor.heartbeat_timeout)

    def _reachable(self, live: list[dict[str, Any]]) -> list[dict[str, Any]]:
        # A conductor in this process is always reachable; one without an address is reported when picked.
        return [c for c in live if LOCAL.get(c["hostname"]) is not None or not c.get("rpc_address")
                or self.breaker.usable(c["rpc_address"])]

    def owner(self, node: Mapping[str, Any], live: list[dict[str, Any]] | None = None) -> str | None:
        return owner_of(node, self.live() if live is None else live)

    def check_driver(self, driver: str, group: str) -> None:
        """400 unless a live conductor of ``group`` supports ``driver``."""
        node = {"uuid": "", "driver": driver, "conductor_group": group}
        alive = self._alive()
        if owner_of(node, self._reachable(alive)) is None:
            passed_over = sorted(c["hostname"] for c in alive if owner_of(node, [c]) is not None)
            if passed_over:
                raise unreachable(node, passed_over)
            raise no_valid_host(driver, group)

    def call(self, node: Mapping[str, Any], method: str, **params: Any) -> Any:
        """Call ``method`` on the conductor owning ``node`` (the next one if it cannot be reached)."""
        if method not in RPC_METHODS:
            raise ValueError(f"unknown conductor method {method}")

        def pick(live: list[dict[str, Any]]) -> dict[str, Any] | None:
            host = owner_of(node, live)
            return next((c for c in live if c["hostname"] == host), None)

        def none_left(skipped: list[dict[str, Any]]) -> Exception:
            # Conductors for the node exist but none can be reached: a 503 to retry, not a 400.
            passed_over = sorted(c["hostname"] for c in skipped if pick([c]) is not None)
            if passed_over:
                return unreachable(node, passed_over)
            return no_valid_host(node["driver"], node.get("conductor_group") or "")

        return self._call(pick, none_left, method, params)

    def call_any(self, method: str, **params: Any) -> Any:
        """Call ``method`` on any live conductor (allocations are not tied to one node)."""
        if method not in RPC_METHODS:
            raise ValueError(f"unknown conductor method {method}")

        def none_left(skipped: list[dict[str, Any]]) -> Exception:
            return ServiceUnavailable("No conductor service is available to process allocations; please retry later.")

        return self._call(lambda live: random.choice(live) if live else None, none_left, method, params)

    def _call(self, pick: Callable[[list[dict[str, Any]]], dict[str, Any] | None],
              none_left: Callable[[list[dict[str, Any]]], Exception], method: str, params: dict[str, Any]) -> Any:
        alive = self._alive()
        live = self._reachable(alive)
        while True:
            conductor = pick(live)
            if conductor is None:
                kept = {c["hostname"] for c in live}
                raise none_left([c for c in alive if c["hostname"] not in kept])
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
                self.breaker.failed(address)
                live = [c for c in live if c["hostname"] != conductor["hostname"]]

    def close(self) -> None:
        self.client.close()
