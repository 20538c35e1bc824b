"""Conductor work on ports, port groups, volume connectors/targets and VIFs.

Each change runs under the node's lock and writes in one transaction; the
network interface of the node decides what a VIF attach or detach records
and which port changes it refuses.  The methods are mixed into
:class:`corral.baremetal.conductor.manager.Conductor` and are RPC methods.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from corral.baremetal.conductor.task import Task
from corral.baremetal.db import ports as port_db
from corral.baremetal.db import volumes as volume_db
from corral.baremetal.domain import ports as rules
from corral.baremetal.domain import states
from corral.core.db import is_duplicate
from corral.core.errors import BadRequest, Conflict, NotFound

if TYPE_CHECKING:
    from corral.baremetal.conductor.core import ConductorCore

RPC_METHODS = frozenset({
    "update_port", "destroy_port", "update_portgroup", "destroy_portgroup",
    "update_volume", "destroy_volume", "vif_list", "vif_attach", "vif_detach",
})

_VOLUME_ACTION = {"connector": "volume connector", "target": "volume target"}


class PortWork:
    """Port, port group, volume and VIF methods of a conductor (see the module docstring)."""

    # ----------------------------------------------------------- ports

    def update_port(self: ConductorCore, node_id: int, port_id: int, values: dict[str, Any]) -> None:
        with self._locked(node_id) as task:
            with self.db.read() as conn:
                port = _must(port_db.get_port(conn, port_id=port_id), f"Port {port_id} could not be found.")
                portgroup_id = values.get("portgroup_id", port["portgroup_id"])
                portgroup = port_db.get_portgroup(conn, portgroup_id=portgroup_id) if portgroup_id else None
                members = port_db.list_ports(conn, {"portgroup_id": portgroup_id}) if portgroup_id else []
            changed = {key: value for key, value in values.items() if port.get(key) != value}
            rules.check_port_update(task.node, port, changed)
            merged = {**port, **changed}
            adopt = None
            if changed.keys() & {"portgroup_id", "physical_network"}:
                adopt = rules.check_physnet(merged, portgroup, members)
            task.driver.network.port_changed(merged, portgroup, changed)

            def write(conn: Any) -> None:
                port_db.update_port(conn, port_id, changed)
                if adopt is not None and portgroup is not None:
                    port_db.update_portgroup(conn, portgroup["id"], {"physical_network": adopt})

            try:
                task.write(write)
            except Exception as error:
                if is_duplicate(error):
                    raise duplicate_port(self, changed, port_id) from None
                raise

    def destroy_port(self: ConductorCore, node_id: int, port_id: int) -> None:
        with self._locked(node_id) as task:
            with self.db.read() as conn:
                port = _must(port_db.get_port(conn, port_id=port_id), f"Port {port_id} could not be found.")
            vif = task.driver.network.current_vif(port)
            if vif and not task.node["maintenance"]:
                raise rules.InvalidState(f"Cannot delete the port {port['uuid']} as it is bound to VIF {vif} for use.")
            task.write(lambda conn: port_db.delete_port(conn, port_id))

    # ------------------------------------------------------ port groups

    def update_portgroup(self: ConductorCore, node_id: int, portgroup_id: int, values: dict[str, Any]) -> None:
        with self._locked(node_id) as task:
            with self.db.read() as conn:
                portgroup = _must(port_db.get_portgroup(conn, portgroup_id=portgroup_id),
                                  f"Portgroup {portgroup_id} could not be found.")
                members = port_db.list_ports(conn, {"portgroup_id": portgroup_id})
            changed = {key: value for key, value in values.items() if portgroup.get(key) != value}
            if "node_id" in changed:
                _check_portgroup_move(task.node, portgroup, members)
            task.driver.network.portgroup_changed({**portgroup, **changed}, members, changed)

            def write(conn: Any) -> None:
                port_db.update_portgroup(conn, portgroup_id, changed)
                if "physical_network" in changed:
                    # The members follow their group's physical network.
                    port_db.set_members_physical_network(conn, portgroup_id, changed["physical_network"])

            try:
                task.write(write)
            except Exception as error:
                if is_duplicate(error):
                    raise duplicate_portgroup(self, changed, portgroup_id) from None
                raise

    def destroy_portgroup(self: ConductorCore, node_id: int, portgroup_id: int) -> None:
        with self._locked(node_id) as task:
            def delete(conn: Any) -> bool:
                if port_db.member_count(conn, portgroup_id):
                    return False
                port_db.delete_portgroup(conn, portgroup_id)
                return True

            if not task.write(delete):
                # Upstream names the group by its database id here.
                raise BadRequest(
                    f"Cannot complete the requested action because portgroup {portgroup_id} contains ports.")

    # ---------------------------------------------------------- volumes

    def update_volume(self: ConductorCore, node_id: int, kind: str, row_id: int, values: dict[str, Any]) -> None:
        with self._locked(node_id) as task:
            node = task.node
            if node["power_state"] != states.POWER_OFF:
                raise invalid_state_requested(f"{_VOLUME_ACTION[kind]} update", node["uuid"], node["power_state"])
            try:
                task.write(lambda conn: volume_db.update(conn, kind, row_id, values))
            except Exception as error:
                if is_duplicate(error):
                    raise duplicate_volume(kind, values) from None
                raise

    def destroy_volume(self: ConductorCore, node_id: int, kind: str, row_id: int) -> None:
        with self._locked(node_id) as task:
            node = task.node
            if node["provision_state"] not in states.DELETE_ALLOWED_STATES and node["power_state"] != states.POWER_OFF:
                raise invalid_state_requested(f"{_VOLUME_ACTION[kind]} deletion", node["uuid"], node["power_state"])
            task.write(lambda conn: volume_db.delete(conn, kind, row_id))

    # ------------------------------------------------------------- VIFs

    def vif_list(self: ConductorCore, node_id: int) -> list[dict[str, str]]:
        task = Task(self, node_id, shared=True).acquire()
        ports, portgroups = _wiring(self, node_id)
        return task.driver.network.vif_list(ports, portgroups)

    def vif_attach(self: ConductorCore, node_id: int, vif_info: dict[str, Any]) -> None:
        with self._locked(node_id) as task:
            ports, portgroups = _wiring(self, node_id)
            change = task.driver.network.vif_attach(vif_info, ports, portgroups)
            _write_vif_change(task, change)

    def vif_detach(self: ConductorCore, node_id: int, vif_id: str) -> None:
        with self._locked(node_id) as task:
            ports, portgroups = _wiring(self, node_id)
            change = task.driver.network.vif_detach(vif_id, task.node["uuid"], ports, portgroups)
            _write_vif_change(task, change)


def _must(row: dict[str, Any] | None, message: str) -> dict[str, Any]:
    if row is None:
        raise NotFound(message)
    return row


def _wiring(conductor: ConductorCore, node_id: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    with conductor.db.read() as conn:
        return port_db.ports_of_node(conn, node_id), port_db.portgroups_of_node(conn, node_id)


def _write_vif_change(task: Any, change: tuple[str, int, dict[str, Any]] | None) -> None:
    if change is None:
        return
    kind, row_id, info = change
    writer = port_db.update_port if kind == "port" else port_db.update_portgroup
    task.write(lambda conn: writer(conn, row_id, {"internal_info": info}))


def _check_portgroup_move(node: Mapping[str, Any], portgroup: Mapping[str, Any], members: list[Any]) -> None:
    if node["provision_state"] not in rules.CONNECTIVITY_STATES and not node["maintenance"]:
        raise rules.InvalidState(
            f"Portgroup {portgroup['uuid']} can not be associated to node {node['uuid']} unless the node is in a "
            f"{', '.join(rules.CONNECTIVITY_STATES)} state or in maintenance mode. Current state is "
            f"'{node['provision_state']}'."
        )
    if members:
        raise BadRequest(f"Portgroup {portgroup['uuid']} can not be associated with node {node['uuid']} because "
                         "there are ports associated with this portgroup.")


def invalid_state_requested(action: str, node_uuid: str, state: str | None) -> BadRequest:
    return BadRequest(f'The requested action "{action}" can not be performed on node "{node_uuid}" while it is '
                      f'in state "{state}".')


def duplicate_port(conductor: Any, values: Mapping[str, Any], port_id: int | None = None) -> Conflict:
    """Which unique field of a port clashed: MAC address, name or UUID (upstream's texts)."""
    with conductor.db.read() as conn:
        if values.get("address"):
            other = port_db.get_port(conn, address=values["address"])
            if other is not None and other["id"] != port_id:
                return Conflict(f"A port with MAC address {values['address']} already exists.")
        if values.get("name"):
            other = port_db.get_port(conn, name=values["name"])
            if other is not None and other["id"] != port_id:
                return Conflict(f"A port with name {values['name']} already exists.")
    return Conflict(f"A port with UUID {values.get('uuid')} already exists.")


def duplicate_portgroup(conductor: Any, values: Mapping[str, Any], portgroup_id: int | None = None) -> Conflict:
    with conductor.db.read() as conn:
        if values.get("address"):
            other = port_db.get_portgroup(conn, address=values["address"])
            if other is not None and other["id"] != portgroup_id:
                return Conflict(f"A portgroup with MAC address {values['address']} already exists.")
        if values.get("name"):
            other = port_db.get_portgroup(conn, name=values["name"])
            if other is not None and other["id"] != portgroup_id:
                return Conflict(f"A portgroup with name {values['name']} already exists.")
    return Conflict(f"A portgroup with UUID {values.get('uuid')} already exists.")


def duplicate_volume(kind: str, values: Mapping[str, Any]) -> Conflict:
    if kind == "connector":
        if "type" in values or "connector_id" in values:
            return Conflict(f"A volume connector with type {values.get('type')} and connector ID "
                            f"{values.get('connector_id')} already exists.")
        return Conflict(f"A volume connector with UUID {values.get('uuid')} already exists.")
    if "boot_index" in values:
        return Conflict(f"A volume target with boot index '{values['boot_index']}' for the same node already exists.")
    return Conflict(f"A volume target with UUID {values.get('uuid')} already exists.")
