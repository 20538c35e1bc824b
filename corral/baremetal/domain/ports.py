"""Rules for ports, port groups and VIFs (pure logic, upstream's wording).

Ports and port groups are plain dicts as the database layer returns them.
A VIF attached to a port or port group is recorded in its
``internal_info["tenant_vif_port_id"]``, as upstream's ``flat`` network
interface records it when there is no network service to tell.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from corral.baremetal.domain import states
from corral.core.errors import BadRequest, Conflict

# Keys of internal_info naming a VIF, in the order a current VIF is looked
# up (the tenant network last: the others are temporary).
VIF_KEYS = tuple(f"{kind}_vif_port_id" for kind in
                 ("cleaning", "provisioning", "rescuing", "inspection", "servicing", "tenant"))
TENANT_VIF_KEY = "tenant_vif_port_id"

# Port changes that touch how the node is wired: only in these states or in maintenance.
CONNECTIVITY_FIELDS = ("portgroup_id", "pxe_enabled", "local_link_connection", "physical_network")
CONNECTIVITY_STATES = (states.ENROLL, states.INSPECTING, states.INSPECTWAIT, states.MANAGEABLE)

_MAC = re.compile(r"^([0-9a-fA-F]{2}[:-]){5}[0-9a-fA-F]{2}$")
_INFINIBAND_MAC = re.compile(r"^([0-9a-fA-F]{2}:){19}[0-9a-fA-F]{2}$")
_DATAPATH_ID = re.compile(r"^[0-9a-fA-F]{16}$")


def normalize_mac(value: str) -> str | None:
    """A MAC address in lower case with colons, or None when it is not one."""
    if not isinstance(value, str):
        return None
    if _MAC.match(value):
        return value.replace("-", ":").lower()
    if _INFINIBAND_MAC.match(value):
        return value.lower()
    return None


def normalize_switch_id(value: str) -> str | None:
    """A switch ID is a MAC address or an OpenFlow datapath ID (16 hex digits)."""
    mac = normalize_mac(value)
    if mac is not None:
        return mac
    if isinstance(value, str) and _DATAPATH_ID.match(value):
        return value.lower()
    return None


class InvalidState(Conflict):
    """Upstream's InvalidState: a 409."""


class NoFreePhysicalPorts(BadRequest):
    def __init__(self, vif_id: str) -> None:
        super().__init__(f"Unable to attach VIF {vif_id}, not enough free physical ports.")


class VifNotAttached(BadRequest):
    def __init__(self, vif_id: str, node_uuid: str) -> None:
        super().__init__(f"Unable to detach VIF {vif_id} from node {node_uuid} because it is not attached to it.")


def current_vif(port_like: Mapping[str, Any]) -> str | None:
    info = port_like.get("internal_info") or {}
    for key in VIF_KEYS:
        if key in info:
            return info.get(key)
    return None


def check_port_update(node: Mapping[str, Any], port: Mapping[str, Any], changes: Mapping[str, Any]) -> None:
    """Raise unless ``changes`` (column -> value) may apply to ``port`` of ``node`` now."""
    maintenance = bool(node.get("maintenance"))
    if "address" in changes and not maintenance and (
            node["provision_state"] == states.ACTIVE or node.get("instance_uuid")):
        raise InvalidState(f"Cannot update hardware address for port {port['uuid']} as node {node['uuid']} is "
                           "active or has instance UUID assigned")
    if set(changes) & set(CONNECTIVITY_FIELDS) and not (
            node["provision_state"] in CONNECTIVITY_STATES or maintenance):
        raise InvalidState(
            f"Port {port['uuid']} can not have any connectivity attributes "
            f"({', '.join(sorted(CONNECTIVITY_FIELDS))}) updated unless node {node['uuid']} is in a "
            f"{', '.join(CONNECTIVITY_STATES)} state or in maintenance mode. The current state is "
            f"{node['provision_state']}."
        )


def check_physnet(port: Mapping[str, Any], portgroup: Mapping[str, Any] | None,
                  members: Sequence[Mapping[str, Any]]) -> str | None:
    """A port joining ``portgroup`` must share its members' physical network.

    Returns the physical network the port group should adopt (a first
    member on a physical network of a port group without one), or None.
    """
    if portgroup is None:
        return None
    physnets = {member["physical_network"] for member in members if member.get("id") != port.get("id")}
    if len(physnets) > 1:
        raise BadRequest(
            f"Port group {portgroup['uuid']} has member ports with inconsistent physical networks "
            f"({', '.join(sorted(str(p) for p in physnets))}). All ports in a port group must have the same "
            "physical network."
        )
    mine = port.get("physical_network")
    if not physnets:
        if portgroup.get("physical_network") is not None:
            physnets = {portgroup["physical_network"]}
        else:
            return mine
    (theirs,) = physnets
    if mine != theirs:
        raise Conflict(f"Port with physical network {mine} cannot become a member of port group "
                       f"{portgroup['uuid']} which has ports in physical network {theirs}.")
    return None


