"""Allocations: their state machine, which nodes may serve one, how they read.

No HTTP and no SQL here: the conductor (corral.baremetal.conductor.allocations)
and the API handlers (corral.baremetal.api.handlers.allocations) share these
rules.
"""

from __future__ import annotations

import functools
import random
import re
from collections.abc import Mapping, Sequence
from typing import Any

from automaton import machines

from corral.baremetal.domain import states as node_states
from corral.core import statemachine

# States (upstream's names).
ALLOCATING = "allocating"
ACTIVE = "active"
ERROR = "error"
STATES = (ALLOCATING, ACTIVE, ERROR)

# The state machine: (state, event) -> next state.  Only these paths exist.
TRANSITIONS: dict[tuple[str, str], str] = {
    (ALLOCATING, "success"): ACTIVE,
    (ALLOCATING, "fail"): ERROR,
}

NAME_PATTERN = re.compile(r"^[a-zA-Z0-9-._~]+$")
MAX_NAME_LENGTH = 255
MAX_RESOURCE_CLASS_LENGTH = 80

# Node states in which an allocation may not be removed outside maintenance
# (besides those where node updates are refused).
FORBIDDEN_DELETE_STATES = frozenset({node_states.ACTIVE})


class AllocationFailed(Exception):
    """Nothing can serve the allocation; ``reason`` goes into last_error."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@functools.cache
def machine() -> machines.FiniteMachine:
    return statemachine.build(TRANSITIONS)


def next_state(state: str, event: str) -> str | None:
    return statemachine.step(machine(), state, event)


def is_valid_name(name: Any) -> bool:
    return isinstance(name, str) and 0 < len(name) <= MAX_NAME_LENGTH and NAME_PATTERN.match(name) is not None


def failure_message(allocation_uuid: str, reason: str) -> str:
    return f"Failed to process allocation {allocation_uuid}: {reason}."


# ----------------------------------------------------------- candidates


def unfit_reason(allocation: Mapping[str, Any], node: Mapping[str, Any]) -> str | None:
    """Why ``node`` (with its ``traits``) cannot serve ``allocation`` now; None when it can."""
    if node.get("provision_state") != node_states.AVAILABLE:
        return f"provision state is {node.get('provision_state')}"
    if node.get("maintenance"):
        return "in maintenance"
    if node.get("power_state") is None:
        return "power state is unknown"
    if node.get("instance_uuid"):
        return f"already associated with {node['instance_uuid']}"
    if node.get("resource_class") != allocation["resource_class"]:
        return f"resource class is {node.get('resource_class')}"
    candidates = allocation.get("candidate_nodes") or []
    if candidates and node["uuid"] not in candidates:
        return "not a candidate node"
    owner = allocation.get("owner")
    if owner and owner not in (node.get("owner"), node.get("lessee")):
        return f"not owned by or leased to {owner}"
    missing = set(allocation.get("traits") or []) - set(node.get("traits") or [])
    if missing:
        return f"lacks traits {', '.join(sorted(missing))}"
    return None


def choose_candidates(allocation: Mapping[str, Any], nodes: Sequence[Mapping[str, Any]],
                      rng: random.Random | None = None) -> list[Mapping[str, Any]]:
    """The nodes to try, in order; AllocationFailed with upstream's reason when there are none.

    The list is shuffled so that conductors working at once do not all race
    for the same node; a node named like the allocation goes first.
    """
    resource_class = allocation["resource_class"]
    requested = list(allocation.get("traits") or [])
    basic = {**allocation, "traits": []}
    usable = [node for node in nodes if unfit_reason(basic, node) is None]
    if not usable:
        if allocation.get("candidate_nodes"):
            raise AllocationFailed(
                f"none of the requested nodes are available and match the resource class {resource_class}"
            )
        raise AllocationFailed(f"no available nodes match the resource class {resource_class}")
    if requested:
        usable = [node for node in usable if set(requested) <= set(node.get("traits") or [])]
        if not usable:
            raise AllocationFailed(f"no suitable nodes have the requested traits {', '.join(requested)}")
    (rng or random).shuffle(usable)
    name = allocation.get("name")
    if name:
        usable.sort(key=lambda node: node.get("name") != name)
    return usable


def instance_info_for(allocation: Mapping[str, Any], node: Mapping[str, Any]) -> dict[str, Any]:
    """The node's instance_info once reserved: the requested traits recorded under ``traits``."""
    info = dict(node.get("instance_info") or {})
    info["traits"] = list(allocation.get("traits") or [])
    return info


# ------------------------------------------------------------- backfill


def backfill_refusals(allocation: Mapping[str, Any], node: Mapping[str, Any], node_traits: Sequence[str]) -> list[str]:
    """Why ``node`` cannot be recorded as serving ``allocation`` (upstream's wording); empty when it can."""
    reasons = []
    if node.get("provision_state") != node_states.ACTIVE:
        reasons.append(f'Node must be in the "active" state, but the current state is "{node.get("provision_state")}"')
    resource_class = allocation.get("resource_class")
    if resource_class and node.get("resource_class") != resource_class:
        reasons.append(f"Resource class {node.get('resource_class')} does not match the requested resource class "
                       f"{resource_class}")
    traits = list(allocation.get("traits") or [])
    if traits and not set(traits) <= set(node_traits):
        reasons.append(f"List of traits {sorted(node_traits)} does not match the requested traits {traits}")
    candidates = allocation.get("candidate_nodes") or []
    if candidates and node["uuid"] not in candidates:
        reasons.append(f"Candidate nodes must be empty or contain the target node, but got {candidates}")
    return reasons


# ------------------------------------------------------------- deletion


def delete_refusal(allocation: Mapping[str, Any], node: Mapping[str, Any] | None) -> str | None:
    """Why the allocation may not be removed from ``node`` now (409); None when it may."""
    if node is None or node.get("maintenance"):
        return None
    state = node.get("provision_state")
    if state in FORBIDDEN_DELETE_STATES:
        return (
            f"Cannot remove allocation {allocation['uuid']} for node {node['uuid']}, because the node is "
            "active (and maintenance mode is off)"
        )
    if state not in node_states.UPDATE_ALLOWED_STATES:
        return (
            f"Cannot remove allocation {allocation['uuid']} for node {node['uuid']}, because the node is in "
            f"state {state} where updates are not allowed (and maintenance mode is off)"
        )
    return None


# ------------------------------------------------------------ wire view

# Upstream's allocation body, in wire order, and the version each field appeared in.
FIELDS = (
    "uuid", "created_at", "updated_at", "candidate_nodes", "extra", "last_error", "name", "owner",
    "resource_class", "state", "traits", "links", "node_uuid",
)
FIELD_VERSIONS: dict[str, tuple[int, int]] = {"owner": (1, 60)}
