"""Placement's route table."""

from __future__ import annotations

from corral.core.http import Route
from corral.placement.api.handlers import root

ROUTES = [
    Route("/", {"GET": root.home}, public=True),
]
