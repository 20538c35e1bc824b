"""Request rules upstream Placement applies to every route, before handlers run.

* A body (content-length above zero) needs a content type: 400 otherwise.
* A method a path does not serve, OPTIONS included, is a 405 whose
  ``allow`` header lists exactly the methods the path serves.
* An empty path segment (``/traits/``) is a plain 404.
* A GET that answers with JSON refuses (406) an Accept header that rules
  JSON out; the root document and ``GET /traits/{name}`` (no body) do not
  look at Accept.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import falcon

from corral.core import errors
from corral.core.http import Route

JSON = "application/json"
# Where upstream lists a path's methods in another order than the route table does.
_ALLOW_ORDER = {"/resource_providers/{uuid}": ("GET", "DELETE", "PUT")}
# GET routes that never look at the Accept header.
_ACCEPT_ANYTHING = frozenset({"/", "/traits/{name}"})


class PlacementRules:
    """Falcon middleware enforcing the rules above."""

    def __init__(self, routes: Iterable[Route]) -> None:
        self._methods: dict[str, tuple[str, ...]] = {
            route.path: tuple(method.upper() for method in route.methods) for route in routes
        }
        for path, order in _ALLOW_ORDER.items():
            if sorted(self._methods.get(path, ())) == sorted(order):
                self._methods[path] = order

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        raw_length = req.get_header("content-length")
        if not raw_length:
            return
        try:
            length = int(raw_length)
        except ValueError:
            raise errors.BadRequest("content-length header must be an integer") from None
        if length > 0 and not req.content_type:
            raise errors.BadRequest("content-type header required when content-length > 0")

    def process_resource(self, req: falcon.Request, resp: falcon.Response, resource: Any, params: Any) -> None:
        template = req.uri_template
        served = self._methods.get(template or "")
        if served is None:
            return
        if any(value == "" for value in (params or {}).values()):
            # An empty path segment matches no upstream route.
            raise errors.NotFound("The resource could not be found.")
        if req.method not in served:
            raise errors.MethodNotAllowed(
                "The method specified is not allowed for this resource.", headers={"allow": ", ".join(served)}
            )
        if req.method == "GET" and template not in _ACCEPT_ANYTHING and req.get_header("accept"):
            if not req.client_accepts(JSON):
                raise errors.NotAcceptable(f"Only {JSON} is provided")
