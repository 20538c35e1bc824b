"""``GET /v3/role_assignments``: who has which role where, directly or (``effective``) through implications."""

from __future__ import annotations

from typing import Any

import falcon

from corral.core.http import Route, send_json
from corral.identity.api import util, views
from corral.identity.api.state import IdentityState
from corral.identity.db import resources
from corral.identity.db import roles as role_db
from corral.identity.domain import roles as role_logic


def _scope_filter(req: falcon.Request) -> tuple[str | None, str | None]:
    if req.get_param("scope.project.id"):
        return role_db.PROJECT, req.get_param("scope.project.id")
    if req.get_param("scope.domain.id"):
        return role_db.DOMAIN, req.get_param("scope.domain.id")
    if req.get_param("scope.system"):
        return role_db.SYSTEM, role_db.SYSTEM_ID
    return None, None


def _expanded(rows: list[dict[str, Any]], implications: dict[str, list[str]]) -> list[dict[str, Any]]:
    """Each assignment followed by one entry per role it implies (with the role that implied it)."""
    result = []
    for row in rows:
        result.append(row)
        for implied in role_logic.expand([row["role_id"]], implications)[1:]:
            result.append({**row, "role_id": implied, "prior_role_id": row["role_id"]})
    return result


def list_assignments(state: IdentityState, req: falcon.Request, resp: falcon.Response) -> None:
    target_type, target_id = _scope_filter(req)
    util.authorize(state, req, "identity:list_role_assignments",
                   {"target.domain_id": target_id if target_type == role_db.DOMAIN else None})
    role_filter = req.get_param("role.id")
    effective = util.flag_present(req, "effective")
    names = util.flag_present(req, "include_names")
    with state.db.read() as conn:
        rows = role_db.list_assignments(conn, user_id=req.get_param("user.id"), target_type=target_type,
                                        target_id=target_id,
                                        role_ids=None if effective or not role_filter else [role_filter])
        if effective:
            rows = _expanded(rows, role_db.implications(conn))
            if role_filter:
                rows = [row for row in rows if row["role_id"] == role_filter]
        lookup = _Names(conn) if names else None
        body = [_render(state, req, row, lookup) for row in rows]
    send_json(resp, {"role_assignments": body, "links": util.collection_links(state, req)})


class _Names:
    def __init__(self, conn: Any) -> None:
        self.domains = {row["id"]: row["name"] for row in resources.list_domains(conn)}
        self.projects = {row["id"]: row for row in resources.list_projects(conn)}
        self.users = {row["id"]: row for row in resources.list_users(conn)}
        self.roles = role_db.role_names(conn)

    def domain(self, domain_id: str) -> dict[str, Any]:
        return {"id": domain_id, "name": self.domains.get(domain_id)}


def _render(state: IdentityState, req: falcon.Request, row: dict[str, Any], names: _Names | None) -> dict[str, Any]:
    v3 = util.v3(state, req)
    prior = row.get("prior_role_id")
    links = {"assignment": f"{v3}/{views.assignment_path(row['target_type'], row['target_id'], row['user_id'], prior or row['role_id'])}"}
    if prior:
        links["prior_role"] = f"{v3}/prior_role/{row['role_id']}/implies/{prior}"
    if row["target_type"] == role_db.SYSTEM:
        scope: dict[str, Any] = {"system": {"all": True}}
    else:
        scope_item: dict[str, Any] = {"id": row["target_id"]}
        if names is not None:
            if row["target_type"] == role_db.PROJECT:
                project = names.projects.get(row["target_id"], {})
                scope_item.update(name=project.get("name"), domain=names.domain(project.get("domain_id", "")))
            else:
                scope_item["name"] = names.domains.get(row["target_id"])
        scope = {row["target_type"]: scope_item}
    user: dict[str, Any] = {"id": row["user_id"]}
    role: dict[str, Any] = {"id": row["role_id"]}
    if names is not None:
        found = names.users.get(row["user_id"], {})
        user.update(name=found.get("name"), domain=names.domain(found.get("domain_id", "")))
        role["name"] = names.roles.get(row["role_id"])
    return {"links": links, "scope": scope, "user": user, "role": role}


ROUTES = [Route("/v3/role_assignments", {"GET": list_assignments})]
