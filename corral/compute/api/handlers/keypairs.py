"""/os-keypairs: import, generate, list, show, delete (upstream's ``keypairs.py``).

Statuses: create 200 at 2.1 and 201 from 2.2; delete 202 at 2.1 and 204
from 2.2.  ``type`` (ssh or x509) from 2.2, another user's key pairs for
admins (``user_id``) from 2.10, paging (``limit``, ``marker``,
``keypairs_links``) from 2.35.  A generated key's private key is in the
create answer only.  Key pairs count against the ``key_pairs`` quota of
the caller's project, per user.
"""

from __future__ import annotations

from typing import Any

import falcon
from sqlalchemy import exc
from sqlalchemy.engine import Connection

from corral.core import errors
from corral.core.db import is_duplicate
from corral.core.http import Route, send_empty, send_json
from corral.compute.api import links, policies, util, validation
from corral.compute.api.state import ComputeState
from corral.compute.db import keypairs as db
from corral.compute.domain import keypairs as domain
from corral.compute.domain import quota

KEY_TYPE = (2, 2)
OTHER_USERS = (2, 10)
PAGING = (2, 35)

# Upstream's keypair_name_special_chars: a 'name' and only these characters.
_NAME = {
    "allOf": [
        {"type": "string", "format": "name", "minLength": 1, "maxLength": 255},
        {"type": "string", "pattern": r"^[_\- a-zA-Z0-9]+$", "minLength": 1, "maxLength": 255},
    ]
}


def _create_schema(key_type: bool, user_id: bool) -> util.Schema:
    properties: dict[str, Any] = {"name": _NAME, "public_key": {"type": "string"}}
    if key_type:
        properties["type"] = {"type": "string", "enum": [domain.SSH, domain.X509]}
    if user_id:
        properties["user_id"] = {"type": "string"}
    return util.Schema({
        "type": "object",
        "properties": {
            "keypair": {
                "type": "object", "properties": properties, "required": ["name"], "additionalProperties": False,
            },
        },
        "required": ["keypair"],
        "additionalProperties": False,
    })


_CREATE = {(2, 1): _create_schema(False, False), KEY_TYPE: _create_schema(True, False),
           OTHER_USERS: _create_schema(True, True)}
_USER_QUERY = validation.QuerySchema({"user_id": validation.multi({"type": "string"})})
_PAGED_QUERY = validation.QuerySchema({"user_id": validation.multi({"type": "string"}), **validation.PAGINATION})


def _band(req: falcon.Request, bands: dict[tuple[int, int], Any]) -> Any:
    chosen = None
    for version, value in sorted(bands.items()):
        if req.context.at_least(*version):
            chosen = value
    return chosen


def _user_id(req: falcon.Request) -> str:
    """The user named by ``user_id`` (2.10 on, first value), else the caller."""
    context = req.context
    if context.at_least(*OTHER_USERS):
        values = _PAGED_QUERY.validate(req) if context.at_least(*PAGING) else _USER_QUERY.validate(req)
        requested = validation.first(values, "user_id")
        if requested:
            return requested
    assert context.user_id is not None
    return context.user_id


def not_found(name: str, user_id: str) -> errors.NotFound:
    return errors.NotFound(f"Keypair {name} not found for user {user_id}")


