"""``GET /v2/schemas/image``, ``images``, ``member`` and ``members``."""

from __future__ import annotations

import falcon

from corral.core.http import Route, send_json
from corral.image.api.state import ImageState


def _serve(name: str):
    def handler(state: ImageState, req: falcon.Request, resp: falcon.Response) -> None:
        send_json(resp, getattr(state.schemas, name))

    return handler


ROUTES = [Route(f"/v2/schemas/{name}", {"GET": _serve(name)}) for name in ("image", "images", "member", "members")]
