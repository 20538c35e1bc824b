"""Users, projects, domains, roles, implications, assignments and application credentials through the API."""

from __future__ import annotations

from tests.identity.conftest import IdentityServer, password_auth


def _role_id(admin, name: str) -> str:
    return next(role["id"] for role in admin.get("/roles").json()["roles"] if role["name"] == name)


def test_users_crud_and_keystone_answers(identity: IdentityServer) -> None:
    admin = identity.admin()
    created = admin.post("/users", json={"user": {"name": "alice", "password": "pw", "email": "a@example.com"}})
    assert created.status_code == 201
    user = created.json()["user"]
    assert user["email"] == "a@example.com" and user["domain_id"] == "default" and user["enabled"] is True
    assert "password" not in user and user["links"]["self"] == f"{identity.url}/v3/users/{user['id']}"
    duplicate = admin.post("/users", json={"user": {"name": "alice", "password": "pw"}})
    assert duplicate.status_code == 409
    assert duplicate.json()["error"]["message"] == ("Conflict occurred attempting to store user - Duplicate entry "
                                                     "found with name alice at domain ID default.")
    bad = admin.post("/users", json={"user": {"password": "pw"}})
    assert bad.json() == {"error": {"code": 400, "title": "Bad Request", "message":
                          "Invalid input for field/attribute user. Value: {'password': 'pw'}. 'name' is a required "
                          "property"}}
    assert [u["name"] for u in admin.get("/users").json()["users"]] == ["admin", "alice", "corral"]
    assert [u["name"] for u in admin.get("/users", params={"name": "alice"}).json()["users"]] == ["alice"]
    patched = admin.patch(f"/users/{user['id']}", json={"user": {"description": "hi", "name": "alicia"}})
    assert patched.json()["user"]["name"] == "alicia" and patched.json()["user"]["description"] == "hi"
    missing = admin.get("/users/nope")
    assert missing.json() == {"error": {"code": 404, "message": "Could not find user: nope.", "title": "Not Found"}}
    assert admin.delete(f"/users/{user['id']}").status_code == 204
    assert admin.get(f"/users/{user['id']}").status_code == 404


def test_projects_and_domains(identity: IdentityServer) -> None:
    admin = identity.admin()
    project = admin.post("/projects", json={"project": {"name": "demo", "description": "d", "tags": ["a"]}})
    assert project.status_code == 201
    body = project.json()["project"]
    assert {key: body[key] for key in ("name", "domain_id", "description", "enabled", "parent_id", "is_domain",
                                       "tags")} == {
        "name": "demo", "domain_id": "default", "description": "d", "enabled": True, "parent_id": "default",
        "is_domain": False, "tags": ["a"]}
    duplicate = admin.post("/projects", json={"project": {"name": "demo"}})
    assert duplicate.status_code == 409
    assert duplicate.json()["error"]["message"].startswith(
        "Conflict occurred attempting to store project - it is not permitted to have two projects with either "
        "the same name or same id in the same domain: name is demo, project id ")
    assert admin.post("/projects", json={"project": {"name": 5}}).json()["error"]["message"] == (
        "Invalid input for field/attribute name. Value: 5. 5 is not of type 'string'")
    assert admin.post("/projects", json={"project": {"name": ""}}).json()["error"]["message"] == (
        "Invalid input for field/attribute name. Value: . '' should be non-empty")
    assert sorted(p["name"] for p in admin.get("/projects").json()["projects"]) == ["admin", "demo", "service"]
    assert admin.delete(f"/projects/{body['id']}").status_code == 204
    assert admin.delete(f"/projects/{body['id']}").json()["error"]["message"] == (
        f"Could not find project: {body['id']}.")
    domains = admin.get("/domains").json()["domains"]
    assert [(d["id"], d["name"]) for d in domains] == [("default", "Default")]
    other = admin.post("/domains", json={"domain": {"name": "Other"}}).json()["domain"]
    assert admin.delete(f"/domains/{other['id']}").status_code == 403  # still enabled
    assert admin.patch(f"/domains/{other['id']}", json={"domain": {"enabled": False}}).status_code == 200
    assert admin.delete(f"/domains/{other['id']}").status_code == 204


