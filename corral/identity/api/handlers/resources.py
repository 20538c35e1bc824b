"""Domains, projects and users."""

from __future__ import annotations

from typing import Any

import falcon
from sqlalchemy.engine import Connection

from corral.core.errors import Forbidden
from corral.core.http import Route, send_empty, send_json
from corral.identity.api import util, views
from corral.identity.api.common import domain_or_404, new_id, project_or_404, revoke, user_or_404, write
from corral.identity.api.errors import not_found, unauthorized
from corral.identity.api.state import IdentityState
from corral.identity.db import app_creds, resources
from corral.identity.db import roles as role_db
from corral.identity.domain import revocation as kinds

_USER_COLUMNS = ("name", "domain_id", "enabled", "default_project_id")
_PROJECT_COLUMNS = ("name", "domain_id", "description", "enabled", "tags")
_DOMAIN_COLUMNS = ("name", "description", "enabled")


def _split(body: dict[str, Any], columns: tuple[str, ...], ignored: tuple[str, ...] = ()) -> tuple[dict, dict]:
    """(known columns, everything else) of a request body, as Keystone keeps unknown attributes."""
    values = {key: body[key] for key in columns if key in body}
    extra = {key: value for key, value in body.items() if key not in columns and key not in ignored}
    return values, extra


# --------------------------------------------------------------- domains


def list_domains(state: IdentityState, req: falcon.Request, resp: falcon.Response) -> None:
    util.authorize(state, req, "identity:list_domains")
    with state.db.read() as conn:
        rows = resources.list_domains(conn, name=req.get_param("name"), enabled=util.query_bool(req, "enabled"))
    send_json(resp, {"domains": [views.domain(state, req, row) for row in rows],
                     "links": util.collection_links(state, req)})


def create_domain(state: IdentityState, req: falcon.Request, resp: falcon.Response) -> None:
    util.authorize(state, req, "identity:create_domain")
    body = util.json_body(state, req)
    util.validate(state, "domain_create", body)
    values, extra = _split(body["domain"], _DOMAIN_COLUMNS, ("id", "tags", "options"))
    values = {"id": new_id(), "enabled": True, "description": None, **values, "extra": extra}
    write(state, "domain", f"Duplicate entry found with name {values['name']}.",
           resources.insert_domain, values)
    with state.db.read() as conn:
        row = domain_or_404(conn, values["id"])
    send_json(resp, {"domain": views.domain(state, req, row)}, 201)


def show_domain(state: IdentityState, req: falcon.Request, resp: falcon.Response, domain_id: str) -> None:
    util.authorize(state, req, "identity:get_domain", {"target.domain.id": domain_id})
    with state.db.read() as conn:
        row = domain_or_404(conn, domain_id)
    send_json(resp, {"domain": views.domain(state, req, row)})


def update_domain(state: IdentityState, req: falcon.Request, resp: falcon.Response, domain_id: str) -> None:
    util.authorize(state, req, "identity:update_domain", {"target.domain.id": domain_id})
    body = util.json_body(state, req)
    util.validate(state, "domain_update", body)
    values, extra = _split(body["domain"], _DOMAIN_COLUMNS, ("id", "tags", "options"))

    def work(conn: Connection) -> None:
        row = domain_or_404(conn, domain_id)
        resources.update_domain(conn, domain_id, {**values, "extra": {**row["extra"], **extra}})
        if row["enabled"] and values.get("enabled") is False:
            revoke(state, conn, [(kinds.DOMAIN, domain_id, None)])

    write(state, "domain", f"Duplicate entry found with name {values.get('name')}.", work)
    with state.db.read() as conn:
        row = domain_or_404(conn, domain_id)
    send_json(resp, {"domain": views.domain(state, req, row)})


def delete_domain(state: IdentityState, req: falcon.Request, resp: falcon.Response, domain_id: str) -> None:
    util.authorize(state, req, "identity:delete_domain", {"target.domain.id": domain_id})

    def work(conn: Connection) -> None:
        row = domain_or_404(conn, domain_id)
        if row["enabled"]:
            raise Forbidden("Cannot delete a domain that is enabled, please disable it first.")
        if resources.domain_has_projects_or_users(conn, domain_id):
            raise Forbidden("Cannot delete a domain that still has projects or users.")
        role_db.delete_target_assignments(conn, role_db.DOMAIN, domain_id)
        resources.delete_domain(conn, domain_id)
        revoke(state, conn, [(kinds.DOMAIN, domain_id, None)])

    state.db.write(work)
    send_empty(resp)


# -------------------------------------------------------------- projects


