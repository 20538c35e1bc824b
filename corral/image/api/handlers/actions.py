"""``POST /v2/images/{image_id}/actions/deactivate`` and ``.../reactivate``."""

from __future__ import annotations

from typing import Any

import falcon
from sqlalchemy.engine import Connection

from corral.core import errors
from corral.core.http import Route, read_body, send_empty
from corral.image.api import common
from corral.image.api.state import ImageState
from corral.image.db import images as image_db

# action -> (policy rule, the status it leaves, the status it reaches)
_ACTIONS = {
    "deactivate": ("deactivate", "active", "deactivated"),
    "reactivate": ("reactivate", "deactivated", "active"),
}


def _act(state: ImageState, req: falcon.Request, image_id: str, action: str) -> None:
    rule, source, target = _ACTIONS[action]
    if read_body(req, state.conf.api.max_request_body_size):
        raise common.fail(400, "A body is not expected with this request.")

    def write(conn: Connection) -> Any:
        image = common.find_image(state, req, image_id, conn, lock=True)
        common.enforce(state, req, rule, image)
        if image["status"] == target:
            return None  # already there: nothing to do, as upstream
        if image["status"] != source:
            raise common.fail(403, f"Not allowed to {action} image in status '{image['status']}'")
        if not image_db.update(conn, image, {"status": target}, status=source):
            raise errors.Conflict("The image was changed by another request; try again.")
        return None

    state.db.write(write)


def deactivate(state: ImageState, req: falcon.Request, resp: falcon.Response, image_id: str) -> None:
    _act(state, req, image_id, "deactivate")
    send_empty(resp)


def reactivate(state: ImageState, req: falcon.Request, resp: falcon.Response, image_id: str) -> None:
    _act(state, req, image_id, "reactivate")
    send_empty(resp)


ROUTES = [
    Route("/v2/images/{image_id}/actions/deactivate", {"POST": deactivate}),
    Route("/v2/images/{image_id}/actions/reactivate", {"POST": reactivate}),
]
