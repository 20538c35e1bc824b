"""Identity's route table."""

from __future__ import annotations

from corral.core.http import Route
from corral.identity.api.handlers import app_creds, assignments, auth, catalog, resources, roles, root

ROUTES: list[Route] = [
    *root.ROUTES,
    *auth.ROUTES,
    *resources.ROUTES,
    *roles.ROUTES,
    *assignments.ROUTES,
    *app_creds.ROUTES,
    *catalog.ROUTES,
]
