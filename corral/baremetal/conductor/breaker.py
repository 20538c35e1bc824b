"""A circuit breaker per conductor RPC address.

A conductor the database still sees (it heartbeats) may be out of this API
host's reach: a partial partition.  Trying it on every call would cost each
call the connect timeout.  Instead, the first call that fails to connect
opens the breaker for that address: calls pass it over (to the conductor
the hash ring picks next, or a 503 when none is left) while a probe in the
background tries to open a TCP connection to it, first after
``RETRY_AFTER`` seconds, then at doubling intervals up to
``RETRY_AFTER_MAX``.  Only a probe that connects closes the breaker again.
So a partition costs one call one connect timeout, however long it lasts;
the probes pay the others, off any request's path.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

LOG = logging.getLogger(__name__)

# Seconds before the first probe of an address that could not be reached, and the longest interval.
# Probes are cheap (no request waits for them), so the first comes soon: a
# conductor that was only restarting is called again within seconds.
RETRY_AFTER = 2.0
RETRY_AFTER_MAX = 60.0


def tcp_probe(address: str, timeout: float) -> bool:
    """Whether a TCP connection to the RPC address (an http(s) URL) can be opened within ``timeout``."""
    parts = urlsplit(address)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname or "", port), timeout=timeout):
            return True
    except OSError:
        return False


def _in_thread(work: Callable[[], None]) -> None:
    threading.Thread(target=work, name="conductor-probe", daemon=True).start()


@dataclass
class _Open:
    """An address passed over: until when, the interval after the next failed probe, a probe under way."""

    until: float
    interval: float
    probing: bool = False


class CircuitBreaker:
    def __init__(self, probe: Callable[[str], bool], *, clock: Callable[[], float] = time.monotonic,
                 start: Callable[[Callable[[], None]], None] = _in_thread, retry_after: float = RETRY_AFTER,
                 retry_after_max: float = RETRY_AFTER_MAX) -> None:
        self._probe = probe
        self._clock = clock
        self._start = start
        self._retry_after = retry_after
        self._retry_after_max = retry_after_max
        self._lock = threading.Lock()
        self._open: dict[str, _Open] = {}

    def usable(self, address: str) -> bool:
        """Whether calls may go to ``address`` now (a due probe is started, off the caller's path)."""
        with self._lock:
            state = self._open.get(address)
            if state is None:
                return True
            if state.probing or self._clock() < state.until:
                return False
            state.probing = True
        self._start(lambda: self._run_probe(address))
        return False

    def failed(self, address: str) -> None:
        """A call could not connect to ``address``: pass it over from now on."""
        with self._lock:
            if address not in self._open:
                LOG.warning("conductor at %s could not be reached; calls go elsewhere until it answers again",
                            address)
                self._open[address] = _Open(self._clock() + self._retry_after, self._retry_after)

    def unreachable(self) -> list[str]:
        with self._lock:
            return sorted(self._open)

    def _run_probe(self, address: str) -> None:
        try:
            reached = self._probe(address)
        except Exception:  # noqa: BLE001 - a probe that breaks counts as a failed one
            LOG.exception("probing the conductor at %s failed", address)
            reached = False
        with self._lock:
            state = self._open.get(address)
            if state is None:
                return
            if reached:
                LOG.info("conductor at %s can be reached again", address)
                del self._open[address]
                return
            state.interval = min(state.interval * 2, self._retry_after_max)
            state.until = self._clock() + state.interval
            state.probing = False
