"""Compute's route table.

Handler modules declare their routes relative to the API version
(``/servers``); :func:`versioned` mounts each under ``/v2.1`` and, for
clients whose endpoint carries the project, ``/v2.1/{project_id}``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any

from corral.core.http import Endpoint, Route
from corral.compute.api.handlers import (
    aggregates, availability_zones, flavors, hypervisors, instance_actions, keypairs, os_services, quotas, root,
    server_actions, server_groups, server_metadata, server_tags, servers, usage,
)
from corral.compute.api.links import URL_PROJECT

API_PREFIX = "/v2.1"


def _with_url_project(handler: Callable[..., None]) -> Callable[..., None]:
    @functools.wraps(handler)
    def wrapped(state: Any, req: Any, resp: Any, url_project_id: str, **params: Any) -> None:
        req.context.extras[URL_PROJECT] = url_project_id
        handler(state, req, resp, **params)

    return wrapped


def _project_variant(spec: Any) -> Any:
    if isinstance(spec, Endpoint):
        return Endpoint(_with_url_project(spec.handler), spec.min_version, spec.max_version)
    if callable(spec):
        return _with_url_project(spec)
    return tuple(_project_variant(item) for item in spec)


def versioned(routes: Iterable[Route]) -> list[Route]:
    mounted = []
    for route in routes:
        mounted.append(Route(API_PREFIX + route.path, route.methods))
        methods = {method: _project_variant(spec) for method, spec in route.methods.items()}
        mounted.append(Route(API_PREFIX + "/{url_project_id}" + route.path, methods))
    return mounted


def all_routes() -> list[Route]:
    return [
        *root.ROUTES,
        *versioned([
            *flavors.ROUTES, *servers.ROUTES, *server_actions.ROUTES, *server_metadata.ROUTES,
            *server_tags.ROUTES, *instance_actions.ROUTES, *os_services.ROUTES, *quotas.ROUTES, *aggregates.ROUTES,
            *keypairs.ROUTES, *server_groups.ROUTES, *hypervisors.ROUTES, *availability_zones.ROUTES,
            *usage.ROUTES,
        ]),
    ]
