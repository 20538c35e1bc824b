"""Tokens: issue, scopes, validate, revoke, expiry, rescoping, and what revokes them."""

from __future__ import annotations

import time

import pytest

from corral.core import metrics
from corral.identity.domain import tokens
from tests.identity.conftest import ADMIN_PASSWORD, IdentityServer, password_auth


def _create_user(identity: IdentityServer, admin, name: str, password: str = "pw", **extra) -> str:
    resp = admin.post("/users", json={"user": {"name": name, "password": password, **extra}})
    assert resp.status_code == 201, resp.text
    return resp.json()["user"]["id"]


def _create_project(admin, name: str) -> str:
    resp = admin.post("/projects", json={"project": {"name": name}})
    assert resp.status_code == 201, resp.text
    return resp.json()["project"]["id"]


def _role_id(admin, name: str) -> str:
    return next(role["id"] for role in admin.get("/roles").json()["roles"] if role["name"] == name)


def _member(identity: IdentityServer, name: str = "alice", project: str = "demo") -> tuple[str, str]:
    admin = identity.admin()
    project_id = _create_project(admin, project)
    user_id = _create_user(identity, admin, name, default_project_id=project_id)
    assert admin.put(f"/projects/{project_id}/users/{user_id}/roles/{_role_id(admin, 'member')}").status_code == 204
    return user_id, project_id


def _validate(identity: IdentityServer, token: str, caller: str | None = None, **params):
    return identity.client(caller or identity.issue()[0]).get(
        "/auth/tokens", headers={"X-Subject-Token": token}, params=params)


def test_project_token_has_keystones_shape(identity: IdentityServer) -> None:
    resp = identity.client().post("/auth/tokens", json=password_auth("admin", ADMIN_PASSWORD, "admin"))
    assert resp.status_code == 201
    token = resp.headers["X-Subject-Token"]
    assert "=" not in token and len(token) < 512
    body = resp.json()["token"]
    assert list(body) == ["methods", "user", "audit_ids", "expires_at", "issued_at", "project", "is_domain", "roles",
                          "catalog"]
    assert body["methods"] == ["password"]
    assert body["user"] == {"domain": {"id": "default", "name": "Default"}, "id": identity.admin_id,
                            "name": "admin", "password_expires_at": None}
    assert body["project"] == {"domain": {"id": "default", "name": "Default"}, "id": identity.admin_project_id,
                               "name": "admin"}
    # admin implies member implies reader
    assert [role["name"] for role in body["roles"]] == ["admin", "member", "reader"]
    assert all(len(role["id"]) == 32 for role in body["roles"])
    assert body["expires_at"].endswith(".000000Z") and body["issued_at"].endswith(".000000Z")
    assert len(body["audit_ids"]) == 1 and len(body["audit_ids"][0]) == 22
    assert {entry["type"] for entry in body["catalog"]} == {"identity", "placement", "baremetal", "compute", "image"}


def test_scopes_system_domain_unscoped_and_default_project(identity: IdentityServer) -> None:
    _token, system = identity.issue(scope="system")
    assert system["system"] == {"all": True} and "project" not in system
    assert list(system)[-3:] == ["roles", "system", "catalog"]
    _token, unscoped = identity.issue(scope="unscoped")
    assert "roles" not in unscoped and "catalog" not in unscoped and "project" not in unscoped
    # No scope: the user's default project (the bootstrap sets the admin project).
    _token, default = identity.issue(scope=None)
    assert default["project"]["id"] == identity.admin_project_id
    # A domain scope needs a role on the domain.
    resp = identity.client().post("/auth/tokens", json=password_auth("admin", ADMIN_PASSWORD,
                                                                      {"domain": {"id": "default"}}))
    assert resp.status_code == 401
    admin = identity.admin()
    assert admin.put(f"/domains/default/users/{identity.admin_id}/roles/{_role_id(admin, 'reader')}").status_code == 204
    _token, domain = identity.issue(scope={"domain": {"name": "Default"}})
    assert domain["domain"] == {"id": "default", "name": "Default"}
    assert [role["name"] for role in domain["roles"]] == ["reader"]


def test_validate_check_and_nocatalog(identity: IdentityServer) -> None:
    token, issued = identity.issue()
    resp = _validate(identity, token)
    assert resp.status_code == 200 and resp.headers["X-Subject-Token"] == token
    assert resp.json()["token"] == issued
    assert "catalog" not in _validate(identity, token, nocatalog="").json()["token"]
    head = identity.client(token).request("HEAD", "/auth/tokens", headers={"X-Subject-Token": token})
    assert head.status_code == 200 and head.content == b""
    missing = identity.client(token).get("/auth/tokens")
    assert (missing.status_code, missing.json()) == (
        404, {"error": {"code": 404, "message": "No token in the request", "title": "Not Found"}})
    garbage = _validate(identity, "garbage")
    assert (garbage.status_code, garbage.json()["error"]["message"]) == (404, "Could not recognize Fernet token")


