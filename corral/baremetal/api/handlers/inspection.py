"""POST /v1/continue_inspection (1.84): the agent sends the machine's inventory.

Public, as upstream's (the ramdisk holds no Keystone token).  The node is
found by the MAC addresses of its ports, by its BMC's address (a
``driver_info`` ``*_address`` whose host is the inventory's
``bmc_address``) or, from 1.84, by ``?node_uuid=``; it must be waiting for
inspection.  A machine that matches no node at all is enrolled when
``[auto_discovery] enabled`` says so (:mod:`corral.baremetal.api.discovery`),
else 404 as for any failed lookup.
Requests without a version header (1.1) are accepted too, as upstream does
for agents that predate 1.84; they get ``{"uuid": ...}``, while 1.84 and
later get the node and the agent's configuration with its token, as lookup
answers.  The conductor processes the data after the 202.
"""

from __future__ import annotations

import logging
import urllib.parse
from collections.abc import Mapping
from typing import Any

import falcon
from oslo_utils import uuidutils

from corral.baremetal.api import common, discovery
from corral.baremetal.api.state import BaremetalState
from corral.baremetal.db import agent as agent_db
from corral.baremetal.db import nodes as node_db
from corral.baremetal.domain import discovery as discovery_rules
from corral.baremetal.domain import inspection, states
from corral.core.errors import BadRequest, NotFound
from corral.core.http import send_json

LOG = logging.getLogger(__name__)

CONTINUE_INSPECTION_VERSION = (1, 84)
# Where an agent's inventory is expected; a node still "inspecting" is locked: the agent retries its 409.
INSPECTION_STATES = (states.INSPECTWAIT, states.INSPECTING)
# The agent's own ramdisk data that is not kept with the inventory.
NOT_KEPT = ("logs",)


def _check_version(req: falcon.Request, node_uuid: str | None) -> bool:
    """Whether the answer is the new one (1.84+); 404 for versions that know no such endpoint."""
    new = req.context.at_least(*CONTINUE_INSPECTION_VERSION)
    initial = not req.context.at_least(1, 2)
    if not (new or initial) or (node_uuid and not new):
        raise NotFound("API version 1.84 or newer is required")
    return new


def continue_inspection(state: BaremetalState, req: falcon.Request, resp: falcon.Response) -> None:
    node_uuid = req.get_param("node_uuid")
    new = _check_version(req, node_uuid)
    if node_uuid is not None and not uuidutils.is_uuid_like(node_uuid):
        raise BadRequest(f"Expected a UUID for node_uuid: {node_uuid}")
    common.authorize(state, req, "baremetal:node:ipa_continue_inspection")
    data = common.json_body(state, req)
    problem = inspection.check_data(data)
    if problem:
        raise BadRequest(problem)
    plugin_data = {key: value for key, value in data.items() if key != "inventory" and key not in NOT_KEPT}
    inventory = dict(data["inventory"])
    macs, bmcs = inspection.lookup_addresses(inventory)
    if not macs and not bmcs and not node_uuid:
        raise BadRequest("No lookup information provided")
    try:
        node = _lookup(state, macs, bmcs, node_uuid)
    except UnknownMachine:
        # Upstream's answer whether discovery is off or not: nothing tells the caller which.
        if not state.conf.auto_discovery.enabled:
            raise NotFound("The resource could not be found.") from None
        plugin_data[discovery_rules.FLAG] = True
        node = discovery.enroll(state, inventory, plugin_data, macs, bmcs)
    token = None
    if new:
        # Before the data is handed over: processing takes the node's lock for a while.
        token = common.conductor_call(state, node, "get_node_with_token")
    common.conductor_call(state, node, "continue_inspection", inventory=inventory, plugin_data=plugin_data)
    if new:
        from corral.baremetal.api.handlers.ramdisk import agent_answer

        with state.db.read() as conn:
            node = node_db.get(conn, node_id=node["id"]) or node
        send_json(resp, agent_answer(state, req, node, token), status=202)
    else:
        send_json(resp, {"uuid": node["uuid"]}, status=202)


class UnknownMachine(NotFound):
    """No node matches the addresses: the machine may be enrolled (auto-discovery)."""


def _lookup(state: BaremetalState, macs: list[str], bmcs: list[str], node_uuid: str | None) -> dict[str, Any]:
    """The one node the addresses name, waiting for inspection; 404 for anything else, as upstream."""
    with state.db.read() as conn:
        found: dict[int, dict[str, Any]] = {}
        if node_uuid:
            node = node_db.get(conn, uuid=node_uuid)
            if node is None:
                raise NotFound(f"Node {node_uuid} could not be found.")
            found[node["id"]] = node
        if macs:
            found.update({node["id"]: node for node in agent_db.nodes_with_port_addresses(conn, macs)})
        if bmcs:
            candidates = agent_db.nodes_in_states(conn, INSPECTION_STATES)
            found.update({node["id"]: node for node in candidates if _bmc_matches(node, bmcs)})
    if not found:
        LOG.error("No nodes satisfy MAC addresses %s and BMC addresses %s during inspection lookup", macs, bmcs)
        raise UnknownMachine("The resource could not be found.")
    if len(found) != 1:
        LOG.error("Inspection data lookup found %d nodes for MACs %s, BMC addresses %s, node %s", len(found), macs,
                  bmcs, node_uuid)
        raise NotFound("The resource could not be found.")
    node = next(iter(found.values()))
    if node["provision_state"] not in INSPECTION_STATES:
        LOG.error("Inspection data received for node %s in the provision state %s", node["uuid"],
                  node["provision_state"])
        raise NotFound("The resource could not be found.")
    return node


def _bmc_matches(node: Mapping[str, Any], addresses: list[str]) -> bool:
    """Whether one of the node's driver_info *_address values (a host or a URL) is one of ``addresses``."""
    for key, value in (node.get("driver_info") or {}).items():
        if not key.endswith("_address") or not isinstance(value, str):
            continue
        host = urllib.parse.urlsplit(value).hostname if "://" in value else value.strip("[]")
        if host and host in addresses:
            return True
    return False
