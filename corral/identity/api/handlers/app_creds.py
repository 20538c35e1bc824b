"""Application credentials: ``/v3/users/{user_id}/application_credentials``."""

from __future__ import annotations

import base64
import datetime
import os
from typing import Any

import falcon
from sqlalchemy.engine import Connection

from corral.core.errors import BadRequest, Forbidden, NotFound
from corral.core.http import Route, send_empty, send_json
from corral.identity.api import util, views
from corral.identity.api.common import new_id, revoke, role_or_404, user_or_404, write
from corral.identity.api.state import IdentityState
from corral.identity.db import app_creds
from corral.identity.db import roles as role_db
from corral.identity.domain import revocation as kinds


def _not_found(credential_id: str) -> NotFound:
    return NotFound(f"Could not find Application Credential: {credential_id}.")


def _parse_expiry(text: str | None) -> datetime.datetime | None:
    if text is None:
        return None
    try:
        moment = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise BadRequest(f"Invalid input for field/attribute expires_at. Value: {text}. "
                         "It is not a valid date and time.") from None
    if moment.tzinfo is not None:
        moment = moment.astimezone(datetime.UTC).replace(tzinfo=None)
    return moment


def _requested_roles(conn: Connection, requested: list[dict[str, str]] | None,
                     token_roles: tuple[str, ...]) -> list[str]:
    """Role ids for the credential: by default every role of the creating token."""
    by_name = {row["name"]: row["id"] for row in role_db.list_roles(conn)}
    if not requested:
        return [by_name[name] for name in token_roles if name in by_name]
    ids = []
    for ref in requested:
        role_id = ref.get("id") or by_name.get(ref.get("name", ""))
        row = role_db.get_role(conn, role_id) if role_id else None
        if row is None or row["name"] not in token_roles:
            raise BadRequest("Invalid application credential: Cannot create an application credential with "
                             "unassigned role")
        ids.append(row["id"])
    return list(dict.fromkeys(ids))


def create(state: IdentityState, req: falcon.Request, resp: falcon.Response, user_id: str) -> None:
    util.authorize(state, req, "identity:create_application_credential", {"user_id": user_id})
    token = req.context.extras["token"]
    if token.app_cred_id is not None:
        credential_id = token.app_cred_id
        with state.db.read() as conn:
            source = app_creds.get(conn, credential_id)
        if source is None or not source["unrestricted"]:
            raise Forbidden("You are not authorized to perform the requested action: "
                            "Using method 'application_credential' is not allowed for managing additional "
                            "application credentials.")
    if token.scope not in ("project", "system"):
        raise BadRequest("Invalid application credential: An application credential needs a project- or "
                         "system-scoped token.")
    body = util.json_body(state, req)
    util.validate(state, "app_cred_create", body)
    request = body["application_credential"]
    secret = request.get("secret") or base64.urlsafe_b64encode(os.urandom(64)).decode().rstrip("=")
    values: dict[str, Any] = {
        "id": new_id(), "name": request["name"], "description": request.get("description"), "user_id": user_id,
        "project_id": token.project_id, "system": "all" if token.system else None,
        "expires_at": _parse_expiry(request.get("expires_at")), "unrestricted": bool(request.get("unrestricted")),
        "secret_hash": state.hasher.hash(secret),
    }

    def work(conn: Connection) -> list[str]:
        user_or_404(conn, user_id)
        role_ids = _requested_roles(conn, request.get("roles"), token.roles)
        app_creds.insert(conn, values, role_ids)
        return role_ids

    write(state, "application_credential", f"Duplicate entry found with name {values['name']}.", work)
    with state.db.read() as conn:
        row = app_creds.get(conn, values["id"])
        assert row is not None
        role_rows = [role_or_404(conn, role_id) for role_id in row["role_ids"]]
    send_json(resp, {"application_credential": views.app_cred(state, req, row, role_rows, secret)}, 201)


def list_(state: IdentityState, req: falcon.Request, resp: falcon.Response, user_id: str) -> None:
    util.authorize(state, req, "identity:list_application_credentials", {"user_id": user_id})
    with state.db.read() as conn:
        rows = app_creds.list_for_user(conn, user_id, name=req.get_param("name"))
        rendered = [views.app_cred(state, req, row, [role_or_404(conn, rid) for rid in row["role_ids"]])
                    for row in rows]
    send_json(resp, {"application_credentials": rendered, "links": util.collection_links(state, req)})


def show(state: IdentityState, req: falcon.Request, resp: falcon.Response, user_id: str, credential_id: str) -> None:
    util.authorize(state, req, "identity:get_application_credential", {"user_id": user_id})
    with state.db.read() as conn:
        row = app_creds.get(conn, credential_id)
        if row is None or row["user_id"] != user_id:
            raise _not_found(credential_id)
        role_rows = [role_or_404(conn, role_id) for role_id in row["role_ids"]]
    send_json(resp, {"application_credential": views.app_cred(state, req, row, role_rows)})


def delete(state: IdentityState, req: falcon.Request, resp: falcon.Response, user_id: str,
           credential_id: str) -> None:
    util.authorize(state, req, "identity:delete_application_credential", {"user_id": user_id})

    def work(conn: Connection) -> None:
        row = app_creds.get(conn, credential_id)
        if row is None or row["user_id"] != user_id:
            raise _not_found(credential_id)
        app_creds.delete(conn, credential_id)
        revoke(state, conn, [(kinds.APP_CRED, credential_id, None)])

    state.db.write(work)
    send_empty(resp)


ROUTES = [
    Route("/v3/users/{user_id}/application_credentials", {"GET": list_, "POST": create}),
    Route("/v3/users/{user_id}/application_credentials/{credential_id}", {"GET": show, "DELETE": delete}),
]