def test_roles_implications_and_assignments(identity: IdentityServer) -> None:
    admin = identity.admin()
    assert sorted(r["name"] for r in admin.get("/roles").json()["roles"]) == ["admin", "member", "reader", "service"]
    inferences = admin.get("/role_inferences").json()["role_inferences"]
    assert [(i["prior_role"]["name"], [r["name"] for r in i["implies"]]) for i in inferences] == [
        ("admin", ["member"]), ("member", ["reader"])]
    assert admin.delete(f"/roles/{_role_id(admin, 'admin')}").status_code == 403  # immutable
    custom = admin.post("/roles", json={"role": {"name": "observer"}})
    assert custom.status_code == 201
    role = custom.json()["role"]
    assert admin.post("/roles", json={"role": {"name": "observer"}}).json()["error"]["message"] == (
        "Conflict occurred attempting to store role - Duplicate entry found with name observer.")
    reader = _role_id(admin, "reader")
    implied = admin.put(f"/roles/{role['id']}/implies/{reader}")
    assert implied.status_code == 201
    assert implied.json()["role_inference"]["implies"]["name"] == "reader"
    # reader implying observer would make a cycle through nothing: observer implies reader already
    assert admin.put(f"/roles/{reader}/implies/{role['id']}").status_code == 400
    assert admin.request("HEAD", f"/roles/{role['id']}/implies/{reader}").status_code == 204
    user = admin.post("/users", json={"user": {"name": "bob", "password": "pw"}}).json()["user"]
    project = admin.post("/projects", json={"project": {"name": "p1"}}).json()["project"]
    grant = f"/projects/{project['id']}/users/{user['id']}/roles/{role['id']}"
    assert admin.request("HEAD", grant).status_code == 404
    assert admin.put(grant).status_code == 204
    assert admin.put(grant).status_code == 204
    assert admin.request("HEAD", grant).status_code == 204
    listed = admin.get(f"/projects/{project['id']}/users/{user['id']}/roles").json()["roles"]
    assert [r["name"] for r in listed] == ["observer"]
    assert admin.put(f"/projects/{project['id']}/users/{user['id']}/roles/nope").json()["error"]["message"] == (
        "Could not find role: nope.")
    effective = admin.get("/role_assignments", params={"user.id": user["id"], "effective": "",
                                                      "include_names": ""}).json()["role_assignments"]
    assert [(a["role"]["name"], a["scope"]["project"]["name"]) for a in effective] == [("observer", "p1"),
                                                                                     ("reader", "p1")]
    assert effective[1]["links"]["prior_role"].endswith(f"/v3/prior_role/{reader}/implies/{role['id']}")
    _token, body = identity.issue("bob", "pw", scope="p1")
    assert [r["name"] for r in body["roles"]] == ["observer", "reader"]
    assert admin.delete(grant).status_code == 204
    gone = admin.delete(grant)
    assert gone.json()["error"]["message"] == (
        f"Could not find role assignment with role: {role['id']}, user or group: {user['id']}, project, domain, "
        f"or system: {project['id']}.")
    system = f"/system/users/{user['id']}/roles/{reader}"
    assert admin.put(system).status_code == 204
    assert [r["name"] for r in admin.get(f"/system/users/{user['id']}/roles").json()["roles"]] == ["reader"]
    _token, body = identity.issue("bob", "pw", scope="system")
    assert body["system"] == {"all": True}


def test_member_is_refused_what_needs_an_admin(identity: IdentityServer) -> None:
    admin = identity.admin()
    project = admin.post("/projects", json={"project": {"name": "p1"}}).json()["project"]
    user = admin.post("/users", json={"user": {"name": "carol", "password": "pw"}}).json()["user"]
    assert admin.put(f"/projects/{project['id']}/users/{user['id']}/roles/{_role_id(admin, 'member')}").status_code == 204
    carol = identity.client(identity.issue("carol", "pw", scope="p1")[0])
    refused = carol.get("/users")
    assert refused.json() == {"error": {"code": 403, "title": "Forbidden", "message":
                              "You are not authorized to perform the requested action: identity:list_users."}}
    assert carol.post("/projects", json={"project": {"name": "mine"}}).status_code == 403
    assert carol.get(f"/users/{user['id']}").status_code == 200
    assert carol.get(f"/users/{identity.admin_id}").status_code == 403
    assert carol.get(f"/projects/{project['id']}").status_code == 200
    assert carol.get(f"/projects/{identity.admin_project_id}").status_code == 403
    admin_token = identity.issue()[0]
    assert carol.get("/auth/tokens", headers={"X-Subject-Token": admin_token}).json()["error"]["message"] == (
        "You are not authorized to perform the requested action: identity:validate_token.")