def _view(req: falcon.Request, keypair: dict[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
    view = {name: keypair[name] for name in names}
    if req.context.at_least(*KEY_TYPE):
        view["type"] = keypair["type"]
    return view


# ---------------------------------------------------------------- create


def create(state: ComputeState, req: falcon.Request, resp: falcon.Response) -> None:
    context = req.context
    body = util.json_body(state, req, _band(req, _CREATE))["keypair"]
    name = body["name"].strip()
    key_type = body.get("type", domain.SSH)
    user_id = (body.get("user_id") if context.at_least(*OTHER_USERS) else None) or context.user_id
    util.authorize(state, req, policies.KEYPAIRS_CREATE, {"user_id": user_id})
    assert context.project_id is not None
    limit = quota.project_limits(state.conf, state.api_db, context.project_id)["key_pairs"]
    with state.api_db.read() as conn:
        _check_quota(conn, user_id, limit)
    private_key = None
    if "public_key" in body:
        public_key = body["public_key"]
        fingerprint = domain.fingerprint(public_key, key_type)
    else:
        generated = domain.generate(key_type, user_id)
        public_key, fingerprint, private_key = generated.public_key, generated.fingerprint, generated.private_key

    def work(conn: Connection) -> dict[str, Any]:
        if db.get_keypair(conn, user_id, name) is not None:
            raise errors.Conflict(f"Key pair '{name}' already exists.")
        created = db.create_keypair(conn, user_id=user_id, name=name, fingerprint=fingerprint,
                                    public_key=public_key, key_type=key_type)
        # Checked again with the new one counted: concurrent creates cannot both take the last one.
        _check_quota(conn, user_id, limit, adding=0)
        return created

    try:
        keypair = state.api_db.write(work)
    except exc.IntegrityError as error:
        if is_duplicate(error):
            raise errors.Conflict(f"Key pair '{name}' already exists.") from None
        raise
    view: dict[str, Any] = {}
    if private_key is not None:
        view["private_key"] = private_key
    view.update(_view(req, keypair, ("name", "public_key", "fingerprint", "user_id")))
    send_json(resp, {"keypair": view}, 201 if context.at_least(*KEY_TYPE) else 200)


def _check_quota(conn: Connection, user_id: str, limit: int, adding: int = 1) -> None:
    if limit >= 0 and db.count_keypairs(conn, user_id) + adding > limit:
        raise quota.OverQuota("Quota exceeded, too many key pairs.")


# ------------------------------------------------------------ list, show


def index(state: ComputeState, req: falcon.Request, resp: falcon.Response) -> None:
    context = req.context
    user_id = _user_id(req)
    util.authorize(state, req, policies.KEYPAIRS_INDEX, {"user_id": user_id})
    paged = context.at_least(*PAGING)
    limit = marker = None
    if paged:
        values = _PAGED_QUERY.validate(req)
        max_limit = state.conf.api.max_limit
        requested = validation.last(values, "limit")
        limit = max_limit if requested is None else min(max_limit, validation.count(requested))
        marker = validation.last(values, "marker")
    with state.api_db.read() as conn:
        if marker is not None and db.get_keypair(conn, user_id, marker) is None:
            raise errors.BadRequest(f"Marker {marker} could not be found.")
        keypairs = db.list_keypairs(conn, user_id, limit=limit, after_name=marker)
    body: dict[str, Any] = {
        "keypairs": [{"keypair": _view(req, k, ("name", "public_key", "fingerprint"))} for k in keypairs]
    }
    if paged and keypairs and limit and len(keypairs) == limit:
        body["keypairs_links"] = links.next_link(state, req, "os-keypairs", keypairs[-1]["name"])
    send_json(resp, body)


def show(state: ComputeState, req: falcon.Request, resp: falcon.Response, keypair_name: str) -> None:
    user_id = _user_id(req)
    util.authorize(state, req, policies.KEYPAIRS_SHOW, {"user_id": user_id})
    with state.api_db.read() as conn:
        keypair = db.get_keypair(conn, user_id, keypair_name)
    if keypair is None:
        raise not_found(keypair_name, user_id)
    view = _view(req, keypair, ("name", "public_key", "fingerprint", "user_id"))
    view.update({
        "created_at": util.iso_micro(keypair["created_at"]),
        "deleted": False,
        "deleted_at": None,
        "id": keypair["id"],
        "updated_at": util.iso_micro(keypair["updated_at"]),
    })
    send_json(resp, {"keypair": view})


def delete(state: ComputeState, req: falcon.Request, resp: falcon.Response, keypair_name: str) -> None:
    user_id = _user_id(req)
    util.authorize(state, req, policies.KEYPAIRS_DELETE, {"user_id": user_id})
    if not state.api_db.write(db.delete_keypair, user_id, keypair_name):
        raise not_found(keypair_name, user_id)
    send_empty(resp, 204 if req.context.at_least(*KEY_TYPE) else 202)


ROUTES = [
    Route("/os-keypairs", {"GET": index, "POST": create}),
    Route("/os-keypairs/{keypair_name}", {"GET": show, "DELETE": delete}),
]
