"""The Fernet key repository, laid out as ``keystone-manage fernet_setup`` lays it out.

A directory (mode 0700) of files named by integers, one key each (mode
0600): ``0`` is the *staged* key, the highest number the *primary* key new
tokens are encrypted with, the others older keys still accepted.
Rotation promotes the staged key to primary and stages a new one, so every
process already knows the next primary key before it is used; keys beyond
``max_active_keys`` are removed, oldest first.

:class:`KeyRing` is what a process holds: the keys as a ``MultiFernet``
(primary first), read again when the directory changes.
"""

from __future__ import annotations

import os
import threading
import time

from cryptography.fernet import Fernet, MultiFernet


class KeyRepositoryError(Exception):
    """The repository is missing, unreadable or holds no usable key."""


def _key_files(path: str) -> dict[int, str]:
    try:
        names = os.listdir(path)
    except OSError as error:
        raise KeyRepositoryError(f"cannot read the token key repository {path}: {error.strerror}") from None
    return {int(name): os.path.join(path, name) for name in names if name.isdigit()}


def _write_key(path: str, index: int) -> None:
    target = os.path.join(path, str(index))
    temporary = os.path.join(path, f".{index}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(Fernet.generate_key())
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, target)


def is_set_up(path: str) -> bool:
    try:
        return len(_key_files(path)) >= 2
    except KeyRepositoryError:
        return False


def setup(path: str) -> bool:
    """Create the repository with a staged and a primary key; False when it already has keys."""
    os.makedirs(path, mode=0o700, exist_ok=True)
    os.chmod(path, 0o700)
    if is_set_up(path):
        return False
    _write_key(path, 0)
    rotate(path, max_active_keys=3)
    return True


def rotate(path: str, max_active_keys: int) -> int:
    """Promote the staged key, stage a new one, drop the oldest; the new primary's number."""
    files = _key_files(path)
    if 0 not in files:
        _write_key(path, 0)
        files = _key_files(path)
    primary = max(files) + 1
    os.replace(files[0], os.path.join(path, str(primary)))
    _write_key(path, 0)
    older = sorted(index for index in _key_files(path) if index not in (0, primary))
    # max_active_keys counts the staged and primary keys too.
    while older and len(older) + 2 > max(max_active_keys, 2):
        os.remove(os.path.join(path, str(older.pop(0))))
    return primary


def load(path: str) -> MultiFernet:
    files = _key_files(path)
    if len(files) < 1:
        raise KeyRepositoryError(
            f"no token keys in {path}; run 'corral identity fernet-setup' (or start 'corral serve' once)"
        )
    keys = []
    for index in sorted(files, key=lambda number: (number == 0, -number)):
        try:
            with open(files[index], "rb") as handle:
                keys.append(Fernet(handle.read().strip()))
        except (OSError, ValueError) as error:
            raise KeyRepositoryError(f"token key {files[index]} is not usable: {error}") from None
    return MultiFernet(keys)


class KeyRing:
    """The keys of one repository, re-read at most every ``check_interval`` seconds if it changed."""

    def __init__(self, path: str, check_interval: float = 5.0) -> None:
        self.path = path
        self._interval = check_interval
        self._lock = threading.Lock()
        self._stamp: tuple[float, tuple[str, ...]] | None = None
        self._fernet: MultiFernet | None = None
        self._checked = float("-inf")
        # Increases every time the keys change (caches keyed on keys start over).
        self.generation = 0

    def fernet(self) -> MultiFernet:
        now = time.monotonic()
        if self._fernet is None or now - self._checked > self._interval:
            with self._lock:
                if self._fernet is None or now - self._checked > self._interval:
                    self._reload()
                    self._checked = now
        assert self._fernet is not None
        return self._fernet

    def expire(self) -> None:
        """Look at the repository again at the next use (after a rotation made by this process)."""
        self._checked = float("-inf")

    def _reload(self) -> None:
        try:
            stamp = (os.stat(self.path).st_mtime, tuple(sorted(os.listdir(self.path))))
        except OSError as error:
            raise KeyRepositoryError(
                f"cannot read the token key repository {self.path}: {error.strerror}"
            ) from None
        if stamp != self._stamp or self._fernet is None:
            self._fernet = load(self.path)
            self._stamp = stamp
            self.generation += 1
