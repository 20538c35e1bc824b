"""Policy defaults (legacy and secure-RBAC), overrides, and basic auth."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import bcrypt
import falcon
import pytest
from oslo_policy import policy

from corral.core import config, errors
from corral.core.auth import HtpasswdAuthenticator
from corral.core.context import RequestContext
from corral.core.policy import LEGACY_ADMIN, SYSTEM_READER, Enforcer

RULES = [
    policy.DocumentedRuleDefault(
        name="toy:list",
        check_str=SYSTEM_READER,
        description="List toys.",
        operations=[{"method": "GET", "path": "/toys"}],
        scope_types=["system"],
        deprecated_rule=policy.DeprecatedRule(
            name="toy:list", check_str=LEGACY_ADMIN, deprecated_reason="scoped roles", deprecated_since="1"
        ),
    )
]


def _enforcer(tmp_path: Path, **oslo_policy: object) -> Enforcer:
    conf = config.make_conf(state_path=str(tmp_path), overrides={"oslo_policy": dict(oslo_policy)} if oslo_policy else None)
    return Enforcer(conf, RULES)


def _ctx(roles: tuple[str, ...], system: str | None = None) -> RequestContext:
    return RequestContext(user_id="u", project_id="p", roles=roles, system_scope=system, authenticated=True)


def test_legacy_defaults_also_apply_when_new_defaults_are_off(tmp_path: Path) -> None:
    enforcer = _enforcer(tmp_path, enforce_new_defaults=False)
    # the deprecated "role:admin" rule is OR-ed in, but scope still counts
    assert enforcer.allows(_ctx(("admin",), system="all"), "toy:list")
    assert enforcer.allows(_ctx(("reader",), system="all"), "toy:list")
    assert not enforcer.allows(_ctx(("member",), system="all"), "toy:list")
    assert not enforcer.allows(_ctx(("admin",)), "toy:list")  # project scope


def test_new_defaults_need_a_system_reader(tmp_path: Path) -> None:
    enforcer = _enforcer(tmp_path, enforce_new_defaults=True)
    assert not enforcer.allows(_ctx(("admin",), system="all"), "toy:list")
    assert not enforcer.allows(_ctx(("admin",)), "toy:list")
    assert enforcer.allows(_ctx(("reader",), system="all"), "toy:list")
    with pytest.raises(errors.Forbidden):
        enforcer.authorize(_ctx(("member",)), "toy:list")


def test_policy_file_overrides_a_rule(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text('"toy:list": "role:member"\n')
    enforcer = _enforcer(tmp_path, policy_file=str(path))
    assert enforcer.allows(_ctx(("member",), system="all"), "toy:list")
    assert not enforcer.allows(_ctx(("reader",), system="all"), "toy:list")


def test_remembered_decisions_follow_a_changed_policy_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text('"toy:list": "role:member"\n')
    enforcer = _enforcer(tmp_path, policy_file=str(path))
    member = _ctx(("member",), system="all")
    assert enforcer.allows(member, "toy:list")
    assert enforcer.allows(member, "toy:list")  # remembered
    path.write_text('"toy:list": "role:reader"\n')
    stat = path.stat()
    os.utime(path, (stat.st_atime, stat.st_mtime + 10))  # a visibly newer file
    # The file is looked at again once the check interval has passed.
    monkeypatch.setattr("corral.core.policy.RULES_CHECK_INTERVAL", 0.0)
    assert not enforcer.allows(member, "toy:list")
    assert enforcer.allows(_ctx(("reader",), system="all"), "toy:list")


def _request(header: str | None) -> falcon.Request:
    from corral.core.http import Request
    from falcon import testing

    headers = {"Authorization": header} if header else {}
    return Request(testing.create_environ(path="/", headers=headers))


def test_http_basic_checks_bcrypt_hashes(tmp_path: Path) -> None:
    hashed = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(rounds=4)).decode()
    users = tmp_path / "htpasswd"
    users.write_text(f"alice:{hashed}\n")
    authenticate = HtpasswdAuthenticator(str(users))
    good = _request("Basic " + base64.b64encode(b"alice:s3cret").decode())
    authenticate(good)
    assert good.context.user_id == "alice" and good.context.is_admin
    authenticate(_request("Basic " + base64.b64encode(b"alice:s3cret").decode()))  # cached path
    for header in (None, "Basic " + base64.b64encode(b"alice:wrong").decode(),
                   "Basic " + base64.b64encode(b"bob:s3cret").decode(), "Basic !!!", "Bearer x"):
        with pytest.raises(errors.Unauthorized):
            authenticate(_request(header))
