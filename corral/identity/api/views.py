"""Keystone's JSON shapes for domains, projects, users, roles, assignments and credentials."""

from __future__ import annotations

from typing import Any

import falcon

from corral.identity.api.state import IdentityState
from corral.identity.api.util import iso_microseconds, self_link, v3

_IMMUTABLE = {"immutable": True}


def domain(state: IdentityState, req: falcon.Request, row: dict[str, Any]) -> dict[str, Any]:
    return {
        **row["extra"],
        "id": row["id"], "name": row["name"], "description": row["description"] or "",
        "enabled": bool(row["enabled"]), "tags": [], "options": {},
        "links": self_link(state, req, f"domains/{row['id']}"),
    }


def project(state: IdentityState, req: falcon.Request, row: dict[str, Any]) -> dict[str, Any]:
    return {
        **row["extra"],
        "id": row["id"], "name": row["name"], "domain_id": row["domain_id"],
        "description": row["description"] if row["description"] is not None else "",
        "enabled": bool(row["enabled"]), "parent_id": row["domain_id"], "is_domain": False,
        "tags": row["tags"], "options": {}, "links": self_link(state, req, f"projects/{row['id']}"),
    }


def user(state: IdentityState, req: falcon.Request, row: dict[str, Any]) -> dict[str, Any]:
    body: dict[str, Any] = {**row["extra"], "id": row["id"], "name": row["name"], "domain_id": row["domain_id"],
                            "enabled": bool(row["enabled"])}
    if row["default_project_id"]:
        body["default_project_id"] = row["default_project_id"]
    body.update({"password_expires_at": None, "options": {}, "links": self_link(state, req, f"users/{row['id']}")})
    return body


def role(state: IdentityState, req: falcon.Request, row: dict[str, Any], *, links: bool = True) -> dict[str, Any]:
    body = {"id": row["id"], "name": row["name"], "domain_id": None, "description": row["description"],
            "options": row["options"]}
    if links:
        body["links"] = self_link(state, req, f"roles/{row['id']}")
    return body


def role_ref(state: IdentityState, req: falcon.Request, row: dict[str, Any]) -> dict[str, Any]:
    """A role as role inferences show it."""
    return {"id": row["id"], "links": self_link(state, req, f"roles/{row['id']}"), "name": row["name"]}


def assignment_path(target_type: str, target_id: str, user_id: str, role_id: str) -> str:
    if target_type == "system":
        return f"system/users/{user_id}/roles/{role_id}"
    return f"{target_type}s/{target_id}/users/{user_id}/roles/{role_id}"


def app_cred(state: IdentityState, req: falcon.Request, row: dict[str, Any],
             role_rows: list[dict[str, Any]], secret: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": row["id"], "name": row["name"], "description": row["description"], "user_id": row["user_id"],
        "project_id": row["project_id"], "system": row["system"], "expires_at": iso_microseconds(row["expires_at"]),
        "unrestricted": True if row["unrestricted"] else None,
        "roles": [role(state, req, item, links=False) for item in role_rows],
    }
    if secret is not None:
        body["secret"] = secret
    body["links"] = {"self": f"{v3(state, req)}/application_credentials/{row['id']}"}
    return body


IMMUTABLE_OPTIONS = _IMMUTABLE
