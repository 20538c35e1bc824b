"""Bare Metal's route table: each handler module declares its own routes."""

from __future__ import annotations

from corral.baremetal.api.handlers import (
    allocations,
    chassis,
    drivers,
    management,
    node_states,
    nodes,
    portgroups,
    ports,
    root,
    traits,
    volumes,
)
from corral.core.http import Route

ROUTES: list[Route] = [
    *root.ROUTES,
    *nodes.ROUTES,
    *node_states.ROUTES,
    *traits.ROUTES,
    *management.ROUTES,
    *drivers.ROUTES,
    *allocations.ROUTES,
    *ports.ROUTES,
    *portgroups.ROUTES,
    *chassis.ROUTES,
    *volumes.ROUTES,
]
