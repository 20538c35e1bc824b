"""The conductor's side of in-band inspection: the agent's inventory, its processing, timeouts.

``continue_inspection`` (RPC) takes the node from ``inspect wait`` back to
``inspecting`` and hands the data to a worker, which stores the inventory
and plugin data (``GET /v1/nodes/{node}/inventory``), runs the hooks of
``[inspector] hooks`` (:mod:`corral.baremetal.domain.inspection`), then the
inspection rules (:mod:`corral.baremetal.domain.rule_engine`), writes the
node's new properties, traits and ports in one transaction, powers the
machine off (unless fast track keeps its agent running) and undoes the
ramdisk's boot: ``manageable``.  Anything the
data or a rule refuses ends in ``inspect failed`` with the reason as
``last_error``, the machine powered off all the same.

A node whose agent sent nothing within ``[conductor] inspect_wait_timeout``
seconds of the start of inspection fails the same way.

A node auto-discovery just enrolled (:mod:`corral.baremetal.domain.discovery`)
is processed the same way but stays in ``enroll``, as upstream's: what the
data or a rule refuses is its ``last_error``, it is not deleted.
"""

from __future__ import annotations

import copy
import logging
from typing import TYPE_CHECKING, Any

from oslo_utils import uuidutils

from corral.baremetal.conductor.locks import LockLost
from corral.baremetal.db import history
from corral.baremetal.db import inspection_rules as rule_db
from corral.baremetal.db import nodes as node_db
from corral.baremetal.db import ports as port_db
from corral.baremetal.domain import inspection, rule_engine, states
from corral.core.errors import ApiError, BadRequest, Conflict

if TYPE_CHECKING:
    from corral.baremetal.conductor.core import ConductorCore
    from corral.baremetal.conductor.task import Task

LOG = logging.getLogger(__name__)

RPC_METHODS = frozenset({"continue_inspection"})
TIMEOUT_MESSAGE = "Timeout reached while inspecting the node"
# Port fields inspection rules may change.
PORT_FIELDS = frozenset({"extra", "local_link_connection", "physical_network", "pxe_enabled", "description",
                         "name", "vendor", "category", "is_smartnic"})


class InspectionWork:
    """Mixed into the Conductor."""

    def continue_inspection(self: ConductorCore, node_id: int, inventory: dict[str, Any],
                            plugin_data: dict[str, Any]) -> None:
        task = self._locked(node_id)
        try:
            current = task.node["provision_state"]
            # A node in enroll only comes from auto-discovery (the API finds no other one for the data).
            discovered = current == states.ENROLL and self.conf.auto_discovery.enabled
            if current != states.INSPECTWAIT and not discovered:
                raise BadRequest(f"Node {task.node['uuid']} is not waiting for inspection data: it is in state "
                                 f"\"{current}\".")
            self.spawn(task, process, inventory, plugin_data, event=None if discovered else "resume")
        except BaseException:
            task.release()
            raise

    def check_inspect_timeouts(self: ConductorCore) -> int:
        """This conductor's nodes in ``inspect wait`` for longer than inspect_wait_timeout fail."""
        timeout = self.conf.conductor.inspect_wait_timeout
        if timeout <= 0:
            return 0
        live = self.live_conductors()
        with self.db.read() as conn:
            waiting = node_db.list_nodes(conn, {"provision_state": states.INSPECTWAIT, "maintenance": False})
        failed = 0
        now = node_db.utcnow()
        for node in waiting:
            started = node["inspection_started_at"] or node["provision_updated_at"]
            if node["reservation"] or not self.owns(node, live) or started is None:
                continue
            if (now - started).total_seconds() <= timeout:
                continue
            try:
                task = self._locked(node["id"])
            except (Conflict, ApiError):
                continue
            try:
                if task.node["provision_state"] == states.INSPECTWAIT:
                    fail(task, f"{TIMEOUT_MESSAGE}: the agent sent no inventory within {timeout} seconds. Check "
                               "that the machine boots the agent ramdisk and reaches the Bare Metal API.")
                    failed += 1
            finally:
                task.release()
        return failed


def fail(task: Task, message: str) -> None:
    LOG.warning("inspection of node %s failed: %s", task.node["uuid"], message)
    if task.node["provision_state"] == states.ENROLL:
        # A discovered node stays as it is, its last_error saying why.
        task.update(last_error=message)
        history.record(task, message, "inspection", error=True)
    else:
        task.process_event("fail", last_error=message)
    clean_up(task)


def clean_up(task: Task, *, finished: bool = False) -> None:
    """The machine off and the ramdisk's boot undone (agent inspection), whatever failed before.

    After a finished inspection, fast track leaves the machine on with its agent.
    """
    clean = getattr(task.driver.inspect, "clean_up", None)
    if clean is None:
        return
    try:
        if finished:
            clean(task, failed=False)
        else:
            clean(task)
    except Exception as error:  # noqa: BLE001 - the node's state already says what happened
        LOG.warning("cleaning up after the inspection of node %s: %s", task.node["uuid"], error)


