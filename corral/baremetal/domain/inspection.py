"""What in-band inspection makes of the agent's inventory (pure logic, upstream's hooks).

The agent posts ``{"inventory": {...}, <plugin data>...}``.  The hooks named
in ``[inspector] hooks`` run in order on a :class:`Findings` that starts
from the node's properties:

* ``ramdisk-error``: the agent reported an error: inspection fails with it;
* ``validate-interfaces``: the NICs with a MAC address; those ``[inspector]
  add_ports`` chooses (all / active: with an IP address / pxe: the one the
  machine booted from / disabled) become the valid interfaces; none at all
  fails inspection;
* ``ports``: a port for each valid interface (``pxe_enabled`` for the boot
  NIC), existing ports removed as ``keep_ports`` says (all / present /
  added);
* ``architecture``: ``cpu_arch``; ``cpus``: ``cpus``; ``memory``:
  ``memory_mb``; ``root-device``: ``local_gb`` (the root disk in GiB, less
  1 GiB with ``disk_partitioning_spacing``); ``boot-mode``: the
  ``boot_mode`` capability.

The root disk is the one the node's root device hints name, else the one
the agent reported (``root_disk``), else the smallest disk of 4 GiB or more,
as the agent chooses.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from oslo_utils import netutils

GIB = 1024 ** 3
MIB = 1024 ** 2
# The agent's smallest root disk.
MIN_ROOT_DISK = 4 * GIB
KNOWN_HOOKS = ("ramdisk-error", "validate-interfaces", "ports", "architecture", "cpus", "memory", "root-device",
               "boot-mode")


class InspectionFailed(Exception):
    """The data cannot be used; the message is the node's last_error."""


@dataclass
class Findings:
    """What the hooks found: property changes, NICs, the ports to create and to remove."""

    properties: dict[str, Any]
    plugin_data: dict[str, Any]
    # MAC -> {"name", "pxe_enabled", "ip"} of every NIC with a MAC, and of the chosen ones.
    all_interfaces: dict[str, dict[str, Any]] = field(default_factory=dict)
    valid_interfaces: dict[str, dict[str, Any]] = field(default_factory=dict)
    manage_ports: bool = False


def hook_names(configured: str) -> list[str]:
    """``[inspector] hooks`` as a list; unknown names are an operator error."""
    names = [name.strip() for name in configured.split(",") if name.strip()]
    unknown = [name for name in names if name not in KNOWN_HOOKS]
    if unknown:
        raise InspectionFailed(f"Unknown inspection hooks in [inspector] hooks: {', '.join(unknown)}; known are: "
                               f"{', '.join(KNOWN_HOOKS)}")
    return list(dict.fromkeys(names))


