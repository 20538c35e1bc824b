"""Auto-discovery: what a machine unknown to Bare Metal becomes (pure logic, upstream's behaviour).

With ``[auto_discovery] enabled``, an agent whose inventory matches no node
(no port with one of its MAC addresses, no node waiting for inspection with
its BMC's address, no ``node_uuid``) enrolls its machine: a node in
``enroll`` with the ``[auto_discovery] driver`` and no credentials (rules
may fill ``driver_info`` from the inventory's ``bmc_address``), the flag
``auto_discovered`` in its plugin data, then the usual processing of the
data (hooks and rules) while it stays in ``enroll``.

Upstream creates the node, then its ports in a later step, so two callbacks
of one machine at once may enroll it twice.  Here the node, its inventory
and the ports the ``ports`` hook would create are written in one
transaction: a port's MAC address is unique, so the second of two such
callbacks creates nothing.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from corral.baremetal.domain import inspection, states

# Upstream's plugin data flag (ironic-inspector's before it), which inspection rules test.
FLAG = "auto_discovered"
# Processing through the agent is what discovery is for: a discovered node gets this inspect interface
# when its hardware type offers it (upstream's operators set default_inspect_interface for it).
INSPECT_INTERFACE = "agent"
FLAGS = ("maintenance", "console_enabled", "protected", "retired", "disable_power_off")


def node_values(uuid: str, driver: str, interfaces: Mapping[str, str],
                json_defaults: Mapping[str, Any]) -> dict[str, Any]:
    """The new node's row, as upstream's: enroll, the driver, no name, no resource class, the default group."""
    values: dict[str, Any] = {key: copy.deepcopy(value) for key, value in json_defaults.items()}
    values.update(interfaces)
    values.update({flag: False for flag in FLAGS})
    values.update(uuid=uuid, driver=driver, provision_state=states.ENROLL, conductor_group="")
    return values


def ports_to_create(inventory: Mapping[str, Any], plugin_data: Mapping[str, Any], hooks: Sequence[str], *,
                    add_ports: str, disk_spacing: bool) -> list[dict[str, Any]]:
    """The ports processing would create for a node without any: none when it would fail before them.

    Upstream's ``ports`` hook creates them after the hooks before it in
    ``[inspector] hooks`` (ramdisk-error, validate-interfaces by default):
    those run here too, on the empty node; the ones after it do not
    matter to the ports.
    """
    if "ports" not in hooks:
        return []
    before = list(hooks[:list(hooks).index("ports") + 1])
    try:
        findings = inspection.process({"properties": {}}, inventory, plugin_data, before, add_ports=add_ports,
                                      disk_spacing=disk_spacing)
    except inspection.InspectionFailed:
        # Processing fails the same way and says so in last_error.
        return []
    create, _, _ = inspection.port_changes(findings, [], "all")
    return create