def check_standalone(port: Mapping[str, Any], portgroup: Mapping[str, Any] | None, changed: Iterable[str]) -> None:
    """A port group without standalone ports takes no PXE-enabled port and no port with a VIF."""
    if portgroup is None or portgroup["standalone_ports_supported"]:
        return
    vif = current_vif(port)
    if not (set(changed) & {"pxe_enabled", "portgroup_id"}) and not vif:
        return
    reasons = []
    if port.get("pxe_enabled"):
        reasons.append("'pxe_enabled' was set to True")
    if vif:
        reasons.append(f"VIF {vif} is attached to the port")
    if reasons:
        raise Conflict(f"Port group {portgroup['uuid']} doesn't support standalone ports. This port "
                       f"{port['uuid']} cannot be  a member of that port group because of: {', '.join(reasons)}")


def check_standalone_off(portgroup: Mapping[str, Any], members: Sequence[Mapping[str, Any]]) -> None:
    """Turning standalone ports off needs members without PXE and VIFs."""
    for member in members:
        reasons = []
        if member.get("pxe_enabled"):
            reasons.append("'pxe_enabled' is set to True")
        vif = current_vif(member)
        if vif:
            reasons.append(f"VIF {vif} is attached to this port")
        if reasons:
            raise Conflict(f"standalone_ports_supported can not be set to False, because the port group "
                           f"{portgroup['uuid']} contains port with {', '.join(reasons)}")


# ------------------------------------------------------------------ VIFs


def _attached(port_like: Mapping[str, Any], vif_id: str, kind: str) -> bool:
    attached = (port_like.get("internal_info") or {}).get(TENANT_VIF_KEY)
    if attached == vif_id:
        raise Conflict(f"Unable to attach VIF because VIF {vif_id} is already attached to Ironic {kind} "
                       f"{port_like['uuid']}")
    return attached is not None


def _usable(port: Mapping[str, Any]) -> bool:
    """A Smart NIC port needs port_id and hostname in its local link connection."""
    if not port.get("is_smartnic"):
        return True
    link = port.get("local_link_connection") or {}
    return bool(link.get("port_id")) and bool(link.get("hostname"))


def free_port_like(ports: Sequence[Mapping[str, Any]], portgroups: Sequence[Mapping[str, Any]], vif_id: str,
                   *, port_uuid: str | None = None, portgroup_uuid: str | None = None) -> tuple[str, Mapping[str, Any]]:
    """("port" | "portgroup", row) a VIF attaches to, chosen as upstream's flat interface chooses.

    Port groups are preferred to ports, then PXE-enabled ports; a port
    group one of whose ports carries a VIF is not used (its free ports are).
    """
    candidates: list[tuple[str, Mapping[str, Any]]] = []
    by_group: dict[int, list[Mapping[str, Any]]] = {}
    unusable_groups: set[int | None] = set()
    for port in ports:
        if (port_uuid and port["uuid"] != port_uuid) or not _usable(port):
            continue
        if _attached(port, vif_id, "Port"):
            unusable_groups.add(port.get("portgroup_id"))
            continue
        if port.get("portgroup_id") is None and not portgroup_uuid:
            candidates.append(("port", port))
        elif port.get("portgroup_id") is not None:
            by_group.setdefault(port["portgroup_id"], []).append(port)
    if not port_uuid:
        for group in portgroups:
            if (portgroup_uuid and group["uuid"] != portgroup_uuid) or _attached(group, vif_id, "Portgroup"):
                continue
            if group["id"] in unusable_groups:
                if not portgroup_uuid:
                    candidates.extend(("port", port) for port in by_group.get(group["id"], []))
            elif by_group.get(group["id"]):
                candidates.append(("portgroup", group))
    if not candidates:
        raise NoFreePhysicalPorts(vif_id)
    # Stable sort, best first: port groups, then PXE-enabled ports.
    return sorted(candidates, key=lambda item: (item[0] == "portgroup",
                                                 item[0] == "portgroup" or bool(item[1].get("pxe_enabled"))),
                  reverse=True)[0]


def vif_holder(ports: Sequence[Mapping[str, Any]], portgroups: Sequence[Mapping[str, Any]], vif_id: str,
               node_uuid: str) -> tuple[str, Mapping[str, Any]]:
    """The port group or port a VIF is attached to (port groups first)."""
    for kind, rows in (("portgroup", portgroups), ("port", ports)):
        for row in rows:
            if (row.get("internal_info") or {}).get(TENANT_VIF_KEY) == vif_id:
                return kind, row
    raise VifNotAttached(vif_id, node_uuid)


def attached_vifs(ports: Sequence[Mapping[str, Any]], portgroups: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    vifs = []
    for row in [*ports, *portgroups]:
        vif = (row.get("internal_info") or {}).get(TENANT_VIF_KEY)
        if vif:
            vifs.append({"id": vif})
    return vifs
