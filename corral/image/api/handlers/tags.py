"""``PUT`` / ``DELETE /v2/images/{image_id}/tags/{tag}``."""

from __future__ import annotations

from typing import Any

import falcon
from sqlalchemy.engine import Connection

from corral.core import errors
from corral.core.http import Route, send_empty
from corral.image.api import common
from corral.image.api.state import ImageState
from corral.image.db import members as member_db
from corral.image.domain.images import over_quota


def _image(state: ImageState, req: falcon.Request, conn: Connection, image_id: str) -> dict[str, Any]:
    try:
        image = common.find_image(state, req, image_id, conn, lock=True)
    except errors.ApiError as error:
        if error.status == 404:
            raise common.fail(404, f"Image {image_id} not found.") from None
        raise
    common.enforce(state, req, "modify_image", image)
    return image


def add(state: ImageState, req: falcon.Request, resp: falcon.Response, image_id: str, tag: str) -> None:
    common.run(state.schemas.check_image, {"tags": [tag]})

    def write(conn: Connection) -> None:
        image = _image(state, req, conn, image_id)
        quota = state.conf.image_tag_quota
        if tag in image["tags"]:
            return
        if quota >= 0 and len(image["tags"]) + 1 > quota:
            raise common.fail(413, f"Image tag limit exceeded for image {image_id}: "
                                   f"{over_quota('image tags', len(image['tags']) + 1, quota)}:")
        if member_db.add_tag(conn, image_id, tag):
            member_db.touch_image(conn, image_id)

    state.db.write(write)
    send_empty(resp)


def remove(state: ImageState, req: falcon.Request, resp: falcon.Response, image_id: str, tag: str) -> None:
    def write(conn: Connection) -> None:
        _image(state, req, conn, image_id)
        if not member_db.remove_tag(conn, image_id, tag):
            raise errors.NotFound("The resource could not be found.")
        member_db.touch_image(conn, image_id)

    state.db.write(write)
    send_empty(resp)


ROUTES = [Route("/v2/images/{image_id}/tags/{tag}", {"PUT": add, "DELETE": remove})]
