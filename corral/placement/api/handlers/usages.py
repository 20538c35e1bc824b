"""/resource_providers/{uuid}/usages and /usages (1.9; consumer types at 1.38)."""

from __future__ import annotations

import falcon

from corral.core.http import Endpoint, Route
from corral.placement.api import util
from corral.placement.api.state import PlacementState
from corral.placement.db import providers, usages

PROJECT_USAGES = (1, 9)
CONSUMER_TYPES = (1, 38)

_QUERY = {
    "type": "object",
    "properties": {
        "project_id": {"type": "string", "minLength": 1, "maxLength": 255},
        "user_id": {"type": "string", "minLength": 1, "maxLength": 255},
    },
    "required": ["project_id"],
    "additionalProperties": False,
}
_QUERY_1_38 = {
    **_QUERY,
    "properties": {
        **_QUERY["properties"],
        # Upstream's pattern, loose ends included ("^all" has no "$").
        "consumer_type": {"type": "string", "pattern": "^[A-Z0-9_]+$|^all|^unknown$", "minLength": 1, "maxLength": 255},
    },
}


def provider_usages(state: PlacementState, req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
    util.authorize(state, req, "placement:resource_providers:usages")
    with state.db.read() as conn:
        provider = providers.get_or_404(conn, uuid, context="No resource provider with uuid {uuid} found")
        found = usages.for_provider(conn, provider.id)
    body = {"usages": found, "resource_provider_generation": provider.generation}
    util.send_cacheable(req, resp, body, provider.modified)


def project_usages(state: PlacementState, req: falcon.Request, resp: falcon.Response) -> None:
    single = util.last_values(util.query_params(req))
    with_types = req.context.at_least(*CONSUMER_TYPES)
    key = "usages.query_1_38" if with_types else "usages.query"
    validator = state.cache.get(key)
    if validator is None:
        validator = state.cache[key] = util.QuerySchema(_QUERY_1_38 if with_types else _QUERY)
    validator.validate(single)
    project_id, user_id = single["project_id"], single.get("user_id")
    util.authorize(state, req, "placement:usages", {"project_id": project_id})
    with state.db.read() as conn:
        if with_types:
            found = usages.by_consumer_type(conn, project_id, user_id, single.get("consumer_type"))
        else:
            found = usages.for_project(conn, project_id, user_id)
    util.send_cacheable(req, resp, {"usages": found}, None)


ROUTES = [
    Route("/resource_providers/{uuid}/usages", {"GET": provider_usages}),
    Route("/usages", {"GET": Endpoint(project_usages, min_version=PROJECT_USAGES)}),
]
