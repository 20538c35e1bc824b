"""Enrolling a machine unknown to Bare Metal from its agent's inspection data (``[auto_discovery]``).

What the node becomes is :mod:`corral.baremetal.domain.discovery`; this
writes it: the node, its inventory and its ports in one transaction.  As
upstream, the agent learns nothing of why enrolling failed (the endpoint
is public): the reasons are logged.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from oslo_utils import uuidutils

from corral.baremetal.api.state import BaremetalState
from corral.baremetal.db import history
from corral.baremetal.db import nodes as node_db
from corral.baremetal.db import ports as port_db
from corral.baremetal.domain import discovery, inspection
from corral.core.db import is_duplicate
from corral.core.errors import ApiError, InternalError, NotFound, ServiceUnavailable

LOG = logging.getLogger(__name__)

# Upstream answers an enrollment it cannot make with its generic error.
UNKNOWN_ERROR = "An unknown exception occurred."


def enroll(state: BaremetalState, inventory: Mapping[str, Any], plugin_data: Mapping[str, Any],
           macs: Sequence[str], bmcs: Sequence[str]) -> dict[str, Any]:
    """The new node, in ``enroll``; 404 when another request enrolled the same machine meanwhile."""
    conf = state.conf
    driver = conf.auto_discovery.driver
    uuid = uuidutils.generate_uuid()
    interfaces = _interfaces(state, driver)
    values = discovery.node_values(uuid, driver, interfaces, node_db.JSON_DEFAULTS)
    try:
        hooks = inspection.hook_names(conf.inspector.hooks)
    except inspection.InspectionFailed:
        hooks = []  # processing fails with the reason
    ports = discovery.ports_to_create(inventory, plugin_data, hooks, add_ports=conf.inspector.add_ports,
                                      disk_spacing=conf.inspector.disk_partitioning_spacing)
    LOG.info("Enrolling the newly discovered node %s with driver %s, MAC addresses [%s] and BMC address(es) [%s]",
             uuid, driver, ", ".join(macs), ", ".join(bmcs))

    def write(conn: Any) -> int:
        node_id = node_db.insert(conn, values)
        history.store_inventory(conn, node_id, inventory, plugin_data)
        for port in ports:
            port_db.insert_port(conn, {"uuid": uuidutils.generate_uuid(), "node_id": node_id, **port})
        return node_id

    try:
        node_id = state.db.write(write)
    except Exception as error:
        if not is_duplicate(error):
            raise
        # A port's MAC address is unique: the same machine's other callback enrolled it first. Its node
        # is not waiting for inspection, which is what a later callback would be told.
        LOG.error("Not enrolling a machine with MAC addresses [%s]: a node has one of them since the lookup",
                  ", ".join(macs))
        raise NotFound("The resource could not be found.") from None
    with state.db.read() as conn:
        node = node_db.get(conn, node_id=node_id)
    assert node is not None
    return node


def _interfaces(state: BaremetalState, driver: str | None) -> dict[str, str]:
    """The node's interfaces (the agent's inspect interface when offered); 500 when no conductor can serve it."""
    try:
        if not driver:
            raise InternalError("[auto_discovery] driver is not set")
        state.rpc.check_driver(driver, "")
        try:
            return state.drivers.resolve_interfaces(driver, {"inspect_interface": discovery.INSPECT_INTERFACE})
        except ApiError:
            return state.drivers.resolve_interfaces(driver, {})
    except ServiceUnavailable as error:
        LOG.error("No conductor can be reached to handle a newly discovered node with driver %s: %s", driver, error)
        raise ServiceUnavailable("No conductor is available to enroll the machine; please retry later.") from None
    except ApiError as error:
        LOG.error("Failed to find a conductor to handle the newly enrolled node with driver %s: %s", driver, error)
        raise InternalError(UNKNOWN_ERROR) from None