def test_revoked_token_is_refused(identity: IdentityServer) -> None:
    token, _body = identity.issue()
    other, _ = identity.issue()
    assert identity.client(other).delete("/auth/tokens", headers={"X-Subject-Token": token}).status_code == 204
    resp = _validate(identity, token, caller=other)
    assert resp.json() == {"error": {"code": 404, "message": "Failed to validate token", "title": "Not Found"}}
    refused = identity.client(token).get("/users")
    assert refused.status_code == 401
    assert refused.headers["WWW-Authenticate"] == f'Keystone uri="{identity.url}/v3"'
    assert refused.json()["error"]["message"] == "The request you have made requires authentication."
    # Another token of the same user is untouched.
    assert identity.client(other).get("/users").status_code == 200
    assert identity.client(other).delete("/auth/tokens", headers={"X-Subject-Token": token}).status_code == 404


def test_expired_token_is_refused_and_allow_expired_reads_it(identity: IdentityServer) -> None:
    token, _body = identity.issue()
    payload = identity.state.validator.payload(token)
    past = int(time.time()) - 10
    expired = tokens.encode(identity.state.keys.fernet(), tokens.TokenPayload(
        user_id=payload.user_id, user_domain_id=payload.user_domain_id, methods=payload.methods,
        scope=payload.scope, scope_id=payload.scope_id, project_domain_id=payload.project_domain_id,
        roles=payload.roles, issued_at=(past - 3600) * 1_000_000, expires_at=past,
        audit_ids=(tokens.new_audit_id(),)))
    assert identity.client(expired).get("/users").status_code == 401
    assert _validate(identity, expired, caller=token).status_code == 404
    allowed = _validate(identity, expired, caller=token, allow_expired="1")
    assert allowed.status_code == 200 and allowed.json()["token"]["user"]["id"] == identity.admin_id


def test_token_altered_or_from_other_keys_is_refused(identity: IdentityServer) -> None:
    from cryptography.fernet import Fernet, MultiFernet

    token, _body = identity.issue()
    tampered = token[:-5] + ("A" if token[-5] != "A" else "B") + token[-4:]
    assert identity.client(tampered).get("/users").status_code == 401
    payload = identity.state.validator.payload(token)
    foreign = tokens.encode(MultiFernet([Fernet(Fernet.generate_key())]), payload)
    assert identity.client(foreign).get("/users").status_code == 401


def test_rescoping_with_the_token_method(identity: IdentityServer) -> None:
    user_id, project_id = _member(identity)
    unscoped, _ = identity.issue("alice", "pw", scope="unscoped")
    resp = identity.client().post("/auth/tokens", json={"auth": {
        "identity": {"methods": ["token"], "token": {"id": unscoped}}, "scope": {"project": {"id": project_id}}}})
    assert resp.status_code == 201, resp.text
    body = resp.json()["token"]
    original = identity.state.validator.payload(unscoped)
    assert body["methods"] == ["token", "password"]
    assert body["audit_ids"][1] == original.audit_ids[0]
    assert body["project"]["id"] == project_id
    assert [role["name"] for role in body["roles"]] == ["member", "reader"]
    # The new token expires with the one it came from.
    assert identity.state.validator.payload(resp.headers["X-Subject-Token"]).expires_at == original.expires_at
    # Without a scope: the user's default project, as for a password.
    system, _ = identity.issue(scope="system")
    again = identity.client().post("/auth/tokens", json={"auth": {
        "identity": {"methods": ["token"], "token": {"id": system}}}})
    assert again.json()["token"]["project"]["id"] == identity.admin_project_id
    assert "system" not in again.json()["token"]
    garbage = identity.client().post("/auth/tokens", json={"auth": {
        "identity": {"methods": ["token"], "token": {"id": "garbage"}}}})
    assert (garbage.status_code, garbage.json()["error"]["message"]) == (404, "Could not recognize Fernet token")


def test_no_role_on_the_scope_is_401(identity: IdentityServer) -> None:
    _member(identity)
    for scope in ("admin", "system", {"project": {"id": "nope"}}):
        resp = identity.client().post("/auth/tokens", json=password_auth("alice", "pw", scope))
        assert resp.status_code == 401, scope