def list_projects(state: IdentityState, req: falcon.Request, resp: falcon.Response) -> None:
    domain_id = req.get_param("domain_id")
    util.authorize(state, req, "identity:list_projects", {"target.domain_id": domain_id})
    with state.db.read() as conn:
        rows = resources.list_projects(conn, domain_id=domain_id, name=req.get_param("name"),
                                       enabled=util.query_bool(req, "enabled"))
    send_json(resp, {"projects": [views.project(state, req, row) for row in rows],
                     "links": util.collection_links(state, req)})


def create_project(state: IdentityState, req: falcon.Request, resp: falcon.Response) -> None:
    body = util.json_body(state, req)
    util.validate(state, "project_create", body)
    project = body["project"]
    domain_id = project.get("domain_id") or req.context.domain_id or state.conf.identity.default_domain_id
    util.authorize(state, req, "identity:create_project", {"target.project.domain_id": domain_id})
    values, extra = _split(project, _PROJECT_COLUMNS, ("id", "parent_id", "is_domain", "options"))
    project_id = new_id()
    values = {"enabled": True, "description": "", "tags": [], **values, "id": project_id, "domain_id": domain_id,
              "extra": extra}

    def work(conn: Connection) -> None:
        domain_or_404(conn, domain_id)
        resources.insert_project(conn, values)

    write(state, "project", "it is not permitted to have two projects with either the same name or same id "
           f"in the same domain: name is {values['name']}, project id {project_id}.", work)
    with state.db.read() as conn:
        row = project_or_404(conn, project_id)
    send_json(resp, {"project": views.project(state, req, row)}, 201)


def show_project(state: IdentityState, req: falcon.Request, resp: falcon.Response, project_id: str) -> None:
    with state.db.read() as conn:
        row = resources.get_project(conn, project_id)
    target = {"target.project.id": project_id, "target.project.domain_id": row["domain_id"] if row else None}
    util.authorize(state, req, "identity:get_project", target)
    if row is None:
        raise not_found("project", project_id)
    send_json(resp, {"project": views.project(state, req, row)})


def update_project(state: IdentityState, req: falcon.Request, resp: falcon.Response, project_id: str) -> None:
    util.authorize(state, req, "identity:update_project", {"target.project.id": project_id})
    body = util.json_body(state, req)
    util.validate(state, "project_update", body)
    values, extra = _split(body["project"], _PROJECT_COLUMNS, ("id", "parent_id", "is_domain", "options"))
    values.pop("domain_id", None)

    def work(conn: Connection) -> None:
        row = project_or_404(conn, project_id)
        resources.update_project(conn, project_id, {**values, "extra": {**row["extra"], **extra}})
        if row["enabled"] and values.get("enabled") is False:
            revoke(state, conn, [(kinds.PROJECT, project_id, None)])

    write(state, "project", "it is not permitted to have two projects with either the same name or same id "
           f"in the same domain: name is {values.get('name')}, project id {project_id}.", work)
    with state.db.read() as conn:
        row = project_or_404(conn, project_id)
    send_json(resp, {"project": views.project(state, req, row)})


def delete_project(state: IdentityState, req: falcon.Request, resp: falcon.Response, project_id: str) -> None:
    util.authorize(state, req, "identity:delete_project", {"target.project.id": project_id})

    def work(conn: Connection) -> None:
        project_or_404(conn, project_id)
        role_db.delete_target_assignments(conn, role_db.PROJECT, project_id)
        resources.delete_project(conn, project_id)
        revoke(state, conn, [(kinds.PROJECT, project_id, None)])

    state.db.write(work)
    send_empty(resp)


# ----------------------------------------------------------------- users


def list_users(state: IdentityState, req: falcon.Request, resp: falcon.Response) -> None:
    domain_id = req.get_param("domain_id")
    util.authorize(state, req, "identity:list_users", {"target.domain_id": domain_id})
    with state.db.read() as conn:
        rows = resources.list_users(conn, domain_id=domain_id, name=req.get_param("name"),
                                    enabled=util.query_bool(req, "enabled"))
    send_json(resp, {"users": [views.user(state, req, row) for row in rows], "links": util.collection_links(state, req)})


def create_user(state: IdentityState, req: falcon.Request, resp: falcon.Response) -> None:
    body = util.json_body(state, req)
    util.validate(state, "user_create", body)
    user = body["user"]
    domain_id = user.get("domain_id") or req.context.domain_id or state.conf.identity.default_domain_id
    util.authorize(state, req, "identity:create_user", {"target.user.domain_id": domain_id})
    values, extra = _split(user, _USER_COLUMNS, ("id", "password", "options", "federated"))
    password = user.get("password")
    values = {"enabled": True, **values, "id": new_id(), "domain_id": domain_id, "extra": extra,
              "password_hash": state.hasher.hash(password) if password else None,
              "password_created_at": resources.now() if password else None}

    def work(conn: Connection) -> None:
        domain_or_404(conn, domain_id)
        resources.insert_user(conn, values)

    write(state, "user", f"Duplicate entry found with name {values['name']} at domain ID {domain_id}.", work)
    with state.db.read() as conn:
        row = user_or_404(conn, values["id"])
    send_json(resp, {"user": views.user(state, req, row)}, 201)


