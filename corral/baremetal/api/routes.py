"""Bare Metal's route table: each handler module declares its own routes."""

from __future__ import annotations

from corral.baremetal.api.handlers import (
    allocations,
    chassis,
    deploy_templates,
    drivers,
    events,
    inspection_rules,
    management,
    node_extras,
    node_states,
    nodes,
    portgroups,
    ports,
    ramdisk,
    root,
    runbooks,
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
    *node_extras.ROUTES,
    *drivers.ROUTES,
    *allocations.ROUTES,
    *ports.ROUTES,
    *portgroups.ROUTES,
    *chassis.ROUTES,
    *volumes.ROUTES,
    *deploy_templates.ROUTES,
    *runbooks.ROUTES,
    *events.ROUTES,
    *ramdisk.ROUTES,
    *inspection_rules.ROUTES,
]
