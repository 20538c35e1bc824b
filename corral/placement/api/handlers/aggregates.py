"""/resource_providers/{uuid}/aggregates (1.1; generations from 1.19)."""

from __future__ import annotations

from typing import Any

import falcon
from sqlalchemy.engine import Connection

from corral.core import errors
from corral.core.http import Endpoint, Route
from corral.placement.api import errors as codes
from corral.placement.api import util
from corral.placement.api.state import PlacementState
from corral.placement.db import aggregates, providers

INTRODUCED = (1, 1)
WITH_GENERATION = (1, 19)


def _body(req: falcon.Request, uuids: list[str], generation: int) -> dict[str, Any]:
    body: dict[str, Any] = {"aggregates": uuids}
    if req.context.at_least(*WITH_GENERATION):
        body["resource_provider_generation"] = generation
    return body


def show_aggregates(state: PlacementState, req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
    util.authorize(state, req, "placement:resource_providers:aggregates:list")
    with state.db.read() as conn:
        provider = providers.get_or_404(conn, uuid)
        found = aggregates.for_provider(conn, provider.id)
    util.send_cacheable(req, resp, _body(req, found, provider.generation), provider.modified)


def replace_aggregates(state: PlacementState, req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
    util.authorize(state, req, "placement:resource_providers:aggregates:update")
    body = util.provider_json_body(state, req, state.schema("aggregates.put"), uuid)
    with_generation = req.context.at_least(*WITH_GENERATION)
    wanted = body["aggregates"] if with_generation else body
    now = util.utcnow()

    def work(conn: Connection) -> tuple[list[str], int]:
        provider = providers.get_or_404(conn, uuid)
        generation = provider.generation
        if with_generation:
            if body["resource_provider_generation"] != provider.generation:
                raise errors.Conflict(util.GENERATION_CHANGED, code=codes.CONCURRENT_UPDATE)
            generation = providers.bump_generation(conn, provider.id, body["resource_provider_generation"], now)
        aggregates.replace(conn, provider.id, wanted, now)
        return generation

    generation = state.db.write(work)
    # Upstream echoes the aggregates in the order they were sent.
    util.send_cacheable(req, resp, _body(req, list(wanted), generation), now)


ROUTES = [
    Route(
        "/resource_providers/{uuid}/aggregates",
        {
            "GET": Endpoint(show_aggregates, min_version=INTRODUCED),
            "PUT": Endpoint(replace_aggregates, min_version=INTRODUCED),
        },
    ),
]
