"""Boot-from-volume checks of upstream's ``cinder`` storage interface, without Cinder.

Pure logic over a node and its volume connectors and targets (plain dicts):
the same checks, in the same order and words, as upstream runs before it
would talk to Cinder.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from oslo_utils import strutils

ISCSI_TYPES = ("iqn",)
FC_TYPES = ("wwpn", "wwnn")


class StorageInvalid(ValueError):
    """The node's volume configuration cannot boot or attach (message is user-facing)."""


def node_capability(node: Mapping[str, Any], name: str) -> str | None:
    """A ``key:value`` entry of ``properties["capabilities"]``, as upstream reads it."""
    capabilities = (node.get("properties") or {}).get("capabilities")
    if not capabilities or not isinstance(capabilities, str):
        return None
    for entry in capabilities.split(","):
        parts = entry.split(":")
        if len(parts) == 2 and parts[0] and parts[1] and parts[0].strip() == name:
            return parts[1].strip()
    return None


def _fail(node: Mapping[str, Any], reason: str) -> StorageInvalid:
    return StorageInvalid(f"Failed to validate cinder storage interface for node {node['uuid']}. {reason}")


def _connectors(node: Mapping[str, Any], connectors: Sequence[Mapping[str, Any]], ipxe: bool) -> dict[str, bool]:
    iscsi = wwpn = wwnn = 0
    for connector in connectors:
        if connector["type"] in ISCSI_TYPES and connector.get("connector_id") is not None:
            iscsi += 1
            if not ipxe:
                raise _fail(node, "The [pxe]/ipxe_enabled option must be set to True or the boot interface must be "
                                  "set to ``ipxe`` to support network booting to an iSCSI volume.")
        if connector["type"] == "wwpn" and connector.get("connector_id") is not None:
            wwpn += 1
        if connector["type"] == "wwnn" and connector.get("connector_id") is not None:
            wwnn += 1
    if wwpn != wwnn:
        raise _fail(node, "Cinder requires both wwnn and wwpn entries for FCoE connections. There must be a wwpn "
                          f"entry for every wwnn entry. There are {wwpn} wwpn entries and {wwnn} wwnn entries.")
    return {"fc": wwpn >= 1, "iscsi": iscsi >= 1}


def _targets(node: Mapping[str, Any], targets: Sequence[Mapping[str, Any]], found: Mapping[str, bool],
             iscsi_boot: bool, fc_boot: bool) -> None:
    for target in targets:
        uuid = target["uuid"]
        if target.get("volume_id") is None:
            raise _fail(node, f"volume_id missing from target {uuid}.")
        if target["volume_type"] == "fibre_channel":
            if not fc_boot and target["boot_index"] == 0:
                raise _fail(node, f"Volume target {uuid} is configured for 'fibre_channel', however the capability "
                                  "'fibre_channel_boot' is not set on node.")
            if not found["fc"]:
                raise _fail(node, f"Volume target {uuid} is configured for 'fibre_channel', however no Fibre "
                                  "Channel WWPNs are configured for the node volume connectors.")
        elif target["volume_type"] == "iscsi":
            if not iscsi_boot and target["boot_index"] == 0:
                raise _fail(node, f"Volume target {uuid} is configured for 'iscsi', however the capability "
                                  "'iscsi_boot' is not set for the node.")
            if not found["iscsi"]:
                raise _fail(node, f"Volume target {uuid} is configured for 'iscsi', however no iSCSI connectors "
                                  "are configured for the node.")
        else:
            raise _fail(node, f"Volume target {uuid} is of an unknown type '{target['volume_type']}'. Supported "
                              "types: 'iscsi' or 'fibre_channel'")


def check_boot_from_volume(node: Mapping[str, Any], connectors: Sequence[Mapping[str, Any]],
                           targets: Sequence[Mapping[str, Any]], *, ipxe: bool) -> None:
    """Raise StorageInvalid unless the connectors, targets and capabilities fit together."""
    found = _connectors(node, connectors, ipxe)
    iscsi_boot = strutils.bool_from_string(node_capability(node, "iscsi_boot"))
    fc_boot = strutils.bool_from_string(node_capability(node, "fibre_channel_boot"))
    if iscsi_boot and not found["iscsi"]:
        raise _fail(node, "In order to enable the 'iscsi_boot' capability for the node, an associated "
                          f"volume_connector type must be valid for iSCSI ({', '.join(ISCSI_TYPES)}).")
    if fc_boot and not found["fc"]:
        raise _fail(node, "In order to enable the 'fibre_channel_boot' capability for the node, an associated "
                          f"volume_connector type must be valid for Fibre Channel ({', '.join(FC_TYPES)}).")
    _targets(node, targets, found, iscsi_boot, fc_boot)
