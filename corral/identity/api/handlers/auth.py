"""``/v3/auth/...``: issuing, validating and revoking tokens; what a token may scope to."""

from __future__ import annotations

from typing import Any

import falcon

from corral.core.errors import Forbidden, NotFound
from corral.core.http import Route, send_empty, send_json
from corral.identity.api import util, views
from corral.identity.api.state import IdentityState
from corral.identity.db import app_creds, resources
from corral.identity.db import revocations
from corral.identity.db import roles as role_db
from corral.identity.domain import auth_request, catalog
from corral.identity.domain import revocation as kinds
from corral.identity.domain.tokens import InvalidToken, TokenPayload, encode
from corral.identity.issuing import TokenIssuer


def render_token(state: IdentityState, req: falcon.Request, payload: TokenPayload, *,
                 with_catalog: bool) -> dict[str, Any]:
    """A token body in Keystone's shape and key order."""
    with state.db.read() as conn:
        user = resources.get_user(conn, payload.user_id) or {"name": None, "domain_id": payload.user_domain_id}
        domain_names = {row["id"]: row["name"] for row in resources.list_domains(conn)}
        role_ids = {row["name"]: row["id"] for row in role_db.list_roles(conn)}
        project = resources.get_project(conn, payload.scope_id) if payload.scope == "project" else None
        credential = app_creds.get(conn, payload.app_cred_id) if payload.app_cred_id else None
    body: dict[str, Any] = {
        "methods": list(payload.methods),
        "user": {
            "domain": {"id": payload.user_domain_id, "name": domain_names.get(payload.user_domain_id)},
            "id": payload.user_id, "name": user["name"], "password_expires_at": None,
        },
        "audit_ids": list(payload.audit_ids),
        "expires_at": util.timestamp(payload.expires_at),
        "issued_at": util.timestamp(payload.issued_at / 1_000_000),
    }
    if payload.scope == "project":
        domain_id = payload.project_domain_id
        body["project"] = {"domain": {"id": domain_id, "name": domain_names.get(domain_id or "")},
                           "id": payload.scope_id, "name": project["name"] if project else None}
        body["is_domain"] = False
    elif payload.scope == "domain":
        body["domain"] = {"id": payload.scope_id, "name": domain_names.get(payload.scope_id or "")}
    if payload.scope is not None:
        body["roles"] = [{"id": role_ids.get(name), "name": name} for name in payload.roles]
    if payload.scope == "system":
        body["system"] = {"all": True}
    if payload.scope is not None and with_catalog:
        body["catalog"] = service_catalog(state, req)
    if payload.app_cred_id is not None:
        body["application_credential"] = {
            "id": payload.app_cred_id, "name": credential["name"] if credential else None,
            "restricted": not (credential and credential["unrestricted"]),
        }
    return {"token": body}


def service_catalog(state: IdentityState, req: falcon.Request) -> list[dict[str, Any]]:
    return catalog.render(catalog.endpoints(state.conf.catalog, util.server_url(state, req),
                                            util.identity_url(state, req)))


def _issuer(state: IdentityState) -> TokenIssuer:
    issuer = state.cache.get("issuer")
    if issuer is None:
        issuer = state.cache["issuer"] = TokenIssuer(state.conf, state.db, state.hasher, state.validator)
    return issuer


def issue(state: IdentityState, req: falcon.Request, resp: falcon.Response) -> None:
    body = util.json_body(state, req, required="auth")
    request = auth_request.parse(body, state.schemas["token_issue"], state.conf.identity.default_domain_id)
    payload = _issuer(state).issue(request)
    token = encode(state.keys.fernet(), payload)
    resp.set_header("X-Subject-Token", token)
    send_json(resp, render_token(state, req, payload, with_catalog=not util.flag_present(req, "nocatalog")), 201)


