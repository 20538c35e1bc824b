"""Network interfaces: ``noop`` and ``flat`` (VIFs recorded on ports, no network service).

A network interface decides where a VIF goes and what a port change must
respect; the conductor reads the node's ports and port groups and writes
what the interface returns, under the node's lock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from corral.baremetal.domain import ports as rules
from corral.baremetal.drivers.base import BaseInterface

Rows = Sequence[Mapping[str, Any]]
# ("port" | "portgroup", row id, new internal_info) for the conductor to write.
Change = tuple[str, int, dict[str, Any]]


class NoopNetwork(BaseInterface):
    """Accepts VIFs without recording them and lists none, as upstream's noop does."""

    interface_type = "network"
    name = "noop"

    def vif_list(self, ports: Rows, portgroups: Rows) -> list[dict[str, str]]:
        return []

    def vif_attach(self, vif_info: Mapping[str, Any], ports: Rows, portgroups: Rows) -> Change | None:
        return None

    def vif_detach(self, vif_id: str, node_uuid: str, ports: Rows, portgroups: Rows) -> Change | None:
        return None

    def current_vif(self, port_like: Mapping[str, Any]) -> str | None:
        return None

    def port_changed(self, port: Mapping[str, Any], portgroup: Mapping[str, Any] | None,
                     changed: Iterable[str]) -> None:
        return None

    def portgroup_changed(self, portgroup: Mapping[str, Any], members: Rows, changed: Iterable[str]) -> None:
        return None


class FlatNetwork(NoopNetwork):
    """Upstream's ``flat`` without a network service: a VIF takes a free port or port group."""

    name = "flat"

    def vif_list(self, ports: Rows, portgroups: Rows) -> list[dict[str, str]]:
        return rules.attached_vifs(ports, portgroups)

    def vif_attach(self, vif_info: Mapping[str, Any], ports: Rows, portgroups: Rows) -> Change | None:
        vif_id = vif_info["id"]
        kind, row = rules.free_port_like(ports, portgroups, vif_id, port_uuid=vif_info.get("port_uuid"),
                                         portgroup_uuid=vif_info.get("portgroup_uuid"))
        return kind, row["id"], {**(row.get("internal_info") or {}), rules.TENANT_VIF_KEY: vif_id}

    def vif_detach(self, vif_id: str, node_uuid: str, ports: Rows, portgroups: Rows) -> Change | None:
        kind, row = rules.vif_holder(ports, portgroups, vif_id, node_uuid)
        info = {key: value for key, value in (row.get("internal_info") or {}).items()
                if key != rules.TENANT_VIF_KEY}
        return kind, row["id"], info

    def current_vif(self, port_like: Mapping[str, Any]) -> str | None:
        return rules.current_vif(port_like)

    def port_changed(self, port: Mapping[str, Any], portgroup: Mapping[str, Any] | None,
                     changed: Iterable[str]) -> None:
        rules.check_standalone(port, portgroup, changed)

    def portgroup_changed(self, portgroup: Mapping[str, Any], members: Rows, changed: Iterable[str]) -> None:
        if "standalone_ports_supported" in set(changed) and not portgroup["standalone_ports_supported"]:
            rules.check_standalone_off(portgroup, members)
