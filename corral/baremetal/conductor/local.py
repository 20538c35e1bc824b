"""Conductors running in this process, by host name.

The all-in-one server runs the API and a conductor in one process; the
API then calls the conductor directly instead of over JSON-RPC.  The
registry starts empty and is filled only when a conductor starts.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from corral.baremetal.conductor.core import ConductorCore


class LocalConductors:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_host: dict[str, ConductorCore] = {}

    def add(self, conductor: ConductorCore) -> None:
        with self._lock:
            self._by_host[conductor.host] = conductor

    def remove(self, conductor: ConductorCore) -> None:
        with self._lock:
            if self._by_host.get(conductor.host) is conductor:
                del self._by_host[conductor.host]

    def get(self, host: str) -> ConductorCore | None:
        with self._lock:
            return self._by_host.get(host)


LOCAL = LocalConductors()
