"""Bad token requests get upstream Keystone's answers, body for body.

``upstream_token_errors.json`` holds what Keystone 30.0.0 answered to each
request (measured, not written by hand).  The one difference kept on
purpose is the list of methods in the unsupported-method answer: it names
the methods each server offers.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.identity.conftest import ADMIN_PASSWORD, IdentityServer

CASES = json.loads((Path(__file__).parent / "upstream_token_errors.json").read_text())["cases"]


def _with_our_password(request: object) -> object:
    """The request with the upstream admin's password replaced by ours."""
    if isinstance(request, dict):
        return {key: ADMIN_PASSWORD if key == "password" and value == "secret" else _with_our_password(value)
                for key, value in request.items()}
    return request


@pytest.mark.parametrize("case", CASES, ids=[case["case"] for case in CASES])
def test_token_request_errors_match_upstream(identity: IdentityServer, case: dict) -> None:
    client = identity.client()
    if case["request"] == "{":
        resp = client.post("/auth/tokens", data="{", headers={"Content-Type": "application/json"})
    else:
        resp = client.post("/auth/tokens", json=_with_our_password(case["request"]))
    assert resp.status_code == case["status"], resp.text
    expected = case["body"]
    if case["case"] == "method unsupported":
        assert resp.json()["error"]["identity"]["methods"] == ["password", "token", "application_credential"]
        expected["error"]["identity"]["methods"] = resp.json()["error"]["identity"]["methods"]
    assert resp.json() == expected
    if case["status"] == 401:
        assert resp.headers["WWW-Authenticate"] == f'Keystone uri="{identity.url}/v3"'


def test_every_unknown_user_and_wrong_password_costs_one_hash(identity: IdentityServer) -> None:
    """The same answer and the same work whether the user exists or not."""
    admin = identity.admin()
    user = admin.post("/users", json={"user": {"name": "disabled", "password": "pw", "enabled": False}}).json()["user"]
    attempts = {
        "wrong password": {"name": "admin", "domain": {"id": "default"}, "password": "wrong"},
        "unknown user": {"name": "nobody", "domain": {"id": "default"}, "password": "wrong"},
        "unknown user id": {"id": "0" * 32, "password": "wrong"},
        "unknown domain": {"name": "admin", "domain": {"name": "Nowhere"}, "password": "wrong"},
        "disabled user, right password": {"id": user["id"], "password": "pw"},
        "no password": {"name": "admin", "domain": {"id": "default"}},
    }
    answers = set()
    for label, attempt in attempts.items():
        before = identity.state.hasher.computed
        resp = identity.client().post("/auth/tokens", json={"auth": {"identity": {
            "methods": ["password"], "password": {"user": attempt}}}})
        assert identity.state.hasher.computed - before == 1, label
        answers.add((resp.status_code, resp.text))
    assert answers == {(401, '{"error":{"code":401,"message":"The request you have made requires authentication.",'
                             '"title":"Unauthorized"}}')}
