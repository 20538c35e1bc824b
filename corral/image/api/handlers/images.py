"""``/v2/images`` and ``/v2/images/{image_id}``: create, list, show, update, delete."""

from __future__ import annotations

from typing import Any

import falcon
from sqlalchemy.engine import Connection

from corral.core import errors
from corral.core.http import Route, send_empty, send_json
from corral.image.api import common, views
from corral.image.api.state import ImageState
from corral.image.db import images as image_db
from corral.image.domain import patch, quotas
from corral.image.domain.images import (
    ImageError,
    check_limits,
    new_image,
    split_create_body,
)
from corral.image.domain.listing import parse_query


def _check_visibility(state: ImageState, req: falcon.Request, visibility: Any, target: dict[str, Any]) -> None:
    rule = {"public": "publicize_image", "community": "communitize_image"}.get(visibility)
    if rule is not None and not state.policy.allows(req.context, rule, dict(target, visibility=visibility)):
        raise ImageError(403, f"You are not authorized to complete {rule} action.")


def create(state: ImageState, req: falcon.Request, resp: falcon.Response) -> None:
    body = common.json_body(state, req)
    if not isinstance(body, dict):
        raise common.fail(400, "Provided object does not match schema 'image': "
                               f"{body!r} is not of type 'object'")
    common.run(state.schemas.check_image, body)
    request = common.run(split_create_body, body)
    owner = request.base.get("owner", req.context.project_id)
    target = {"project_id": owner, "owner": owner, "visibility": request.base.get("visibility", "private")}
    if not state.policy.allows(req.context, "add_image", target):
        if owner != req.context.project_id:
            raise common.run(_raise, ImageError(403, f"You are not permitted to create images owned by '{owner}'",
                                                as_detail=True))
        raise common.forbidden("add_image")
    common.run(_check_visibility, state, req, target["visibility"], target)
    row = new_image(request, req.context.project_id)
    common.run(check_limits, {**row, "properties": request.properties, "tags": request.tags}, state.conf)

    def write(conn: Connection) -> None:
        if image_db.exists(conn, row["id"]):
            raise common.fail(409, f"Image ID {row['id']} already exists!")
        if row["owner"] is not None:
            common.run(quotas.check_count, state.conf, row["owner"], image_db.owner_usage(conn, row["owner"]))
        image_db.insert(conn, row, request.properties, request.tags)

    state.db.write(write)
    with state.db.read() as conn:
        created = image_db.get(conn, row["id"])
    assert created is not None
    resp.set_header("Location", f"{req.prefix}/v2/images/{row['id']}")
    if state.conf.enabled_import_methods:
        resp.set_header("OpenStack-image-import-methods", ",".join(state.conf.enabled_import_methods))
    send_json(resp, views.image(created, direct_url=state.conf.show_image_direct_url), status=201)


def index(state: ImageState, req: falcon.Request, resp: falcon.Response) -> None:
    params = _query_params(req)
    query = common.run(parse_query, params, state.conf.limit_param_default, state.conf.api_limit_max)
    if not state.policy.allows(req.context, "get_images", {"project_id": req.context.project_id}):
        raise common.forbidden("get_images")
    who = common.viewer(state, req)
    with state.db.read() as conn:
        marker = None
        if query.marker is not None:
            marker = _marker(state, req, conn, query.marker)
        rows = image_db.list_page(conn, query, who, marker)
    last_values = {name: values[-1] for name, values in params.items()}
    send_json(resp, views.image_list(rows, last_values.items(), query.limit,
                                     direct_url=state.conf.show_image_direct_url))


def _marker(state: ImageState, req: falcon.Request, conn: Connection, marker: str) -> dict[str, Any]:
    """The marker image: 400 when there is none, 403 when the caller may not see it (as Glance)."""
    try:
        return common.find_image(state, req, marker, conn)
    except errors.ApiError as error:
        if error.status != 404:
            raise
        if common.is_uuid(marker) and image_db.get(conn, marker) is not None:
            raise common.fail(403, f"Forbidding request, image {marker} not visible") from None
        raise common.fail(400, f"No image found with ID {marker}") from None


def _query_params(req: falcon.Request) -> dict[str, list[str]]:
    params: dict[str, list[str]] = {}
    for name, value in falcon.uri.parse_query_string(req.query_string, keep_blank=True, csv=False).items():
        params[name] = value if isinstance(value, list) else [value]
    return params


def show(state: ImageState, req: falcon.Request, resp: falcon.Response, image_id: str) -> None:
    image = common.find_image(state, req, image_id)
    common.enforce(state, req, "get_image", image)
    send_json(resp, views.image(image, direct_url=state.conf.show_image_direct_url))


def update(state: ImageState, req: falcon.Request, resp: falcon.Response, image_id: str) -> None:
    draft = patch.CONTENT_TYPES.get((req.content_type or "").split(";")[0].strip())
    if draft is None:
        raise common.run(_raise, patch.content_type_error())
    body = common.json_body(state, req)
    changes = common.run(patch.parse, body, draft, state.schemas.check_image)
    who = common.viewer(state, req)

    def write(conn: Connection) -> dict[str, Any]:
        image = common.find_image(state, req, image_id, conn, lock=True)
        common.enforce(state, req, "get_image", image)
        if not changes:
            return image
        common.enforce(state, req, "modify_image", image)
        caller = patch.Caller(who.is_admin, lambda value: _check_visibility(state, req, value, common.target(image, req)))
        changed = common.run(patch.apply, image, changes, caller, draft)
        common.run(check_limits, changed, state.conf)
        values = {key: changed[key] for key in patch.ATTRIBUTES if key in image and changed[key] != image[key]}
        values.pop("tags", None)
        if not image_db.update(conn, image, values, properties=changed["properties"], tags=changed["tags"]):
            # Changed since it was read in this very transaction: only a
            # concurrent writer can do that; the whole transaction is retried.
            raise errors.Conflict("The image was changed by another request; try again.")
        return image_db.get(conn, image_id)  # type: ignore[return-value]

    image = state.db.write(write)
    send_json(resp, views.image(image, direct_url=state.conf.show_image_direct_url))


def _raise(error: ImageError) -> None:
    raise error


def delete(state: ImageState, req: falcon.Request, resp: falcon.Response, image_id: str) -> None:
    def write(conn: Connection) -> dict[str, Any]:
        try:
            image = common.find_image(state, req, image_id, conn, lock=True)
        except errors.ApiError as error:
            if error.status == 404:
                raise common.fail(404, f"Failed to find image {image_id} to delete") from None
            raise
        common.enforce(state, req, "delete_image", image)
        if image["protected"]:
            raise common.fail(403, f"Image {image_id} is protected and cannot be deleted.")
        if image["status"] == "deleted":
            raise common.fail(404, f"No image found with ID {image_id}")
        if not image_db.mark_deleted(conn, image):
            raise errors.Conflict("The image was changed by another request; try again.")
        return image

    image = state.db.write(write)
    # The data goes once nothing refers to it any more.
    if image["location"]:
        state.store.delete(image["location"])
    state.staging.remove(image_id)
    send_empty(resp)


ROUTES = [
    Route("/v2/images", {"GET": index, "POST": create}),
    Route("/v2/images/{image_id}", {"GET": show, "PATCH": update, "DELETE": delete}),
]