def show_user(state: IdentityState, req: falcon.Request, resp: falcon.Response, user_id: str) -> None:
    with state.db.read() as conn:
        row = resources.get_user(conn, user_id)
    util.authorize(state, req, "identity:get_user",
                   {"target.user.id": user_id, "target.user.domain_id": row["domain_id"] if row else None})
    if row is None:
        raise not_found("user", user_id)
    send_json(resp, {"user": views.user(state, req, row)})


def update_user(state: IdentityState, req: falcon.Request, resp: falcon.Response, user_id: str) -> None:
    util.authorize(state, req, "identity:update_user", {"target.user.id": user_id})
    body = util.json_body(state, req)
    util.validate(state, "user_update", body)
    user = body["user"]
    values, extra = _split(user, _USER_COLUMNS, ("id", "password", "options", "federated"))
    values.pop("domain_id", None)
    if user.get("password"):
        values.update(password_hash=state.hasher.hash(user["password"]), password_created_at=resources.now())

    def work(conn: Connection) -> None:
        row = user_or_404(conn, user_id)
        resources.update_user(conn, user_id, {**values, "extra": {**row["extra"], **extra}})
        if (row["enabled"] and values.get("enabled") is False) or "password_hash" in values:
            revoke(state, conn, [(kinds.USER, user_id, None)])

    write(state, "user", f"Duplicate entry found with name {values.get('name')}.", work)
    with state.db.read() as conn:
        row = user_or_404(conn, user_id)
    send_json(resp, {"user": views.user(state, req, row)})


def delete_user(state: IdentityState, req: falcon.Request, resp: falcon.Response, user_id: str) -> None:
    util.authorize(state, req, "identity:delete_user", {"target.user.id": user_id})

    def work(conn: Connection) -> None:
        user_or_404(conn, user_id)
        for credential_id in app_creds.ids_for_user(conn, user_id):
            app_creds.delete(conn, credential_id)
        for row in role_db.list_assignments(conn, user_id=user_id):
            role_db.delete_assignment(conn, row["target_type"], row["target_id"], user_id, row["role_id"])
        resources.delete_user(conn, user_id)
        revoke(state, conn, [(kinds.USER, user_id, None)])

    state.db.write(work)
    send_empty(resp)


def change_password(state: IdentityState, req: falcon.Request, resp: falcon.Response, user_id: str) -> None:
    """Self-service: the original password is the credential (no token needed, as in Keystone)."""
    body = util.json_body(state, req)
    util.validate(state, "password_change", body)
    change = body["user"]
    with state.db.read() as conn:
        row = resources.get_user(conn, user_id)
    if not state.hasher.verify(change["original_password"], row["password_hash"] if row else None) or row is None:
        raise unauthorized()
    new_hash = state.hasher.hash(change["password"])

    def work(conn: Connection) -> None:
        resources.update_user(conn, user_id, {"password_hash": new_hash, "password_created_at": resources.now()})
        revoke(state, conn, [(kinds.USER, user_id, None)])

    state.db.write(work)
    send_empty(resp)


def user_projects(state: IdentityState, req: falcon.Request, resp: falcon.Response, user_id: str) -> None:
    with state.db.read() as conn:
        row = resources.get_user(conn, user_id)
        util.authorize(state, req, "identity:list_user_projects",
                       {"target.user.id": user_id, "target.user.domain_id": row["domain_id"] if row else None})
        if row is None:
            raise not_found("user", user_id)
        ids = role_db.targets_of_user(conn, user_id, role_db.PROJECT)
        rows = resources.list_projects(conn, ids=ids)
    send_json(resp, {"projects": [views.project(state, req, item) for item in rows],
                     "links": util.collection_links(state, req)})


ROUTES = [
    Route("/v3/domains", {"GET": list_domains, "POST": create_domain}),
    Route("/v3/domains/{domain_id}", {"GET": show_domain, "PATCH": update_domain, "DELETE": delete_domain}),
    Route("/v3/projects", {"GET": list_projects, "POST": create_project}),
    Route("/v3/projects/{project_id}", {"GET": show_project, "PATCH": update_project, "DELETE": delete_project}),
    Route("/v3/users", {"GET": list_users, "POST": create_user}),
    Route("/v3/users/{user_id}", {"GET": show_user, "PATCH": update_user, "DELETE": delete_user}),
    Route("/v3/users/{user_id}/password", {"POST": change_password}),
    Route("/v3/users/{user_id}/projects", {"GET": user_projects}),
]
