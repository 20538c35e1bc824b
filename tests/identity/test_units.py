"""The pure parts: token payloads, revocation matching, implied roles, password hashes, token requests, keys."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from cryptography.fernet import Fernet, MultiFernet

from corral.core.errors import BadRequest
from corral.identity import keys
from corral.identity.api.schemas import compile_all
from corral.identity.domain import auth_request, revocation, roles, tokens
from corral.identity.domain.passwords import PasswordHasher


def _payload(**changes: object) -> tokens.TokenPayload:
    values: dict[str, object] = dict(
        user_id="u1", user_domain_id="default", methods=("password",), scope="project", scope_id="p1",
        project_domain_id="default", roles=("member", "reader"), issued_at=1_000_000, expires_at=2_000,
        audit_ids=("audit-1",), app_cred_id=None)
    values.update(changes)
    return tokens.TokenPayload(**values).with_revocation_keys()  # type: ignore[arg-type]


def test_token_round_trip_and_tampering() -> None:
    fernet = MultiFernet([Fernet(Fernet.generate_key())])
    payload = _payload(app_cred_id="ac1", audit_ids=("a", "b"))
    token = tokens.encode(fernet, payload)
    assert "=" not in token
    decoded = tokens.decode(fernet, token)
    assert decoded == payload and decoded.revocation_keys == payload.revocation_keys
    for bad in ("", "x" * 5000, token[:-2], token.replace(token[10], "A" if token[10] != "A" else "B", 1)):
        with pytest.raises(tokens.InvalidToken):
            tokens.decode(fernet, bad)
    with pytest.raises(tokens.InvalidToken):
        tokens.decode(MultiFernet([Fernet(Fernet.generate_key())]), token)


def test_revocation_events_match_what_they_name_and_only_older_tokens() -> None:
    token = _payload(issued_at=100)
    cases = {
        ("audit", "audit-1", None): True, ("audit", "audit-2", None): False,
        ("user", "u1", None): True, ("user", "u2", None): False,
        ("grant", "u1", "p1"): True, ("grant", "u1", "p2"): False,
        ("project", "p1", None): True, ("domain", "default", None): True, ("domain", "other", None): False,
        ("role", "reader", None): True, ("role", "admin", None): False, ("app_cred", "ac1", None): False,
    }
    for (kind, subject, scope), revokes in cases.items():
        index = revocation.RevocationIndex([revocation.RevocationEvent(kind, subject, scope, 100)])
        assert index.revokes(token) is revokes, (kind, subject, scope)
        # A token issued after the event is not touched by it.
        assert not index.revokes(_payload(issued_at=101))
    assert not revocation.RevocationIndex().revokes(token)


def test_implied_roles_expand_and_refuse_cycles() -> None:
    implies = {"admin": ["member"], "member": ["reader"]}
    assert roles.expand(["admin"], implies) == ["admin", "member", "reader"]
    assert roles.expand(["reader", "member"], implies) == ["reader", "member"]
    assert roles.creates_cycle("reader", "admin", implies)
    assert roles.creates_cycle("x", "x", implies)
    assert not roles.creates_cycle("observer", "reader", implies)


@pytest.mark.parametrize("algorithm", ["scrypt", "bcrypt"])
def test_password_hashes(algorithm: str) -> None:
    hasher = PasswordHasher(algorithm, rounds=4)
    long_password = "p" * 100
    stored = hasher.hash(long_password)
    assert hasher.verify(long_password, stored)
    # Every character counts, also beyond bcrypt's 72 bytes.
    assert not hasher.verify("p" * 99 + "q", stored)
    assert not hasher.verify("wrong", stored)
    assert not hasher.verify("anything", None)
    assert not hasher.verify("anything", "not a hash")
    other = PasswordHasher("bcrypt" if algorithm == "scrypt" else "scrypt", rounds=4)
    assert other.verify(long_password, stored)  # old hashes keep working after a change of algorithm


def test_token_requests_default_to_the_default_domain() -> None:
    validator = compile_all()["token_issue"]
    parsed = auth_request.parse({"auth": {
        "identity": {"methods": ["password"], "password": {"user": {"name": "bob", "password": "pw"}}},
        "scope": {"project": {"name": "demo"}}}}, validator, "default")
    assert parsed.user == auth_request.NamedRef(name="bob", domain_id="default")
    assert parsed.scope_ref == auth_request.NamedRef(name="demo", domain_id="default")
    with pytest.raises(BadRequest):
        auth_request.parse({"auth": {"identity": {"methods": ["password"]}, "scope": "bogus"}}, validator, "default")


def test_key_repository_setup_rotation_and_reload(tmp_path: Path) -> None:
    path = str(tmp_path / "keys")
    assert keys.setup(path) and not keys.setup(path)
    assert sorted(os.listdir(path)) == ["0", "1"]
    assert oct(os.stat(path).st_mode & 0o777) == "0o700"
    assert all(oct(os.stat(os.path.join(path, name)).st_mode & 0o777) == "0o600" for name in os.listdir(path))
    ring = keys.KeyRing(path)
    token = tokens.encode(ring.fernet(), _payload())
    staged = Path(path, "0").read_bytes()
    assert keys.rotate(path, max_active_keys=3) == 2
    # The staged key became the primary key: every process already had it.
    assert Path(path, "2").read_bytes() == staged
    ring.expire()
    assert tokens.decode(ring.fernet(), token) == _payload()
    keys.rotate(path, max_active_keys=3)
    assert sorted(os.listdir(path)) == ["0", "2", "3"]
    ring.expire()
    with pytest.raises(tokens.InvalidToken):
        tokens.decode(ring.fernet(), token)
    with pytest.raises(keys.KeyRepositoryError):
        keys.load(str(tmp_path / "missing"))


def test_a_login_that_cannot_get_a_hashing_turn_is_refused_not_parked() -> None:
    import threading

    from corral.identity.domain.passwords import HasherBusy

    hasher = PasswordHasher("scrypt", rounds=4, concurrency=1, wait=0.05)
    stored = hasher.hash("pw")
    release = threading.Event()
    holder = threading.Thread(target=lambda: (hasher._slots.acquire(), release.wait(), hasher._slots.release()))
    holder.start()
    try:
        with pytest.raises(HasherBusy) as refused:
            hasher.verify("pw", stored)
        assert (refused.value.status, refused.value.headers) == (503, {"Retry-After": "1"})
    finally:
        release.set()
        holder.join()
    assert hasher.verify("pw", stored)
