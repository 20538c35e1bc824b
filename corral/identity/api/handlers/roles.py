"""Roles, role implications and role assignments."""

from __future__ import annotations

from typing import Any

import falcon
from sqlalchemy.engine import Connection

from corral.core.errors import BadRequest, Forbidden
from corral.core.http import Route, send_empty, send_json
from corral.identity.api import util, views
from corral.identity.api.common import (
    assignment_not_found,
    domain_or_404,
    new_id,
    project_or_404,
    revoke,
    role_or_404,
    user_or_404,
    write,
)
from corral.identity.api.errors import not_found
from corral.identity.api.state import IdentityState
from corral.identity.db import roles as role_db
from corral.identity.domain import revocation as kinds
from corral.identity.domain import roles as role_logic


def _mutable(row: dict[str, Any]) -> None:
    if row["options"].get("immutable"):
        raise Forbidden(f"Unable to modify the immutable role {row['name']}.")


# ----------------------------------------------------------------- roles


def list_roles(state: IdentityState, req: falcon.Request, resp: falcon.Response) -> None:
    util.authorize(state, req, "identity:list_roles")
    with state.db.read() as conn:
        rows = role_db.list_roles(conn, name=req.get_param("name"))
    send_json(resp, {"roles": [views.role(state, req, row) for row in rows], "links": util.collection_links(state, req)})


def create_role(state: IdentityState, req: falcon.Request, resp: falcon.Response) -> None:
    util.authorize(state, req, "identity:create_role")
    body = util.json_body(state, req)
    util.validate(state, "role_create", body)
    role = body["role"]
    values = {"id": new_id(), "name": role["name"], "description": role.get("description"),
              "options": role.get("options") or {}}
    write(state, "role", f"Duplicate entry found with name {values['name']}.", role_db.insert_role, values)
    with state.db.read() as conn:
        row = role_or_404(conn, values["id"])
    send_json(resp, {"role": views.role(state, req, row)}, 201)


def show_role(state: IdentityState, req: falcon.Request, resp: falcon.Response, role_id: str) -> None:
    util.authorize(state, req, "identity:get_role")
    with state.db.read() as conn:
        row = role_or_404(conn, role_id)
    send_json(resp, {"role": views.role(state, req, row)})


def update_role(state: IdentityState, req: falcon.Request, resp: falcon.Response, role_id: str) -> None:
    util.authorize(state, req, "identity:update_role")
    body = util.json_body(state, req)
    util.validate(state, "role_update", body)
    values = dict(body["role"])

    def work(conn: Connection) -> None:
        row = role_or_404(conn, role_id)
        _mutable(row)
        role_db.update_role(conn, role_id, values)
        if "name" in values and values["name"] != row["name"]:
            # Tokens carry role names: the old name no longer means anything.
            revoke(state, conn, [(kinds.ROLE, row["name"], None)])

    write(state, "role", f"Duplicate entry found with name {values.get('name')}.", work)
    with state.db.read() as conn:
        row = role_or_404(conn, role_id)
    send_json(resp, {"role": views.role(state, req, row)})


def delete_role(state: IdentityState, req: falcon.Request, resp: falcon.Response, role_id: str) -> None:
    util.authorize(state, req, "identity:delete_role")

    def work(conn: Connection) -> None:
        row = role_or_404(conn, role_id)
        _mutable(row)
        role_db.delete_role(conn, role_id)
        revoke(state, conn, [(kinds.ROLE, row["name"], None)])

    state.db.write(work)
    send_empty(resp)


# ---------------------------------------------------------- implications


def _inference(state: IdentityState, req: falcon.Request, prior: dict[str, Any], implied: Any) -> dict[str, Any]:
    return {"prior_role": views.role_ref(state, req, prior), "implies": implied}


