"""Ports for servers the tests start in other processes.

A port the kernel hands out for ``bind(("127.0.0.1", 0))`` comes from the
ephemeral range, the range outgoing connections take their source ports
from: between choosing it and a child process binding it, any connection on
the machine may take it, and the child fails with "Address already in use".
These ports come from below that range instead, each xdist worker a slice
of its own, handed out in turn and checked free before they are given.
"""

from __future__ import annotations

import functools
import os
import random
import socket
import threading

FIRST_PORT = 20000
SLICE = 1500  # ports per worker: eight workers fit below 32768, the usual start of the ephemeral range


class _PortSlice:
    def __init__(self, start: int) -> None:
        self.start = start
        self.lock = threading.Lock()
        # Another run on the machine may be using the same slice: start somewhere else in it.
        self.next = random.randrange(SLICE)

    def take(self, host: str) -> int:
        with self.lock:
            for _ in range(SLICE):
                port = self.start + self.next
                self.next = (self.next + 1) % SLICE
                if _bindable(host, port):
                    return port
        raise RuntimeError(f"no free port between {self.start} and {self.start + SLICE - 1}")


def _bindable(host: str, port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


@functools.cache
def _slice() -> _PortSlice:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    index = int(worker) % 8 if worker.isdigit() else 0
    return _PortSlice(FIRST_PORT + index * SLICE)


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on, outside the ephemeral range, for a server about to start."""
    return _slice().take(host)
