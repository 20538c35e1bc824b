"""System scope and project headers, read as upstream Placement reads them.

Upstream builds its request context from ``OpenStack-System-Scope`` and
``X-Project-Id`` (the headers keystonemiddleware sends, and that upstream's
own functional tests send with the ``noauth2`` strategy).  Every Placement
rule is for project-scoped requests, and oslo.policy enforces scope, so a
system-scoped administrator is refused everywhere.
"""

from __future__ import annotations

import re
from uuid import uuid4

import pytest

from corral.placement.api import policies

PROJECT = str(uuid4())
OTHER_PROJECT = str(uuid4())

SYSTEM_ADMIN = {"X-Auth-Token": "user", "X-Roles": "admin,member,reader", "OpenStack-System-Scope": "all"}


def _every_operation() -> list[tuple[str, str, str]]:
    found = []
    for rule in policies.rules():
        for operation in getattr(rule, "operations", None) or []:
            found.append((rule.name, operation["method"], operation["path"]))
    return found


def _concrete(path: str) -> str:
    values = {"uuid": str(uuid4()), "consumer_uuid": str(uuid4()), "resource_class": "VCPU",
              "name": "CUSTOM_SCOPED"}
    concrete = re.sub(r"\{(\w+)\}", lambda match: values[match.group(1)], path)
    # Query validation comes before policy (upstream's order too).
    return concrete + f"?project_id={PROJECT}" if concrete == "/usages" else concrete


def test_every_rule_is_for_project_scope() -> None:
    for rule in policies.rules():
        if rule.name == "project_reader_api":
            # Upstream leaves this building block without scope types.
            assert not rule.scope_types
        else:
            assert rule.scope_types == ["project"], rule.name


@pytest.mark.parametrize(("rule", "method", "path"), _every_operation(), ids=lambda value: str(value))
def test_system_scoped_admin_is_refused_everywhere(placement, rule: str, method: str, path: str) -> None:
    client = placement.client("1.39", token=None).with_headers(**{k.replace("-", "_"): v for k, v in SYSTEM_ADMIN.items()})
    with_service = client.with_headers(X_Roles="admin,member,reader,service")
    for caller in (client, with_service):
        answer = caller.request(method, _concrete(path), json={} if method in ("POST", "PUT") else None)
        assert answer.status_code == 403, (rule, answer.text)
        assert answer.json()["errors"][0]["detail"].endswith(f"Policy does not allow {rule} to be performed.  ")


def test_system_scoped_admin_refused_and_project_admin_allowed(placement) -> None:
    base = placement.client("1.39", token="user")
    assert base.with_headers(X_Roles="admin,member,reader", OpenStack_System_Scope="all").get(
        "/resource_providers").status_code == 403
    assert base.with_headers(X_Roles="admin,member,reader", X_Project_Id=PROJECT).get(
        "/resource_providers").status_code == 200
    # An empty scope header is no scope, as upstream.
    assert base.with_headers(X_Roles="admin", OpenStack_System_Scope="").get("/resource_providers").status_code == 200


def _allocate(placement, project: str) -> None:
    admin = placement.client("1.39")
    provider = admin.post("/resource_providers", json={"name": str(uuid4())}).json()["uuid"]
    assert admin.put(f"/resource_providers/{provider}/inventories", json={
        "inventories": {"VCPU": {"total": 8}}, "resource_provider_generation": 0}).status_code == 200
    assert admin.put(f"/allocations/{uuid4()}", json={
        "allocations": {provider: {"resources": {"VCPU": 2}}}, "project_id": project, "user_id": str(uuid4()),
        "consumer_generation": None, "consumer_type": "INSTANCE"}).status_code == 204


def test_project_reader_reads_its_usages_by_x_project_id(placement) -> None:
    _allocate(placement, PROJECT)
    reader = placement.client("1.39", token="user").with_headers(X_Roles="reader", X_Project_Id=PROJECT)
    own = reader.get(f"/usages?project_id={PROJECT}")
    assert own.status_code == 200
    assert own.json()["usages"] == {"INSTANCE": {"consumer_count": 1, "VCPU": 2}}
    assert reader.get(f"/usages?project_id={OTHER_PROJECT}").status_code == 403
    # The header wins over a project named in the token.
    token_project = placement.client("1.39", token=f"user:{OTHER_PROJECT}").with_headers(
        X_Roles="reader", X_Project_Id=PROJECT)
    assert token_project.get(f"/usages?project_id={PROJECT}").status_code == 200
    assert token_project.get(f"/usages?project_id={OTHER_PROJECT}").status_code == 403
    # A system-scoped reader is no project reader.
    system_reader = placement.client("1.39", token="user").with_headers(X_Roles="reader", OpenStack_System_Scope="all")
    assert system_reader.get(f"/usages?project_id={PROJECT}").status_code == 403