def test_application_credentials(identity: IdentityServer) -> None:
    admin = identity.admin()
    project = admin.post("/projects", json={"project": {"name": "p1"}}).json()["project"]
    user = admin.post("/users", json={"user": {"name": "dave", "password": "pw"}}).json()["user"]
    assert admin.put(f"/projects/{project['id']}/users/{user['id']}/roles/{_role_id(admin, 'member')}").status_code == 204
    dave = identity.client(identity.issue("dave", "pw", scope="p1")[0])
    path = f"/users/{user['id']}/application_credentials"
    created = dave.post(path, json={"application_credential": {"name": "ci", "description": "x"}})
    assert created.status_code == 201, created.text
    credential = created.json()["application_credential"]
    assert (credential["project_id"], credential["unrestricted"]) == (project["id"], None)
    assert sorted(r["name"] for r in credential["roles"]) == ["member", "reader"]
    assert len(credential["secret"]) == 86
    assert dave.post(path, json={"application_credential": {"name": "ci"}}).json()["error"]["message"] == (
        "Conflict occurred attempting to store application_credential - Duplicate entry found with name ci.")
    refused = dave.post(path, json={"application_credential": {"name": "x", "roles": [{"name": "admin"}]}})
    assert refused.json()["error"]["message"] == (
        "Invalid application credential: Cannot create an application credential with unassigned role")
    reader_only = dave.post(path, json={"application_credential": {
        "name": "ro", "roles": [{"name": "reader"}], "secret": "s3cret", "expires_at": "2099-01-01T00:00:00"}})
    assert reader_only.json()["application_credential"]["expires_at"] == "2099-01-01T00:00:00.000000"
    listed = dave.get(path).json()["application_credentials"]
    assert [c["name"] for c in listed] == ["ci", "ro"] and all("secret" not in c for c in listed)

    by_id = identity.client().post("/auth/tokens", json={"auth": {"identity": {
        "methods": ["application_credential"],
        "application_credential": {"id": credential["id"], "secret": credential["secret"]}}}})
    assert by_id.status_code == 201
    body = by_id.json()["token"]
    assert body["application_credential"] == {"id": credential["id"], "name": "ci", "restricted": True}
    assert body["project"]["id"] == project["id"] and body["methods"] == ["application_credential"]
    by_name = identity.client().post("/auth/tokens", json={"auth": {"identity": {
        "methods": ["application_credential"], "application_credential": {
            "name": "ro", "secret": "s3cret", "user": {"name": "dave", "domain": {"id": "default"}}}}}})
    assert [r["name"] for r in by_name.json()["token"]["roles"]] == ["reader"]
    wrong = identity.client().post("/auth/tokens", json={"auth": {"identity": {
        "methods": ["application_credential"], "application_credential": {"id": credential["id"], "secret": "x"}}}})
    assert wrong.status_code == 401
    # A restricted credential's token cannot make more credentials.
    from_credential = identity.client(by_id.headers["X-Subject-Token"])
    assert from_credential.post(path, json={"application_credential": {"name": "more"}}).status_code == 403
    # Deleting the credential revokes its tokens.
    assert dave.delete(f"{path}/{credential['id']}").status_code == 204
    assert from_credential.get(f"/users/{user['id']}").status_code == 401
    assert dave.delete(f"{path}/{credential['id']}").json()["error"]["message"] == (
        f"Could not find Application Credential: {credential['id']}.")


def test_password_login_needs_a_role_on_the_scope(identity: IdentityServer) -> None:
    admin = identity.admin()
    admin.post("/users", json={"user": {"name": "erin", "password": "pw"}})
    _token, body = identity.issue("erin", "pw", scope=None)
    assert "project" not in body and "roles" not in body
    refused = identity.client().post("/auth/tokens", json=password_auth("erin", "pw", "admin"))
    assert refused.status_code == 401
