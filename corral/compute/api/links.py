"""Links in Compute representations.

``self`` links carry the API version (``<endpoint>/v2.1[/<project>]/...``),
``bookmark`` links do not (``<endpoint>[/<project>]/...``); the project
segment appears only when the request's URL had one.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import falcon

from corral.core.http import base_url

# Set by the route wrapper when the URL carried /v2.1/{project_id}/.
URL_PROJECT = "url_project"


def endpoint_url(state: Any, req: falcon.Request) -> str:
    return base_url(req, state.conf.compute.public_endpoint)


def resource_links(state: Any, req: falcon.Request, collection: str, ident: str) -> list[dict[str, str]]:
    base = endpoint_url(state, req)
    project = req.context.extras.get(URL_PROJECT)
    middle = f"/{project}" if project else ""
    return [
        {"rel": "self", "href": f"{base}/v2.1{middle}/{collection}/{ident}"},
        {"rel": "bookmark", "href": f"{base}{middle}/{collection}/{ident}"},
    ]


def collection_url(state: Any, req: falcon.Request, collection: str) -> str:
    base = endpoint_url(state, req)
    project = req.context.extras.get(URL_PROJECT)
    middle = f"/{project}" if project else ""
    return f"{base}/v2.1{middle}/{collection}"


def next_link(state: Any, req: falcon.Request, collection: str, marker: str) -> list[dict[str, str]]:
    """Upstream's ``next`` link: the request's parameters sorted, one value each, marker replaced.

    Upstream sorts the (name, value) pairs and keeps the last one of each
    name, which for a repeated parameter is its greatest value.
    """
    params: dict[str, str] = {}
    for name, value in sorted(req.params.items()):
        params[name] = max(value) if isinstance(value, list) else value
    params["marker"] = marker
    return [{"rel": "next", "href": f"{collection_url(state, req, collection)}?{urlencode(params)}"}]
