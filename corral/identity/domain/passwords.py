"""Password and secret hashing.

New hashes use ``[identity] password_hash_algorithm``: scrypt (memory-hard,
the default) in passlib's ``$scrypt$ln=..,r=..,p=..$salt$hash`` format, or
bcrypt over a SHA-256 digest of the password (so that passwords longer
than bcrypt's 72 bytes keep all their characters) as ``$bcrypt-sha256$...``.
Hashes of either kind verify regardless of the current setting.

Checking a login costs one hash whether or not the user exists:
:meth:`PasswordHasher.verify` with ``None`` for the stored hash verifies
against a dummy hash made with the current parameters, so a wrong
username and a wrong password take the same work and get the same answer.
A semaphore bounds how many hashes a process computes at once; a request
that cannot get a turn within ``wait`` seconds is refused with
:class:`HasherBusy` instead of holding its server thread, so a flood of
logins cannot starve the other requests.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import os
import threading
from collections.abc import Iterator

import bcrypt

from corral.core.errors import ServiceUnavailable

SCRYPT_DEFAULT_ROUNDS = 15
BCRYPT_DEFAULT_ROUNDS = 12
_SCRYPT_R = 8
_SCRYPT_P = 1
_SCRYPT_PREFIX = "$scrypt$"
_BCRYPT_PREFIX = "$bcrypt-sha256$"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.b64decode(text + "=" * (-len(text) % 4))


def _scrypt(secret: bytes, salt: bytes, log_n: int, r: int, p: int) -> bytes:
    n = 2**log_n
    return hashlib.scrypt(secret, salt=salt, n=n, r=r, p=p, maxmem=256 * n * r + 2**20, dklen=32)


def _bcrypt_input(secret: bytes) -> bytes:
    # bcrypt reads at most 72 bytes and stops at NUL: hash a digest instead.
    return base64.b64encode(hashlib.sha256(secret).digest())


class HasherBusy(ServiceUnavailable):
    """Every hashing slot stayed taken for the allowed wait (503, try again)."""

    def __init__(self) -> None:
        super().__init__("The service is handling too many logins; try again.", headers={"Retry-After": "1"})


class PasswordHasher:
    def __init__(self, algorithm: str = "scrypt", rounds: int | None = None, concurrency: int = 2,
                 wait: float = 3.0) -> None:
        if algorithm not in ("scrypt", "bcrypt"):
            raise ValueError(f"unknown password hash algorithm {algorithm!r}")
        self.algorithm = algorithm
        self.rounds = rounds or (SCRYPT_DEFAULT_ROUNDS if algorithm == "scrypt" else BCRYPT_DEFAULT_ROUNDS)
        self._slots = threading.BoundedSemaphore(concurrency)
        self._wait = wait
        self._dummy = self._dummy_hash()
        # Hash computations so far (tests check that failures cost the same).
        self.computed = 0

    def hash(self, secret: str) -> str:
        data = secret.encode("utf-8")
        with self._slot():
            self.computed += 1
            if self.algorithm == "scrypt":
                salt = os.urandom(16)
                digest = _scrypt(data, salt, self.rounds, _SCRYPT_R, _SCRYPT_P)
                return f"{_SCRYPT_PREFIX}ln={self.rounds},r={_SCRYPT_R},p={_SCRYPT_P}${_b64(salt)}${_b64(digest)}"
            hashed = bcrypt.hashpw(_bcrypt_input(data), bcrypt.gensalt(self.rounds)).decode()
            return _BCRYPT_PREFIX + hashed

    def verify(self, secret: str, stored: str | None) -> bool:
        """Whether ``secret`` matches ``stored``; ``None`` costs the same and fails."""
        if stored is None:
            self._check(secret, self._dummy)
            return False
        return self._check(secret, stored)

    @contextlib.contextmanager
    def _slot(self) -> Iterator[None]:
        if not self._slots.acquire(timeout=self._wait):
            raise HasherBusy()
        try:
            yield
        finally:
            self._slots.release()

    def _dummy_hash(self) -> str:
        """A well-formed hash with the current parameters that nothing matches.

        Checking it computes exactly what checking a real hash computes; its
        digest is random, so the comparison at the end fails.
        """
        if self.algorithm == "scrypt":
            return (f"{_SCRYPT_PREFIX}ln={self.rounds},r={_SCRYPT_R},p={_SCRYPT_P}"
                    f"${_b64(os.urandom(16))}${_b64(os.urandom(32))}")
        salt = bcrypt.gensalt(self.rounds).decode()
        alphabet = "./ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
        tail = "".join(alphabet[byte % 64] for byte in os.urandom(31))
        return _BCRYPT_PREFIX + salt + tail

    def _check(self, secret: str, stored: str) -> bool:
        data = secret.encode("utf-8")
        with self._slot():
            self.computed += 1
            if stored.startswith(_SCRYPT_PREFIX):
                return _check_scrypt(data, stored)
            if stored.startswith(_BCRYPT_PREFIX):
                try:
                    return bcrypt.checkpw(_bcrypt_input(data), stored[len(_BCRYPT_PREFIX):].encode())
                except ValueError:
                    return False
        return False


def _check_scrypt(data: bytes, stored: str) -> bool:
    try:
        params, salt, digest = stored[len(_SCRYPT_PREFIX):].split("$")
        values = dict(item.split("=", 1) for item in params.split(","))
        computed = _scrypt(data, _unb64(salt), int(values["ln"]), int(values["r"]), int(values["p"]))
    except (ValueError, KeyError):
        return False
    return hmac.compare_digest(computed, _unb64(digest))
