"""Bare Metal's route table: each handler module declares its own routes."""

from __future__ import annotations

from corral.baremetal.api.handlers import root
from corral.core.http import Route

ROUTES: list[Route] = [
    *root.ROUTES,
]