def _pair(conn: Connection, prior_id: str, implied_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
    return role_or_404(conn, prior_id), role_or_404(conn, implied_id)


def create_implication(state: IdentityState, req: falcon.Request, resp: falcon.Response, role_id: str,
                       implied_id: str) -> None:
    prior_id = role_id
    util.authorize(state, req, "identity:create_implied_role")

    def work(conn: Connection) -> tuple[dict[str, Any], dict[str, Any]]:
        prior, implied = _pair(conn, prior_id, implied_id)
        current = role_db.implications(conn)
        if implied_id not in current.get(prior_id, []):
            if role_logic.creates_cycle(prior_id, implied_id, current):
                raise BadRequest(f"Role {prior['name']} implying {implied['name']} would make a cycle.")
            role_db.add_implication(conn, prior_id, implied_id)
        return prior, implied

    prior, implied = state.db.write(work)
    link = {"self": f"{util.v3(state, req)}/roles/{prior_id}/implies/{implied_id}"}
    send_json(resp, {"role_inference": _inference(state, req, prior, views.role_ref(state, req, implied)),
                     "links": link}, 201)


def show_implication(state: IdentityState, req: falcon.Request, resp: falcon.Response, role_id: str,
                     implied_id: str) -> None:
    prior_id = role_id
    util.authorize(state, req, "identity:get_implied_role")
    with state.db.read() as conn:
        prior, implied = _pair(conn, prior_id, implied_id)
        if implied_id not in role_db.implications(conn).get(prior_id, []):
            raise not_found("implied role", f"{prior_id} implies {implied_id}")
    link = {"self": f"{util.v3(state, req)}/roles/{prior_id}/implies/{implied_id}"}
    send_json(resp, {"role_inference": _inference(state, req, prior, views.role_ref(state, req, implied)),
                     "links": link})


def check_implication(state: IdentityState, req: falcon.Request, resp: falcon.Response, role_id: str,
                      implied_id: str) -> None:
    prior_id = role_id
    util.authorize(state, req, "identity:check_implied_role")
    with state.db.read() as conn:
        _pair(conn, prior_id, implied_id)
        if implied_id not in role_db.implications(conn).get(prior_id, []):
            raise not_found("implied role", f"{prior_id} implies {implied_id}")
    send_empty(resp)


def delete_implication(state: IdentityState, req: falcon.Request, resp: falcon.Response, role_id: str,
                       implied_id: str) -> None:
    prior_id = role_id
    util.authorize(state, req, "identity:delete_implied_role")

    def work(conn: Connection) -> None:
        prior, _implied = _pair(conn, prior_id, implied_id)
        if not role_db.delete_implication(conn, prior_id, implied_id):
            raise not_found("implied role", f"{prior_id} implies {implied_id}")
        # Tokens carrying the prior role also carry what it implied.
        revoke(state, conn, [(kinds.ROLE, prior["name"], None)])

    state.db.write(work)
    send_empty(resp)


def list_implications(state: IdentityState, req: falcon.Request, resp: falcon.Response, role_id: str) -> None:
    prior_id = role_id
    util.authorize(state, req, "identity:list_implied_roles")
    with state.db.read() as conn:
        prior = role_or_404(conn, prior_id)
        implied = [role_or_404(conn, role_id) for role_id in role_db.implications(conn).get(prior_id, [])]
    send_json(resp, {
        "role_inference": _inference(state, req, prior, [views.role_ref(state, req, row) for row in implied]),
        "links": {"self": f"{util.v3(state, req)}/roles/{prior_id}/implies"},
    })


def role_inferences(state: IdentityState, req: falcon.Request, resp: falcon.Response) -> None:
    util.authorize(state, req, "identity:list_role_inference_rules")
    with state.db.read() as conn:
        rows = {row["id"]: row for row in role_db.list_roles(conn)}
        implications = role_db.implications(conn)
    ordered = sorted(implications, key=lambda role_id: rows[role_id]["name"])
    send_json(resp, {"role_inferences": [
        _inference(state, req, rows[prior], [views.role_ref(state, req, rows[implied])
                                             for implied in implications[prior]])
        for prior in ordered
    ]})


# ----------------------------------------------------------- assignments


def _grant_target(conn: Connection, target_type: str, target_id: str) -> None:
    if target_type == role_db.PROJECT:
        project_or_404(conn, target_id)
    elif target_type == role_db.DOMAIN:
        domain_or_404(conn, target_id)


def _grant_rule(target_type: str, action: str) -> str:
    if target_type == role_db.SYSTEM:
        return {"create": "identity:create_system_grant_for_user", "revoke": "identity:revoke_system_grant_for_user",
                "check": "identity:check_system_grant_for_user", "list": "identity:list_system_grants_for_user"}[action]
    return {"create": "identity:create_grant", "revoke": "identity:revoke_grant", "check": "identity:check_grant",
            "list": "identity:list_grants"}[action]


def _grant(target_type: str):  # noqa: ANN202 - handler factories
    def put(state: IdentityState, req: falcon.Request, resp: falcon.Response, user_id: str, role_id: str,
            target_id: str = role_db.SYSTEM_ID) -> None:
        util.authorize(state, req, _grant_rule(target_type, "create"))

        def work(conn: Connection) -> None:
            _grant_target(conn, target_type, target_id)
            user_or_404(conn, user_id)
            role_or_404(conn, role_id)
            role_db.add_assignment(conn, target_type, target_id, user_id, role_id)

        state.db.write(work)
        send_empty(resp)

    def check(state: IdentityState, req: falcon.Request, resp: falcon.Response, user_id: str, role_id: str,
              target_id: str = role_db.SYSTEM_ID) -> None:
        util.authorize(state, req, _grant_rule(target_type, "check"))
        with state.db.read() as conn:
            _grant_target(conn, target_type, target_id)
            user_or_404(conn, user_id)
            role_or_404(conn, role_id)
            if not role_db.has_assignment(conn, target_type, target_id, user_id, role_id):
                raise assignment_not_found(role_id, user_id, target_id)
        send_empty(resp)

    def delete(state: IdentityState, req: falcon.Request, resp: falcon.Response, user_id: str, role_id: str,
               target_id: str = role_db.SYSTEM_ID) -> None:
        util.authorize(state, req, _grant_rule(target_type, "revoke"))

        def work(conn: Connection) -> None:
            if not role_db.delete_assignment(conn, target_type, target_id, user_id, role_id):
                raise assignment_not_found(role_id, user_id, target_id)
            revoke(state, conn, [(kinds.GRANT, user_id, target_id)])

        state.db.write(work)
        send_empty(resp)

    def list_(state: IdentityState, req: falcon.Request, resp: falcon.Response, user_id: str,
              target_id: str = role_db.SYSTEM_ID) -> None:
        util.authorize(state, req, _grant_rule(target_type, "list"))
        with state.db.read() as conn:
            _grant_target(conn, target_type, target_id)
            user_or_404(conn, user_id)
            rows = [role_or_404(conn, role_id)
                    for role_id in role_db.direct_roles(conn, user_id, target_type, target_id)]
        send_json(resp, {"roles": [views.role(state, req, row) for row in rows],
                         "links": util.collection_links(state, req)})

    return put, check, delete, list_


def _with_target(handler: Any, name: str) -> Any:
    def wrapped(state: IdentityState, req: falcon.Request, resp: falcon.Response, **params: str) -> None:
        handler(state, req, resp, target_id=params.pop(name), **params)

    return wrapped


_project_grant = _grant(role_db.PROJECT)
_domain_grant = _grant(role_db.DOMAIN)
_system_grant = _grant(role_db.SYSTEM)


def _grant_methods(handlers: tuple[Any, ...], name: str | None) -> dict[str, Any]:
    put, check, delete, _list = handlers
    if name is not None:
        put, check, delete = (_with_target(item, name) for item in (put, check, delete))
    return {"PUT": put, "HEAD": check, "GET": check, "DELETE": delete}


def _list_method(handlers: tuple[Any, ...], name: str | None) -> dict[str, Any]:
    return {"GET": _with_target(handlers[3], name) if name else handlers[3]}


ROUTES = [
    Route("/v3/roles", {"GET": list_roles, "POST": create_role}),
    Route("/v3/roles/{role_id}", {"GET": show_role, "PATCH": update_role, "DELETE": delete_role}),
    Route("/v3/roles/{role_id}/implies", {"GET": list_implications}),
    Route("/v3/roles/{role_id}/implies/{implied_id}", {
        "PUT": create_implication, "GET": show_implication, "HEAD": check_implication, "DELETE": delete_implication,
    }),
    Route("/v3/role_inferences", {"GET": role_inferences}),
    Route("/v3/projects/{project_id}/users/{user_id}/roles", _list_method(_project_grant, "project_id")),
    Route("/v3/projects/{project_id}/users/{user_id}/roles/{role_id}", _grant_methods(_project_grant, "project_id")),
    Route("/v3/domains/{domain_id}/users/{user_id}/roles", _list_method(_domain_grant, "domain_id")),
    Route("/v3/domains/{domain_id}/users/{user_id}/roles/{role_id}", _grant_methods(_domain_grant, "domain_id")),
    Route("/v3/system/users/{user_id}/roles", _list_method(_system_grant, None)),
    Route("/v3/system/users/{user_id}/roles/{role_id}", _grant_methods(_system_grant, None)),
]