def lookup_addresses(inventory: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """The valid MAC addresses (lower case) and the BMC addresses an inventory names."""
    macs = []
    for interface in inventory.get("interfaces") or []:
        mac = interface.get("mac_address") if isinstance(interface, Mapping) else None
        if isinstance(mac, str) and netutils.is_valid_mac(mac):
            macs.append(mac.lower())
    bmcs = [str(inventory[key]) for key in ("bmc_address", "bmc_v6address")
            if inventory.get(key) and str(inventory[key]) not in ("0.0.0.0", "::/0", "::")]
    return list(dict.fromkeys(macs)), bmcs


def check_data(data: Any) -> str | None:
    """Why a posted body is no inspection data (None when it is): upstream's minimal inventory."""
    if not isinstance(data, Mapping):
        return "Invalid inspection data: a JSON object is expected"
    inventory = data.get("inventory")
    if not isinstance(inventory, Mapping):
        return "Invalid inspection data: 'inventory' is a required object"
    interfaces = inventory.get("interfaces")
    if not isinstance(interfaces, list) or not interfaces:
        return "Invalid inspection data: 'inventory.interfaces' must be a non-empty list"
    for interface in interfaces:
        if not isinstance(interface, Mapping) or not isinstance(interface.get("mac_address"), str):
            return "Invalid inspection data: each interface needs a 'mac_address' string"
    for key in ("bmc_address", "bmc_v6address"):
        # The agent sends null when it found no BMC (no ipmitool, a virtual machine).
        if inventory.get(key) is not None and not isinstance(inventory[key], str):
            return f"Invalid inspection data: 'inventory.{key}' must be a string"
    return None


def process(node: Mapping[str, Any], inventory: Mapping[str, Any], plugin_data: Mapping[str, Any],
            hooks: Sequence[str], *, add_ports: str, disk_spacing: bool) -> Findings:
    """Run ``hooks`` on the data; raise InspectionFailed with upstream's reasons."""
    findings = Findings(properties=copy.deepcopy(dict(node.get("properties") or {})),
                        plugin_data=copy.deepcopy(dict(plugin_data)))
    for hook in hooks:
        HOOKS[hook](findings, node, inventory, add_ports=add_ports, disk_spacing=disk_spacing)
    return findings


def _ramdisk_error(findings: Findings, node: Mapping[str, Any], inventory: Mapping[str, Any], **_: Any) -> None:
    error = findings.plugin_data.get("error")
    if error:
        raise InspectionFailed(f"Ramdisk reported error: {error}")


def _interfaces(findings: Findings, node: Mapping[str, Any], inventory: Mapping[str, Any], *, add_ports: str,
                **_: Any) -> None:
    pxe_mac = str(((inventory.get("boot") or {}).get("pxe_interface") or "")).lower()
    # The agent reports the boot NIC as "01-<mac with dashes>" (PXE's BOOTIF) or as a MAC.
    if pxe_mac.startswith("01-"):
        pxe_mac = pxe_mac[3:].replace("-", ":")
    for interface in inventory.get("interfaces") or []:
        mac = str(interface.get("mac_address") or "").lower()
        if not netutils.is_valid_mac(mac) or interface.get("name") == "lo":
            continue
        ip = interface.get("ipv4_address") or interface.get("ipv6_address")
        findings.all_interfaces[mac] = {"name": interface.get("name"), "ip": ip,
                                        "pxe_enabled": bool(pxe_mac) and mac == pxe_mac}
    if add_ports == "pxe" and not pxe_mac:
        # The agent could not tell which NIC booted: every NIC with an address, as upstream.
        add_ports = "active"
    chosen = {
        "all": lambda info: True,
        "active": lambda info: bool(info["ip"]),
        "pxe": lambda info: info["pxe_enabled"],
        "disabled": lambda info: False,
    }[add_ports]
    findings.valid_interfaces = {mac: info for mac, info in findings.all_interfaces.items() if chosen(info)}
    if not findings.all_interfaces:
        raise InspectionFailed(f"No suitable interfaces found in {inventory.get('interfaces')}")
    findings.plugin_data["all_interfaces"] = {info["name"] or mac: {**info, "mac": mac}
                                              for mac, info in findings.all_interfaces.items()}
    findings.plugin_data["valid_interfaces"] = {info["name"] or mac: {**info, "mac": mac}
                                                for mac, info in findings.valid_interfaces.items()}
    findings.plugin_data["macs"] = list(findings.valid_interfaces)


def _ports(findings: Findings, node: Mapping[str, Any], inventory: Mapping[str, Any], **_: Any) -> None:
    if not findings.all_interfaces:
        raise InspectionFailed("The ports inspection hook needs the validate-interfaces hook before it")
    findings.manage_ports = True


def _architecture(findings: Findings, node: Mapping[str, Any], inventory: Mapping[str, Any], **_: Any) -> None:
    arch = (inventory.get("cpu") or {}).get("architecture")
    if arch:
        findings.properties["cpu_arch"] = str(arch)


def _cpus(findings: Findings, node: Mapping[str, Any], inventory: Mapping[str, Any], **_: Any) -> None:
    count = (inventory.get("cpu") or {}).get("count")
    if not isinstance(count, int) or isinstance(count, bool) or count <= 0:
        raise InspectionFailed(f"No CPU count in the inventory: cpu is {inventory.get('cpu')!r}")
    findings.properties["cpus"] = count


def _memory(findings: Findings, node: Mapping[str, Any], inventory: Mapping[str, Any], **_: Any) -> None:
    memory = inventory.get("memory") or {}
    physical = memory.get("physical_mb")
    if not isinstance(physical, int) or physical <= 0:
        total = memory.get("total")
        physical = int(total) // MIB if isinstance(total, int) and total > 0 else None
    if not physical:
        raise InspectionFailed(f"No memory size in the inventory: memory is {memory!r}")
    findings.properties["memory_mb"] = physical


def _root_device(findings: Findings, node: Mapping[str, Any], inventory: Mapping[str, Any], *,
                 disk_spacing: bool, **_: Any) -> None:
    disks = [disk for disk in inventory.get("disks") or [] if isinstance(disk, Mapping)]
    if not disks:
        raise InspectionFailed("No disks were found in the inventory")
    root = select_root_disk(disks, findings.properties.get("root_device"), findings.plugin_data.get("root_disk"))
    findings.plugin_data["root_disk"] = dict(root)
    local_gb = int(root.get("size") or 0) // GIB
    if disk_spacing and local_gb:
        local_gb -= 1
    findings.properties["local_gb"] = local_gb


def _boot_mode(findings: Findings, node: Mapping[str, Any], inventory: Mapping[str, Any], **_: Any) -> None:
    mode = (inventory.get("boot") or {}).get("current_boot_mode")
    if mode not in ("uefi", "bios"):
        return
    raw = findings.properties.get("capabilities") or ""
    pairs = dict(raw) if isinstance(raw, Mapping) else dict(
        item.split(":", 1) for item in str(raw).split(",") if ":" in item)
    pairs["boot_mode"] = mode
    findings.properties["capabilities"] = ",".join(f"{key}:{value}" for key, value in pairs.items())


def select_root_disk(disks: Sequence[Mapping[str, Any]], hints: Any, reported: Any) -> Mapping[str, Any]:
    """The root disk: the one the hints name, else the agent's choice, else the smallest of 4 GiB or more."""
    if isinstance(hints, Mapping) and hints:
        for disk in disks:
            if all(_hint_matches(disk, key, value) for key, value in hints.items()):
                return disk
        raise InspectionFailed(f"No disks satisfied root device hints {dict(hints)}")
    if isinstance(reported, Mapping) and reported.get("name"):
        for disk in disks:
            if disk.get("name") == reported["name"]:
                return disk
    large = [disk for disk in disks if int(disk.get("size") or 0) >= MIN_ROOT_DISK]
    if not large:
        raise InspectionFailed(f"No disk of at least {MIN_ROOT_DISK // GIB} GiB was found in the inventory")
    return min(large, key=lambda disk: int(disk.get("size") or 0))


def _hint_matches(disk: Mapping[str, Any], key: str, expected: Any) -> bool:
    """One hint against one disk: sizes in GiB, device names with or without /dev/, other values as text."""
    if key == "size":
        return int(disk.get("size") or 0) // GIB == int(str(expected).lstrip("=").strip() or 0)
    if key == "name":
        name = str(expected)
        return disk.get("name") in (name, f"/dev/{name}")
    if key == "rotational":
        return bool(disk.get("rotational")) == (str(expected).lower() in ("true", "1", "yes", "on"))
    actual = disk.get(key)
    return actual is not None and str(actual).lower() == str(expected).lower()


HOOKS = {
    "ramdisk-error": _ramdisk_error,
    "validate-interfaces": _interfaces,
    "ports": _ports,
    "architecture": _architecture,
    "cpus": _cpus,
    "memory": _memory,
    "root-device": _root_device,
    "boot-mode": _boot_mode,
}


def port_changes(findings: Findings, existing: Sequence[Mapping[str, Any]],
                 keep_ports: str) -> tuple[list[dict[str, Any]], list[Mapping[str, Any]], list[tuple[int, bool]]]:
    """(ports to create, ports to delete, (port id, pxe_enabled) to update) for the node's existing ports."""
    if not findings.manage_ports:
        return [], [], []
    by_mac = {str(port["address"]).lower(): port for port in existing}
    create = [{"address": mac, "pxe_enabled": info["pxe_enabled"] or not any(
        other["pxe_enabled"] for other in findings.valid_interfaces.values())}
        for mac, info in findings.valid_interfaces.items() if mac not in by_mac]
    update = [(int(by_mac[mac]["id"]), bool(info["pxe_enabled"]))
              for mac, info in findings.valid_interfaces.items()
              if mac in by_mac and info["pxe_enabled"] and not by_mac[mac]["pxe_enabled"]]
    keep = {"all": None, "present": set(findings.all_interfaces), "added": set(findings.valid_interfaces)}[keep_ports]
    delete = [] if keep is None else [port for mac, port in by_mac.items() if mac not in keep]
    return create, delete, update