def test_changes_that_revoke_tokens(identity: IdentityServer) -> None:
    admin = identity.admin()
    user_id, project_id = _member(identity)
    member_role = _role_id(admin, "member")

    def alice_token() -> str:
        return identity.issue("alice", "pw", scope="demo")[0]

    def works(token: str) -> bool:
        return identity.client(token).get(f"/users/{user_id}").status_code == 200

    # A role taken away: tokens on that project go.
    token = alice_token()
    assert works(token)
    assert admin.delete(f"/projects/{project_id}/users/{user_id}/roles/{member_role}").status_code == 204
    assert not works(token)
    assert admin.put(f"/projects/{project_id}/users/{user_id}/roles/{member_role}").status_code == 204
    # A user disabled.
    token = alice_token()
    assert admin.patch(f"/users/{user_id}", json={"user": {"enabled": False}}).status_code == 200
    assert not works(token)
    assert identity.client().post("/auth/tokens", json=password_auth("alice", "pw", "demo")).status_code == 401
    assert admin.patch(f"/users/{user_id}", json={"user": {"enabled": True}}).status_code == 200
    # A project disabled.
    token = alice_token()
    assert admin.patch(f"/projects/{project_id}", json={"project": {"enabled": False}}).status_code == 200
    assert not works(token)
    assert admin.patch(f"/projects/{project_id}", json={"project": {"enabled": True}}).status_code == 200
    # The user's own password change.
    token = alice_token()
    change = identity.client().post(f"/users/{user_id}/password",
                                    json={"user": {"password": "pw2", "original_password": "pw"}})
    assert change.status_code == 204
    assert not works(token)
    assert identity.issue("alice", "pw2", scope="demo")[1]["user"]["id"] == user_id
    wrong = identity.client().post(f"/users/{user_id}/password",
                                   json={"user": {"password": "pw3", "original_password": "pw"}})
    assert wrong.status_code == 401
    # The user deleted.
    token = identity.issue("alice", "pw2", scope="demo")[0]
    assert admin.delete(f"/users/{user_id}").status_code == 204
    assert identity.client(token).get("/auth/projects").status_code == 401


def test_auth_projects_domains_system_and_catalog(identity: IdentityServer) -> None:
    _user_id, project_id = _member(identity)
    token, _ = identity.issue("alice", "pw", scope="demo")
    alice = identity.client(token)
    assert [p["id"] for p in alice.get("/auth/projects").json()["projects"]] == [project_id]
    assert alice.get("/auth/domains").json()["domains"] == []
    assert alice.get("/auth/system").json() == {"system": [], "links": {"self": f"{identity.url}/v3/auth/system"}}
    admin = identity.admin()
    assert admin.get("/auth/system").json()["system"] == [{"all": True}]
    catalog = alice.get("/auth/catalog").json()
    assert catalog["links"] == {"self": f"{identity.url}/v3/auth/catalog"}
    urls = {(entry["type"], endpoint["interface"]): endpoint["url"]
            for entry in catalog["catalog"] for endpoint in entry["endpoints"]}
    assert urls[("identity", "public")] == identity.url
    assert urls[("placement", "public")] == identity.url + "/placement"
    assert urls[("compute", "internal")] == identity.url + "/compute/v2.1"
    unscoped, _ = identity.issue("alice", "pw", scope="unscoped")
    assert identity.client(unscoped).get("/auth/catalog").status_code == 403


def test_catalog_urls_come_from_the_configuration(identity: IdentityServer) -> None:
    conf = identity.state.conf
    conf.set_override("public_url", "https://cloud.example.com", group="catalog")
    conf.set_override("baremetal_url", "https://metal.example.com:6385", group="catalog")
    try:
        _token, body = identity.issue()
    finally:
        conf.clear_override("public_url", group="catalog")
        conf.clear_override("baremetal_url", group="catalog")
    urls = {entry["type"]: entry["endpoints"][0]["url"] for entry in body["catalog"]}
    assert urls == {
        "identity": "https://cloud.example.com/identity",
        "placement": "https://cloud.example.com/placement",
        "baremetal": "https://metal.example.com:6385",
        "compute": "https://cloud.example.com/compute/v2.1",
        "image": "https://cloud.example.com/image",
    }
    assert all(endpoint["region"] == "RegionOne" for entry in body["catalog"] for endpoint in entry["endpoints"])


def test_user_and_project_named_without_domain_are_in_the_default_domain(identity: IdentityServer) -> None:
    resp = identity.client().post("/auth/tokens", json={"auth": {
        "identity": {"methods": ["password"], "password": {"user": {"name": "admin", "password": ADMIN_PASSWORD}}},
        "scope": {"project": {"name": "admin"}}}})
    assert resp.status_code == 201, resp.text
    assert resp.json()["token"]["project"]["id"] == identity.admin_project_id


@pytest.mark.backends("first")
def test_token_checks_are_counted_as_cache_hits_and_misses(identity: IdentityServer) -> None:
    def count(name: str, **labels: str) -> float:
        return metrics.REGISTRY.get_sample_value(name, labels) or 0.0

    token, _body = identity.issue()
    misses, hits = count("corral_token_cache_misses_total"), count("corral_token_cache_hits_total")
    reads = count("corral_token_revocation_reads_total", result="unchanged")
    changed = count("corral_token_revocation_reads_total", result="changed")
    for _ in range(3):
        assert identity.client(token).get("/projects").status_code == 200
    # The first check decrypts the token, the next ones find it.
    assert count("corral_token_cache_misses_total") - misses == 1
    assert count("corral_token_cache_hits_total") - hits == 2
    # Revoking reads the events again: their version changed.
    assert identity.client(token).delete("/auth/tokens", headers={"X-Subject-Token": token}).status_code == 204
    assert identity.client(token).get("/projects").status_code == 401
    assert count("corral_token_revocation_reads_total", result="changed") > changed
    assert count("corral_token_revocation_reads_total", result="unchanged") >= reads
