"""A child process kept alive: restarted when it dies, given up on loudly.

``corral serve --workers N`` runs background work (conductor, compute
service, periodic tasks) in one child process.  If it dies, it is started
again after a short, growing pause; if it dies more than ``max_restarts``
times within ``window`` seconds, something is wrong that restarting will
not fix, and ``on_give_up`` is called (the server then stops with an error
rather than serving APIs whose background work is gone).
"""

from __future__ import annotations

import logging
import subprocess
import threading
import time
from collections.abc import Callable, Sequence

LOG = logging.getLogger(__name__)


class Supervised:
    def __init__(
        self,
        name: str,
        args: Sequence[str],
        *,
        on_give_up: Callable[[], None],
        on_exit: Callable[[int], None] | None = None,
        max_restarts: int = 5,
        window: float = 120.0,
        first_pause: float = 0.5,
    ) -> None:
        self.name = name
        self._args = list(args)
        self._on_give_up = on_give_up
        # Told the pid of every child that exited (the metrics drop its live gauges).
        self._on_exit = on_exit
        self._max_restarts = max_restarts
        self._window = window
        self._first_pause = first_pause
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._thread = threading.Thread(target=self._watch, name=f"supervise:{name}", daemon=True)
        self.failed = False
        self.starts = 0

    @property
    def pid(self) -> int | None:
        process = self._process
        return process.pid if process is not None else None

    def start(self) -> Supervised:
        self._spawn()
        self._thread.start()
        return self

    def _spawn(self) -> None:
        with self._lock:
            if self._stopping.is_set():
                return
            self._process = subprocess.Popen(self._args)
            self.starts += 1

    def _watch(self) -> None:
        deaths: list[float] = []
        while not self._stopping.is_set():
            process = self._process
            assert process is not None
            status = process.wait()
            if self._on_exit is not None:
                self._on_exit(process.pid)
            if self._stopping.is_set():
                return
            now = time.monotonic()
            deaths = [moment for moment in deaths if now - moment < self._window] + [now]
            LOG.error("%s (pid %d) exited with status %s", self.name, process.pid, status)
            if len(deaths) > self._max_restarts:
                LOG.critical("%s died %d times in %g s; giving up and stopping the server",
                             self.name, len(deaths), self._window)
                self.failed = True
                self._on_give_up()
                return
            pause = min(30.0, self._first_pause * 2 ** (len(deaths) - 1))
            if self._stopping.wait(pause):
                return
            self._spawn()
            LOG.warning("%s restarted (pid %s)", self.name, self.pid)

    def stop(self, timeout: float = 30.0) -> None:
        with self._lock:
            self._stopping.set()
            process = self._process
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=timeout)
        if self._thread.is_alive():
            self._thread.join(timeout=timeout)
