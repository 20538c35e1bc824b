"""Bounded worker pools and periodic tasks (futurist).

:class:`WorkerPool` refuses work instead of queueing it without bound: when
every worker is busy and the backlog is full, :meth:`WorkerPool.submit`
raises :class:`PoolFull` (APIs answer 503).  :class:`PeriodicTasks` runs
functions every N seconds in one background thread; a task that raises is
logged and runs again at its next interval.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import futurist
from futurist import periodics

LOG = logging.getLogger(__name__)


class PoolFull(Exception):
    """Every worker is busy and the backlog is full."""


class WorkerPool:
    """At most ``size`` tasks run and ``backlog`` more wait; beyond that, PoolFull."""

    def __init__(self, size: int, *, backlog: int = 0, name: str = "workers") -> None:
        self.size = size
        self.name = name
        # Counts running plus queued tasks; the executor's own backlog check
        # would also count a task that is queued only until an idle worker
        # picks it up.
        self._slots = threading.BoundedSemaphore(size + backlog)
        self._executor = futurist.ThreadPoolExecutor(max_workers=size)

    def submit(self, work: Callable[..., Any], *args: Any, **kwargs: Any) -> Future[Any]:
        if not self._slots.acquire(blocking=False):
            raise PoolFull(f"{self.name}: all {self.size} workers are busy")
        try:
            return self._executor.submit(self._run, work, *args, **kwargs)
        except BaseException:
            self._slots.release()
            raise

    def _run(self, work: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        # The slot is free again before the caller can see the result.
        try:
            return _logged(work, *args, **kwargs)
        finally:
            self._slots.release()

    def stop(self, wait: bool = True) -> None:
        self._executor.shutdown(wait=wait)


def _logged(work: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    try:
        return work(*args, **kwargs)
    except Exception:
        LOG.exception("background work %s failed", getattr(work, "__qualname__", work))
        raise


@dataclass(frozen=True)
class PeriodicTask:
    function: Callable[[], Any]
    spacing: float
    run_immediately: bool = False
    name: str = ""


class PeriodicTasks:
    def __init__(self, tasks: list[PeriodicTask], *, name: str = "periodic") -> None:
        callables = []
        for task in tasks:
            if task.spacing <= 0:
                continue  # a non-positive interval disables the task
            wrapped = periodics.periodic(task.spacing, run_immediately=task.run_immediately)(
                _named(task.function, task.name)
            )
            callables.append((wrapped, (), {}))
        self._worker = periodics.PeriodicWorker(callables, on_failure=_log_failure) if callables else None
        self._thread: threading.Thread | None = None
        self._name = name

    def start(self) -> PeriodicTasks:
        if self._worker is not None:
            self._thread = threading.Thread(target=self._worker.start, name=self._name, daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        if self._worker is not None and self._thread is not None:
            self._worker.stop()
            self._worker.wait()
            self._thread.join(timeout=10)


def _named(function: Callable[[], Any], name: str) -> Callable[[], Any]:
    def run() -> Any:
        return function()

    run.__name__ = run.__qualname__ = name or getattr(function, "__name__", "task")
    return run


def _log_failure(callable_: Any, kind: Any, exc: BaseException, traceback: Any, **_kw: Any) -> None:
    LOG.error("periodic task %s failed: %s", getattr(callable_, "__name__", callable_), exc)
