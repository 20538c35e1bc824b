"""The rescue password as the agent gets it: a SHA-crypt hash (``$5$`` SHA-256, ``$6$`` SHA-512).

The agent writes the hash it is given as the rescue user's password
(``/etc/shadow`` format), so the plain password never reaches the
machine; ``[conductor] rescue_password_hash_algorithm`` picks the
algorithm, as upstream.  This is the published SHA-crypt scheme with the
default 5000 rounds and a 16-character random salt; Python's ``crypt``
module, which did the same, is gone from recent Pythons.
"""

from __future__ import annotations

import hashlib
import secrets

ALGORITHMS = {"sha256": ("5", hashlib.sha256), "sha512": ("6", hashlib.sha512)}
ROUNDS = 5000
SALT_LENGTH = 16
_ALPHABET = "./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
# The order in which the final digest's bytes are encoded, three at a time (the scheme's fixed permutation).
_ORDER = {
    "sha256": [(0, 10, 20), (21, 1, 11), (12, 22, 2), (3, 13, 23), (24, 4, 14), (15, 25, 5), (6, 16, 26),
               (27, 7, 17), (18, 28, 8), (9, 19, 29)],
    "sha512": [(0, 21, 42), (22, 43, 1), (44, 2, 23), (3, 24, 45), (25, 46, 4), (47, 5, 26), (6, 27, 48),
               (28, 49, 7), (50, 8, 29), (9, 30, 51), (31, 52, 10), (53, 11, 32), (12, 33, 54), (34, 55, 13),
               (56, 14, 35), (15, 36, 57), (37, 58, 16), (59, 17, 38), (18, 39, 60), (40, 61, 19),
               (62, 20, 41)],
}


def hash_password(password: str, algorithm: str = "sha256", salt: str | None = None) -> str:
    """``$5$<salt>$<hash>`` (or ``$6$``) of ``password``, with a random salt unless one is given."""
    if algorithm not in ALGORITHMS:
        raise ValueError(f"unknown password hash algorithm {algorithm!r}; use one of {sorted(ALGORITHMS)}")
    prefix, _ = ALGORITHMS[algorithm]
    if salt is None:
        salt = "".join(secrets.choice(_ALPHABET) for _ in range(SALT_LENGTH))
    salt = salt[:SALT_LENGTH]
    digest = _sha_crypt(password.encode(), salt.encode(), algorithm)
    return f"${prefix}${salt}${_encode(digest, algorithm)}"


def _repeat(block: bytes, length: int) -> bytes:
    return (block * (length // len(block) + 1))[:length]


def _sha_crypt(password: bytes, salt: bytes, algorithm: str) -> bytes:
    new = ALGORITHMS[algorithm][1]
    alternate = new(password + salt + password).digest()
    first = new(password + salt)
    first.update(_repeat(alternate, len(password)))
    length = len(password)
    while length:
        first.update(alternate if length & 1 else password)
        length >>= 1
    digest = first.digest()
    password_bytes = _repeat(new(password * len(password)).digest(), len(password))
    salt_bytes = _repeat(new(salt * (16 + digest[0])).digest(), len(salt))
    for round_ in range(ROUNDS):
        step = new(password_bytes if round_ & 1 else digest)
        if round_ % 3:
            step.update(salt_bytes)
        if round_ % 7:
            step.update(password_bytes)
        step.update(digest if round_ & 1 else password_bytes)
        digest = step.digest()
    return digest


def _chars(value: int, count: int) -> str:
    out = []
    for _ in range(count):
        out.append(_ALPHABET[value & 0x3F])
        value >>= 6
    return "".join(out)


def _encode(digest: bytes, algorithm: str) -> str:
    encoded = [_chars((digest[a] << 16) | (digest[b] << 8) | digest[c], 4) for a, b, c in _ORDER[algorithm]]
    if algorithm == "sha256":
        encoded.append(_chars((digest[31] << 8) | digest[30], 3))
    else:
        encoded.append(_chars(digest[63], 2))
    return "".join(encoded)
