"""Identity fuzzed over its whole route table: no request gets a 500."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from corral.identity.api.routes import ROUTES
from tests.identity.conftest import ADMIN_PASSWORD, IdentityServer, password_auth
from tests.support import fuzz as fuzzing
from tests.support.fuzz import Target, fuzz, names_in

pytestmark = [pytest.mark.slow, pytest.mark.timeout(fuzzing.timeout())]

# Query parameters read by name in the handlers.
QUERY_NAMES = ["name", "enabled", "domain_id", "user.id", "scope.project.id", "role.id", "effective",
               "include_names", "nocatalog", "allow_expired", "parent_id", "is_domain"]


def check_error(status: int, body: Any) -> None:
    error = body["error"]
    assert error["code"] == status and isinstance(error["message"], str) and error["title"], body


def _seed(identity: IdentityServer, target: Target) -> dict[str, list[str]]:
    """A project, a user with the member role on it, a role and an application credential."""
    admin = identity.admin()
    tag = uuid.uuid4().hex[:8]
    project = admin.post("/projects", json={"project": {"name": f"fuzz-{tag}", "domain_id": "default"}})
    assert project.status_code == 201, project.text
    project_id = project.json()["project"]["id"]
    password = f"fuzz-password-{tag}"
    user = admin.post("/users", json={"user": {"name": f"fuzz-{tag}", "password": password,
                                                "domain_id": "default", "default_project_id": project_id}})
    assert user.status_code == 201, user.text
    user_id = user.json()["user"]["id"]
    role = admin.post("/roles", json={"role": {"name": f"fuzz-{tag}"}})
    assert role.status_code == 201, role.text
    role_id = role.json()["role"]["id"]
    roles = {entry["name"]: entry["id"] for entry in admin.get("/roles").json()["roles"]}
    for grant in (f"/projects/{project_id}/users/{user_id}/roles/{roles['member']}",
                  f"/projects/{project_id}/users/{user_id}/roles/{role_id}"):
        assert admin.put(grant).status_code == 204
    credential = admin.post(f"/users/{user_id}/application_credentials",
                            json={"application_credential": {"name": f"fuzz-{tag}"}})
    credential_ids = [credential.json()["application_credential"]["id"]] if credential.status_code == 201 else []
    # Fresh tokens each time: earlier requests may have disabled or deleted
    # what the previous ones belonged to.
    member, _ = identity.issue(f"fuzz-{tag}", password, scope={"project": {"id": project_id}})
    target.tokens[:] = [identity.issue()[0]] * 4 + [identity.issue(scope="system")[0], member, "not-a-token"]
    return {
        # Not the admin project: the seeding itself needs it.
        "project_id": [project_id, str(uuid.uuid4())],
        "user_id": [user_id, str(uuid.uuid4())],
        "role_id": [role_id, *([roles["reader"]] if "reader" in roles else [])],
        "implied_id": [*([roles["reader"]] if "reader" in roles else []), role_id],
        "domain_id": ["default", str(uuid.uuid4())],
        "credential_id": credential_ids + [str(uuid.uuid4())],
        "*": [str(uuid.uuid4())],
    }


def _examples(ids: dict[str, list[str]]) -> dict[tuple[str, str], list[Any]]:
    project_id = ids["project_id"][0]
    return {
        ("POST", "/v3/auth/tokens"): [
            password_auth("admin", ADMIN_PASSWORD, "admin"),
            password_auth("admin", ADMIN_PASSWORD, "system"),
            password_auth("admin", "wrong", {"project": {"id": project_id}}),
            {"auth": {"identity": {"methods": ["application_credential"], "application_credential": {
                "id": ids["credential_id"][0], "secret": "not-the-secret"}}}},
            {"auth": {"identity": {"methods": ["token"], "token": {"id": "not-a-token"}}}},
        ],
        ("POST", "/v3/domains"): [{"domain": {"name": "fuzz-domain", "enabled": True}}],
        ("PATCH", "/v3/domains/{domain_id}"): [{"domain": {"description": "changed"}}],
        ("POST", "/v3/projects"): [{"project": {"name": "fuzz-new", "domain_id": "default", "enabled": True,
                                                "description": "x", "parent_id": project_id}}],
        ("PATCH", "/v3/projects/{project_id}"): [{"project": {"description": "changed", "enabled": True}}],
        ("POST", "/v3/users"): [{"user": {"name": "fuzz-new", "password": "p", "domain_id": "default",
                                          "default_project_id": project_id, "enabled": True}}],
        ("PATCH", "/v3/users/{user_id}"): [{"user": {"description": "changed", "email": "a@b.c"}}],
        ("POST", "/v3/users/{user_id}/password"): [
            {"user": {"original_password": "wrong", "password": "new-password"}}],
        ("POST", "/v3/roles"): [{"role": {"name": "fuzz-new-role", "description": "x"}}],
        ("PATCH", "/v3/roles/{role_id}"): [{"role": {"description": "changed"}}],
        ("POST", "/v3/users/{user_id}/application_credentials"): [{"application_credential": {
            "name": "fuzz-new", "description": "x", "expires_at": "2999-01-01T00:00:00", "unrestricted": False,
            "roles": [{"name": "member"}]}}],
    }


def test_no_request_gets_a_500(identity: IdentityServer, request: pytest.FixtureRequest, backend: str) -> None:
    target = Target(
        name="identity",
        base_url=identity.url,
        routes=ROUTES,
        # Keystone has no microversions: the header chosen is one it ignores.
        versions=[{}],
        version_header="X-Fuzz-Ignored",
        check_error=check_error,
        keys=names_in("corral.identity.api") + QUERY_NAMES,
        tokens=[],
    )
    ids = target.identifiers = _seed(identity, target)
    target.examples = _examples(ids)
    target.queries = {
        "/v3/projects": [[("name", "admin")], [("domain_id", "default"), ("enabled", "true")]],
        "/v3/users": [[("name", "admin")], [("domain_id", "default")]],
        "/v3/role_assignments": [[("user.id", ids["user_id"][0])],
                                 [("scope.project.id", ids["project_id"][0]), ("effective", ""),
                                  ("include_names", "1")]],
        "/v3/auth/tokens": [[("nocatalog", "1")], [("allow_expired", "1")]],
    }
    target.reseed = lambda: _seed(identity, target)
    fuzz(target, request, backend)
