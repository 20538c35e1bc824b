"""Placement's route table.

Each handler module declares its own ``ROUTES``; this table is their
concatenation, in a fixed order.
"""

from __future__ import annotations

from corral.core.http import Route
from corral.placement.api.handlers import aggregates, allocation_candidates, allocations, inventories, reshaper, resource_classes, resource_providers, root, traits, usages

ROUTES: list[Route] = [
    *root.ROUTES,
    *resource_providers.ROUTES,
    *inventories.ROUTES,
    *resource_classes.ROUTES,
    *traits.ROUTES,
    *aggregates.ROUTES,
    *allocation_candidates.ROUTES,
    *allocations.ROUTES,
    *usages.ROUTES,
    *reshaper.ROUTES,
]