def _subject(state: IdentityState, req: falcon.Request, *, allow_expired: bool = False) -> tuple[str, TokenPayload]:
    token = req.get_header("X-Subject-Token")
    if not token:
        raise NotFound("No token in the request")
    try:
        payload = state.validator.payload(token)
    except InvalidToken:
        raise NotFound("Could not recognize Fernet token") from None
    window = state.conf.token.allow_expired_window if allow_expired else 0
    try:
        state.validator.validate(token, expired_window=window, fresh=True)
    except InvalidToken:
        raise NotFound("Failed to validate token") from None
    return token, payload


def _token_target(payload: TokenPayload) -> dict[str, Any]:
    return {"target.token.user_id": payload.user_id}


def validate(state: IdentityState, req: falcon.Request, resp: falcon.Response) -> None:
    token, payload = _subject(state, req, allow_expired=util.flag_present(req, "allow_expired"))
    util.authorize(state, req, "identity:validate_token", _token_target(payload))
    resp.set_header("X-Subject-Token", token)
    send_json(resp, render_token(state, req, payload, with_catalog=not util.flag_present(req, "nocatalog")))


def check(state: IdentityState, req: falcon.Request, resp: falcon.Response) -> None:
    token, payload = _subject(state, req, allow_expired=util.flag_present(req, "allow_expired"))
    util.authorize(state, req, "identity:check_token", _token_target(payload))
    resp.set_header("X-Subject-Token", token)
    resp.status = 200
    resp.content_type = falcon.MEDIA_JSON


def revoke(state: IdentityState, req: falcon.Request, resp: falcon.Response) -> None:
    _token, payload = _subject(state, req)
    util.authorize(state, req, "identity:revoke_token", _token_target(payload))
    state.db.write(revocations.record, [(kinds.AUDIT, payload.audit_ids[0], None)], state.token_lifetime)
    state.validator.revocations.expire()
    send_empty(resp)


def _caller(req: falcon.Request) -> TokenPayload:
    return req.context.extras["token"]


def auth_catalog(state: IdentityState, req: falcon.Request, resp: falcon.Response) -> None:
    util.authorize(state, req, "identity:get_auth_catalog")
    if _caller(req).scope is None:
        raise Forbidden("A project-scoped token is required to produce a service catalog.")
    send_json(resp, {"catalog": service_catalog(state, req), "links": {"self": f"{util.v3(state, req)}/auth/catalog"}})


def auth_projects(state: IdentityState, req: falcon.Request, resp: falcon.Response) -> None:
    util.authorize(state, req, "identity:get_auth_projects")
    user_id = _caller(req).user_id
    with state.db.read() as conn:
        ids = role_db.targets_of_user(conn, user_id, role_db.PROJECT)
        rows = resources.list_projects(conn, ids=ids, enabled=True)
    send_json(resp, {"projects": [views.project(state, req, row) for row in rows],
                     "links": util.collection_links(state, req)})


def auth_domains(state: IdentityState, req: falcon.Request, resp: falcon.Response) -> None:
    util.authorize(state, req, "identity:get_auth_domains")
    user_id = _caller(req).user_id
    with state.db.read() as conn:
        ids = set(role_db.targets_of_user(conn, user_id, role_db.DOMAIN))
        rows = [row for row in resources.list_domains(conn, enabled=True) if row["id"] in ids]
    send_json(resp, {"domains": [views.domain(state, req, row) for row in rows],
                     "links": util.collection_links(state, req)})


def auth_system(state: IdentityState, req: falcon.Request, resp: falcon.Response) -> None:
    util.authorize(state, req, "identity:get_auth_system")
    user_id = _caller(req).user_id
    with state.db.read() as conn:
        has_system = bool(role_db.targets_of_user(conn, user_id, role_db.SYSTEM))
    send_json(resp, {"system": [{"all": True}] if has_system else [],
                     "links": {"self": f"{util.v3(state, req)}/auth/system"}})



ROUTES = [
    Route("/v3/auth/tokens", {"POST": issue, "GET": validate, "HEAD": check, "DELETE": revoke}),
    Route("/v3/auth/catalog", {"GET": auth_catalog}),
    Route("/v3/auth/projects", {"GET": auth_projects}),
    Route("/v3/auth/domains", {"GET": auth_domains}),
    Route("/v3/auth/system", {"GET": auth_system}),
]
