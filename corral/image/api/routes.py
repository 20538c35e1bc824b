"""The Image service's route table."""

from __future__ import annotations

from corral.core.http import Route
from corral.image.api.handlers import (
    actions,
    data,
    images,
    imports,
    members,
    schemas,
    tags,
)

ROUTES: list[Route] = [
    *images.ROUTES,
    *data.ROUTES,
    *imports.ROUTES,
    *members.ROUTES,
    *tags.ROUTES,
    *actions.ROUTES,
    *schemas.ROUTES,
]
