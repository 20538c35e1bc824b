"""http_basic: checks side by side, verified pairs remembered, unknown names cost the same."""

from __future__ import annotations

import base64
import threading
from pathlib import Path
from typing import Any

import bcrypt
import falcon
import pytest
from falcon import testing

from corral.core import auth, errors
from corral.core.http import Request


def _request(user: str, password: str) -> falcon.Request:
    header = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
    return Request(testing.create_environ(path="/", headers={"Authorization": header}))


def _users_file(tmp_path: Path, **passwords: str) -> Path:
    path = tmp_path / "htpasswd"
    path.write_text("".join(f"{user}:{bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=5)).decode()}\n"
                            for user, password in passwords.items()))
    return path


class RecordingCheck:
    """Wraps bcrypt.checkpw: records each hash checked; holds a chosen password until released."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, hold: bytes | None = None) -> None:
        self.hashes: list[bytes] = []
        self.hold = hold
        self.holding = threading.Event()
        self.release = threading.Event()
        self._real = bcrypt.checkpw
        monkeypatch.setattr(bcrypt, "checkpw", self)

    def __call__(self, password: bytes, hashed: bytes) -> Any:
        self.hashes.append(hashed)
        if password == self.hold:
            self.holding.set()
            assert self.release.wait(60)
        return self._real(password, hashed)


def _in_thread(target: Any) -> tuple[threading.Thread, list[BaseException]]:
    failures: list[BaseException] = []

    def run() -> None:
        try:
            target()
        except BaseException as error:  # noqa: BLE001 - reported by the test
            failures.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, failures


def test_a_slow_check_does_not_hold_up_other_users(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    authenticate = auth.HtpasswdAuthenticator(str(_users_file(tmp_path, alice="a-pass", bob="b-pass")))
    authenticate(_request("alice", "a-pass"))  # alice's pair is now remembered
    check = RecordingCheck(monkeypatch, hold=b"guess")

    def wrong() -> None:
        with pytest.raises(errors.Unauthorized):
            authenticate(_request("alice", "guess"))

    attacker, attacker_failures = _in_thread(wrong)
    assert check.holding.wait(30)  # a check of a wrong password is in progress
    try:
        for user, password in (("alice", "a-pass"), ("bob", "b-pass")):  # remembered, then a fresh check
            request = _request(user, password)
            other, failures = _in_thread(lambda request=request: authenticate(request))
            other.join(60)
            assert not other.is_alive() and not failures
            assert request.context.user_id == user
        assert attacker.is_alive()
    finally:
        check.release.set()
        attacker.join(60)
    assert not attacker_failures


def test_an_unknown_user_costs_a_check_like_a_known_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _users_file(tmp_path, alice="a-pass")
    authenticate = auth.HtpasswdAuthenticator(str(path))
    check = RecordingCheck(monkeypatch)
    with pytest.raises(errors.Unauthorized):
        authenticate(_request("alice", "wrong"))
    with pytest.raises(errors.Unauthorized):
        authenticate(_request("mallory", "wrong"))
    known, unknown = check.hashes
    assert unknown != known
    assert unknown.split(b"$")[2] == known.split(b"$")[2] == b"05"  # the same bcrypt cost


def test_verified_pairs_are_remembered_until_the_file_changes(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    path = _users_file(tmp_path, alice="a-pass")
    authenticate = auth.HtpasswdAuthenticator(str(path))
    check = RecordingCheck(monkeypatch)
    authenticate(_request("alice", "a-pass"))
    authenticate(_request("alice", "a-pass"))
    assert len(check.hashes) == 1
    for _ in range(2):  # a wrong password is never remembered
        with pytest.raises(errors.Unauthorized):
            authenticate(_request("alice", "a-pas"))
    assert len(check.hashes) == 3
    path.write_text(f"alice:{bcrypt.hashpw(b'new-pass', bcrypt.gensalt(rounds=4)).decode()}\n")
    import os

    os.utime(path, ns=(1, 1))  # a change the clock's resolution cannot hide
    with pytest.raises(errors.Unauthorized):
        authenticate(_request("alice", "a-pass"))
    authenticate(_request("alice", "new-pass"))
