"""``/v2/images/{image_id}/members``: sharing an image with other projects.

The owner adds a project (``pending``); the member project accepts or
rejects it.  Only ``shared`` images have members.  A member project sees
its own membership only.
"""

from __future__ import annotations

from typing import Any

import falcon
from sqlalchemy.engine import Connection

from corral.core.http import Route, send_empty, send_json
from corral.image.api import common, views
from corral.image.api.state import ImageState
from corral.image.db import members as member_db
from corral.image.domain.images import MEMBER_STATUSES, over_quota


def _image(state: ImageState, req: falcon.Request, image_id: str, conn: Connection | None = None) -> dict[str, Any]:
    try:
        image = common.find_image(state, req, image_id, conn)
    except Exception as error:
        if getattr(error, "status", None) == 404:
            raise common.fail(404, f"Image {image_id} not found.") from None
        raise
    return image


def _allows(state: ImageState, req: falcon.Request, rule: str, image: dict[str, Any], member: str | None) -> bool:
    return state.policy.allows(req.context, rule, dict(common.target(image, req), member_id=member))


def _enforce(state: ImageState, req: falcon.Request, rule: str, image: dict[str, Any], member: str | None) -> None:
    if not _allows(state, req, rule, image, member):
        raise common.forbidden(rule)


def _only_shared(image: dict[str, Any], message: str) -> None:
    if image["visibility"] != "shared":
        raise common.fail(403, message)


def create(state: ImageState, req: falcon.Request, resp: falcon.Response, image_id: str) -> None:
    body = common.json_body(state, req)
    if not isinstance(body, dict):
        raise common.fail(400, 'Expected a member in the form: {"member": "image_id"}')
    if "member" not in body:
        raise common.fail(400, "Member to be added not specified")
    member = body["member"]
    if not member:
        raise common.fail(400, "Member can't be empty")
    if not isinstance(member, str) or len(member) > 255:
        raise common.fail(400, 'Expected a member in the form: {"member": "image_id"}')

    def write(conn: Connection) -> dict[str, Any]:
        image = _image(state, req, image_id, conn)
        _only_shared(image, f"Not allowed to create members for image {image_id}.")
        _enforce(state, req, "add_member", image, member)
        quota = state.conf.image_member_quota
        count = member_db.count(conn, image_id)
        if quota >= 0 and count >= quota:
            raise common.fail(413, f"Image member limit exceeded for image {image_id}: "
                                   f"{over_quota('image members for this image', count + 1, quota)}:")
        added = member_db.add(conn, image_id, member)
        if added is None:
            raise common.fail(409, f"Member {member} is duplicated for image {image_id}")
        return added

    send_json(resp, views.member(state.db.write(write)))


def index(state: ImageState, req: falcon.Request, resp: falcon.Response, image_id: str) -> None:
    with state.db.read() as conn:
        image = _image(state, req, image_id, conn)
        if image["visibility"] != "shared":
            raise common.fail(403, f"Not allowed to list members for image {image_id}: "
                                   "Only shared images have members.")
        if not _allows(state, req, "get_members", image, req.context.project_id):
            raise common.fail(403, f"Not allowed to list members for image {image_id}: "
                                   "You are not authorized to complete get_members action.")
        rows = [row for row in member_db.list_for(conn, image_id)
                if _allows(state, req, "get_member", image, row["member"])]
    send_json(resp, {"members": [views.member(row) for row in rows], "schema": "/v2/schemas/members"})


def _lookup(state: ImageState, req: falcon.Request, conn: Connection, image: dict[str, Any],
            member: str) -> dict[str, Any]:
    row = member_db.get(conn, image["id"], member)
    if row is None or not _allows(state, req, "get_member", image, member):
        if row is None:
            raise common.fail(404, f"{member} not found in the member list of the image {image['id']}.")
        raise common.fail(403, f"You are not authorized to lookup the members of the image {image['id']}.")
    return row


def show(state: ImageState, req: falcon.Request, resp: falcon.Response, image_id: str, member_id: str) -> None:
    with state.db.read() as conn:
        image = _image(state, req, image_id, conn)
        if image["visibility"] != "shared":
            raise common.fail(404, "Only shared images have members.")
        try:
            row = _lookup(state, req, conn, image, member_id)
        except Exception as error:
            if getattr(error, "status", None) == 403:
                raise common.fail(404, str(error)) from None
            raise
    send_json(resp, views.member(row))


def update(state: ImageState, req: falcon.Request, resp: falcon.Response, image_id: str, member_id: str) -> None:
    body = common.json_body(state, req)
    if not isinstance(body, dict):
        raise common.fail(400, 'Expected a status in the form: {"status": "status"}')
    if "status" not in body:
        raise common.fail(400, "Status not specified")
    status = body["status"]

    def write(conn: Connection) -> dict[str, Any]:
        image = _image(state, req, image_id, conn)
        _only_shared(image, f"Not allowed to update members for image {image_id}.")
        _lookup(state, req, conn, image, member_id)
        _enforce(state, req, "modify_member", image, member_id)
        if status not in MEMBER_STATUSES:
            raise common.fail(400, 'Incorrect request: Status must be "pending", "accepted" or "rejected".')
        return member_db.set_status(conn, image_id, member_id, status)  # type: ignore[return-value]

    send_json(resp, views.member(state.db.write(write)))


def delete(state: ImageState, req: falcon.Request, resp: falcon.Response, image_id: str, member_id: str) -> None:
    def write(conn: Connection) -> None:
        image = _image(state, req, image_id, conn)
        _only_shared(image, f"Not allowed to delete members for image {image_id}.")
        _lookup(state, req, conn, image, member_id)
        _enforce(state, req, "delete_member", image, member_id)
        member_db.remove(conn, image_id, member_id)

    state.db.write(write)
    send_empty(resp)


ROUTES = [
    Route("/v2/images/{image_id}/members", {"GET": index, "POST": create}),
    Route("/v2/images/{image_id}/members/{member_id}", {"GET": show, "PUT": update, "DELETE": delete}),
]
