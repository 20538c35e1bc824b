"""Which node fields may change in which state (upstream's rules)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from corral.baremetal.domain import states
from corral.baremetal.drivers.base import INTERFACE_TYPES
from corral.core.errors import BadRequest, Conflict, ApiError

DRIVER_FIELDS = frozenset({"driver", *(f"{name}_interface" for name in INTERFACE_TYPES)})
# Driver and interfaces change only here (or in maintenance).
DRIVER_UPDATE_STATES = (states.ENROLL, states.INSPECTING, states.INSPECTWAIT, states.MANAGEABLE, states.AVAILABLE)
RESOURCE_CLASS_UPDATE_STATES = (states.ENROLL, states.INSPECTING, states.INSPECTWAIT, states.MANAGEABLE)


class NodeProtected(ApiError):
    status = 403


class NodeAssociated(Conflict):
    def __init__(self, node_uuid: str, instance_uuid: str) -> None:
        super().__init__(f"Node {node_uuid} is associated with instance {instance_uuid}.")


def transition_in_progress(node: Mapping[str, Any]) -> Conflict:
    ident = node.get("name") or node["uuid"]
    return Conflict(f"Node {ident} can not be updated while a state transition is in progress.")


def check_update(node: Mapping[str, Any], changes: Mapping[str, Any]) -> None:
    """Raise when ``changes`` (field -> new value) may not apply to ``node`` now."""
    changed = {key for key, value in changes.items() if node.get(key) != value}
    if not changed:
        return
    state = node["provision_state"]
    if state in states.WORKING_STATES:
        raise transition_in_progress(node)
    uuid = node["uuid"]
    for field in sorted(changed & DRIVER_FIELDS):
        if state not in DRIVER_UPDATE_STATES and not changes.get("maintenance", node["maintenance"]):
            allowed = ", ".join(DRIVER_UPDATE_STATES)
            raise BadRequest(
                f"Node {uuid} can not have {field} updated unless it is in one of allowed ({allowed}) "
                "states or in maintenance mode."
            )
    if "resource_class" in changed and node.get("resource_class") is not None:
        if state not in RESOURCE_CLASS_UPDATE_STATES and not node.get("maintenance"):
            raise BadRequest(
                f"Node {uuid} can not update the resource class while in state {state}; the node must "
                f"be in one of {', '.join(RESOURCE_CLASS_UPDATE_STATES)} or in maintenance."
            )
    if "instance_uuid" in changed and node.get("instance_uuid") and changes.get("instance_uuid"):
        raise NodeAssociated(uuid, node["instance_uuid"])
    _check_protected(node, changes, changed)
    _check_retired(node, changes, changed)


def implied_changes(node: Mapping[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
    """``changes`` with what they imply: retiring undone clears the retired reason (upstream's rule)."""
    implied = dict(changes)
    if "retired" in changes and not changes["retired"] and node.get("retired"):
        implied["retired_reason"] = None
    return implied


def _check_retired(node: Mapping[str, Any], changes: Mapping[str, Any], changed: set[str]) -> None:
    retired = changes.get("retired", node.get("retired"))
    if "retired" in changed and retired and node["provision_state"] == states.AVAILABLE:
        # Upstream's InvalidState: an available node is moved to manageable first.
        raise Conflict(
            f"Node {node['uuid']} can not have 'retired' set in provision state 'available', the current state "
            f"is '{node['provision_state']}'"
        )
    if "retired_reason" in changed and changes["retired_reason"] and not retired:
        raise BadRequest("The retired_reason field can only be set when retired is True")


def _check_protected(node: Mapping[str, Any], changes: Mapping[str, Any], changed: set[str]) -> None:
    protected = changes.get("protected", node.get("protected"))
    if "protected" in changed and protected and node["provision_state"] not in (states.ACTIVE, states.RESCUE):
        raise BadRequest(
            f"Node {node['uuid']} can only be made protected in provision states active and rescue."
        )
    if changes.get("protected_reason", node.get("protected_reason")) and not protected:
        raise BadRequest("The protected_reason field can only be set when protected is True")


def check_delete(node: Mapping[str, Any]) -> None:
    if node.get("protected"):
        raise NodeProtected(f"Node {node['uuid']} is protected and cannot be undeployed, rebuilt or deleted")
    if node.get("instance_uuid"):
        raise NodeAssociated(node["uuid"], node["instance_uuid"])
    state = node["provision_state"]
    if state not in states.DELETE_ALLOWED_STATES and not node.get("maintenance"):
        allowed = ", ".join(sorted(states.DELETE_ALLOWED_STATES))
        raise BadRequest(
            f'Can not delete node "{node["uuid"]}" while it is in provision state "{state}". Valid provision '
            f"states to start deletion are {allowed}, or set the node into maintenance mode"
        )
