"""Consistent hashing of nodes onto live conductors.

Each conductor owns ``REPLICAS`` points on a ring of MD5 values; a node
belongs to the first conductor point at or after the hash of its UUID.
When a conductor stops heartbeating only its own nodes move.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
from collections.abc import Iterable

REPLICAS = 64


def _hash(text: str) -> int:
    return int.from_bytes(hashlib.md5(text.encode(), usedforsecurity=False).digest()[:8], "big")


class HashRing:
    def __init__(self, hosts: Iterable[str]) -> None:
        self.hosts = sorted(set(hosts))
        points = sorted((_hash(f"{host}-{replica}"), host) for host in self.hosts for replica in range(REPLICAS))
        self._keys = [key for key, _host in points]
        self._owners = [host for _key, host in points]

    def __bool__(self) -> bool:
        return bool(self.hosts)

    def owner(self, node_uuid: str) -> str | None:
        if not self._keys:
            return None
        index = bisect.bisect_left(self._keys, _hash(node_uuid)) % len(self._keys)
        return self._owners[index]


@functools.lru_cache(maxsize=256)
def _ring_of(hosts: tuple[str, ...]) -> HashRing:
    return HashRing(hosts)


def ring_for(hosts: Iterable[str]) -> HashRing:
    """The ring of ``hosts``, built once per set of hosts (listing nodes asks for it per node)."""
    return _ring_of(tuple(sorted(set(hosts))))