def process(task: Task, inventory: dict[str, Any], plugin_data: dict[str, Any]) -> None:
    """In a worker, on the locked node in ``inspecting``: everything the agent's data leads to."""
    conf = task.conductor.conf.inspector
    uuid = task.node["uuid"]
    task.write(lambda conn: history.store_inventory(conn, task.node_id, inventory, plugin_data))
    try:
        hooks = inspection.hook_names(conf.hooks)
        findings = inspection.process(task.node, inventory, plugin_data, hooks, add_ports=conf.add_ports,
                                      disk_spacing=conf.disk_partitioning_spacing)
        with task.conductor.db.read() as conn:
            existing = port_db.ports_of_node(conn, task.node_id)
            traits = node_db.traits_of(conn, [task.node_id]).get(task.node_id, [])
            rules = rule_db.list_rules(conn, phase="main")
        create, delete, update = inspection.port_changes(findings, existing, conf.keep_ports)
        target = _target(task, findings, inventory, existing, create, traits)
        rule_engine.apply_rules(rules, target)
    except (inspection.InspectionFailed, rule_engine.RuleFailed) as error:
        fail(task, f"Failed to inspect node {uuid}: {error}")
        return
    except Exception as error:  # noqa: BLE001 - recorded on the node
        LOG.exception("processing the inspection data of node %s", uuid)
        fail(task, f"Unexpected error while processing the inspection data of node {uuid}: {error}")
        return
    try:
        _write(task, target, existing, delete, update, traits)
    except LockLost:
        # Taken over: the node is another conductor's now, nothing to record.
        raise
    except Exception as error:  # noqa: BLE001 - recorded on the node
        LOG.exception("storing what inspection found on node %s", uuid)
        fail(task, f"Failed to store the inspection results of node {uuid}: {error}")
        return
    clean_up(task, finished=True)
    if task.node["provision_state"] == states.ENROLL:
        LOG.info("auto-discovery of node %s finished", uuid)
        return
    task.process_event("done", inspection_finished_at=node_db.utcnow(), last_error=None)
    LOG.info("inspection of node %s finished", uuid)


def _target(task: Task, findings: inspection.Findings, inventory: dict[str, Any], existing: list[dict[str, Any]],
            create: list[dict[str, Any]], traits: list[str]) -> rule_engine.Target:
    node = copy.deepcopy(task.node)
    node["properties"] = findings.properties
    ports = {str(port["address"]).lower(): copy.deepcopy(port) for port in existing}
    for port in create:
        ports[port["address"]] = {"uuid": uuidutils.generate_uuid(), "extra": {}, "local_link_connection": {},
                                  "new": True, **port}
    return rule_engine.Target(node=node, traits=set(traits), plugin_data=findings.plugin_data,
                              inventory=inventory, ports=ports)


def _write(task: Task, target: rule_engine.Target, existing: list[dict[str, Any]],
           delete: list[dict[str, Any]], update: list[tuple[int, bool]], traits: list[str]) -> None:
    """Node fields, traits, ports and plugin data: one transaction, only while this conductor holds the lock."""
    changed = {key: value for key, value in target.node.items()
               if key in rule_engine.WRITABLE_FIELDS and value != task.node.get(key)}
    deleted = {port["id"] for port in delete}
    host = task.conductor.host

    def write(conn: Any) -> None:
        if not node_db.update(conn, task.node_id, changed, reservation=host):
            raise Conflict(f"Node {task.node['uuid']} lost its lock held by {host}.")
        if target.traits != set(traits):
            node_db.set_traits(conn, task.node_id, target.traits)
        for port_id in deleted:
            port_db.delete_port(conn, port_id)
        for port_id, pxe_enabled in update:
            port_db.update_port(conn, port_id, {"pxe_enabled": pxe_enabled})
        for mac, port in target.ports.items():
            _write_port(conn, task, mac, port, target.changed_ports, deleted)
        history.store_inventory(conn, task.node_id, target.inventory, target.plugin_data)

    task.write(write)
    task.node.update(changed)


def _write_port(conn: Any, task: Task, mac: str, port: dict[str, Any], changed: set[str], deleted: set[int]) -> None:
    values = {key: value for key, value in port.items() if key in PORT_FIELDS}
    if not port.get("new"):
        if mac in changed and port["id"] not in deleted:
            port_db.update_port(conn, port["id"], values)
        return
    other = port_db.get_port(conn, address=mac)
    if other is not None:
        LOG.warning("inspection of node %s: MAC %s already belongs to a port of node %s; no port added",
                    task.node["uuid"], mac, other["node_uuid"])
        return
    port_db.insert_port(conn, {**values, "uuid": port["uuid"], "address": mac, "node_id": task.node_id})
    LOG.info("inspection of node %s added port %s (%s)", task.node["uuid"], port["uuid"], mac)
