"""What the Image service's handlers share: finding images, policy, bodies."""

from __future__ import annotations

from typing import Any

import falcon
import orjson

from corral.core import errors
from corral.core.http import read_body
from corral.image.api.errors import api_error
from corral.image.api.state import ImageState
from corral.image.db import images as image_db
from corral.image.db import members as member_db
from corral.image.domain.images import ImageError, is_uuid

__all__ = ["enforce", "fail", "find_image", "forbidden", "is_uuid", "json_body", "not_found", "run", "target",
           "viewer"]
from corral.image.domain.listing import Viewer, can_see


def fail(status: int, message: str, **headers: str) -> errors.ApiError:
    return api_error(ImageError(status, message, headers))


def viewer(state: ImageState, req: falcon.Request) -> Viewer:
    context = req.context
    is_admin = state.policy.allows(context, "context_is_admin", {})
    return Viewer(project_id=context.project_id, is_admin=is_admin)


def target(image: dict[str, Any], req: falcon.Request) -> dict[str, Any]:
    """The image as a policy target, as Glance builds it."""
    project = req.context.project_id
    member = project if image["visibility"] == "shared" and image["owner"] != project else None
    return {"project_id": image["owner"], "owner": image["owner"], "visibility": image["visibility"],
            "member_id": member}


def enforce(state: ImageState, req: falcon.Request, rule: str, image: dict[str, Any]) -> None:
    """Policy on an existing image; a caller who may not even see it gets 404, as from Glance."""
    image_target = target(image, req)
    if state.policy.allows(req.context, rule, image_target):
        return
    if rule == "get_image" or not state.policy.allows(req.context, "get_image", image_target):
        raise errors.NotFound("The resource could not be found.")
    raise forbidden(rule)


def forbidden(rule: str) -> errors.ApiError:
    return fail(403, f"You are not authorized to complete {rule} action.")


def not_found(image_id: str) -> errors.ApiError:
    return fail(404, f"No image found with ID {image_id}")


def find_image(state: ImageState, req: falcon.Request, image_id: str, conn: Any = None, *,
               lock: bool = False) -> dict[str, Any]:
    """The image, if the caller may see it (404 otherwise, without telling whether it exists).

    Given a write transaction's ``conn``, ``lock`` holds the image's row until it ends.
    """
    if not is_uuid(image_id):
        raise not_found(image_id)
    if conn is None:
        with state.db.read() as read:
            return _visible_image(state, req, image_id, read, False)
    return _visible_image(state, req, image_id, conn, lock)


def _visible_image(state: ImageState, req: falcon.Request, image_id: str, conn: Any, lock: bool) -> dict[str, Any]:
    image = image_db.get(conn, image_id, lock=lock)
    if image is None:
        raise not_found(image_id)
    who = viewer(state, req)
    membership = None
    if image["visibility"] == "shared" and who.project_id and image["owner"] != who.project_id:
        member = member_db.get(conn, image_id, who.project_id)
        membership = member["status"] if member else None
    if not can_see(image, who, membership):
        raise not_found(image_id)
    return image


def json_body(state: ImageState, req: falcon.Request) -> Any:
    data = read_body(req, state.conf.api.max_request_body_size)
    if not data:
        raise fail(400, "Body expected in request.")
    try:
        body = orjson.loads(data)
    except orjson.JSONDecodeError:
        raise fail(400, "Malformed JSON in request body.") from None
    if not isinstance(body, (dict, list)):
        raise fail(400, "Unexpected body type. Expected list/dict.")
    return body


def run(work: Any, *args: Any, **kwargs: Any) -> Any:
    """Call domain code, turning its refusals into API errors."""
    try:
        return work(*args, **kwargs)
    except ImageError as error:
        raise api_error(error) from None
