"""The ``network_data`` node field (1.66): OpenStack's network metadata format.

A node's ``network_data`` is either empty (``{}``/null) or a document in
the format Nova writes to config drives as ``network_data.json``: ``links``
(layer 2: physical links, bonds, VLANs), ``networks`` (layer 3 addresses
on those links) and ``services`` (DNS servers).  The schema below checks
the structure clients rely on; each network names a link that exists.
"""

from __future__ import annotations

from typing import Any

import jsonschema

from corral.core.errors import BadRequest

_ID = {"type": "string", "minLength": 1}
_MAC = {"type": "string", "pattern": r"^([0-9a-fA-F]{2}[:-]){5}[0-9a-fA-F]{2}$"}

_LINK_TYPES = ("bridge", "dvs", "hw_veb", "hyperv", "ovs", "tap", "vhostuser", "vif", "phy", "bond", "vlan")
_NETWORK_TYPES = ("ipv4", "ipv4_dhcp", "ipv6", "ipv6_dhcp", "ipv6_slaac", "ipv6_dhcpv6-stateful",
                  "ipv6_dhcpv6-stateless")

_ROUTE = {
    "type": "object",
    "required": ["network", "netmask", "gateway"],
    "properties": {"network": {"type": "string"}, "netmask": {"type": "string"}, "gateway": {"type": "string"},
                   "services": {"type": "array"}},
}

SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["links", "networks", "services"],
    "properties": {
        "links": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["id", "type"],
                "properties": {
                    "id": _ID,
                    "type": {"enum": list(_LINK_TYPES)},
                    "ethernet_mac_address": _MAC,
                    "mtu": {"type": ["integer", "null"], "minimum": 1},
                    "vif_id": {"type": "string"},
                    "bond_links": {"type": "array", "items": _ID, "minItems": 1},
                    "bond_mode": {"type": "string"},
                    "bond_miimon": {"type": "integer"},
                    "bond_hash_policy": {"type": "string"},
                    "vlan_id": {"type": "integer", "minimum": 0, "maximum": 4094},
                    "vlan_link": _ID,
                    "vlan_mac_address": _MAC,
                },
            },
        },
        "networks": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["id", "type", "link"],
                "properties": {
                    "id": _ID,
                    "type": {"enum": list(_NETWORK_TYPES)},
                    "link": _ID,
                    "network_id": {"type": "string"},
                    "ip_address": {"type": "string"},
                    "netmask": {"type": "string"},
                    "routes": {"type": "array", "items": _ROUTE},
                    "services": {"type": "array"},
                },
            },
        },
        "services": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["type", "address"],
                "properties": {"type": {"enum": ["dns"]}, "address": {"type": "string"}},
            },
        },
    },
}

_VALIDATOR = jsonschema.Draft7Validator(SCHEMA)


def problem(value: Any) -> str | None:
    """Why ``value`` is not usable as network_data; None when it is."""
    if value is None or value == {}:
        return None
    error = jsonschema.exceptions.best_match(_VALIDATOR.iter_errors(value))
    if error is not None:
        return error.message
    links = {link["id"] for link in value["links"]}
    for network in value["networks"]:
        if network["link"] not in links:
            return f"network {network['id']!r} is on link {network['link']!r}, which is not among the links"
    return None


def check(value: Any) -> None:
    """400 "Invalid network_data: ..." (upstream's wording) unless ``value`` is usable."""
    reason = problem(value)
    if reason is not None:
        raise BadRequest(f"Invalid network_data: {reason} ")
