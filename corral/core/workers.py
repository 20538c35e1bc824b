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
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import futurist
from futurist import periodics

from corral.core import metrics
LOG = logging.getLogger(__name__)


class PoolFull(Exception):
    """Every worker is busy and the backlog is full."""


class WorkerPool:
    """At most ``size`` tasks run and ``backlog`` more wait; beyond that, PoolFull."""

    def __init__(self, size: int, *, backlog: int = 0, name: str = "workers",
                 meter: metrics.PoolMeter | None = None) -> None:
        self.size = size
        self.name = name
        self._meter = meter
        # Counts running plus queued tasks; the executor's own backlog check
        # would also count a task that is queued only until an idle worker
        # picks it up.
        self._slots = threading.BoundedSemaphore(size + backlog)
        self._executor = futurist.ThreadPoolExecutor(max_workers=size)

    def submit(self, work: Callable[..., Any], *args: Any, **kwargs: Any) -> Future[Any]:
        meter = self._meter
        if not self._slots.acquire(blocking=False):
            if meter is not None:
                meter.refused.inc()
            raise PoolFull(f"{self.name}: all {self.size} workers are busy")
        if meter is not None:
            meter.waiting.inc()  # (before the task can start and take itself off)
        try:
            future = self._executor.submit(self._run, work, *args, **kwargs)
        except BaseException:
            if meter is not None:
                meter.waiting.dec()
            self._slots.release()
            raise
        if meter is not None:
            meter.started.inc()
        return future

    def _run(self, work: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        meter = self._meter
        if meter is not None:
            meter.waiting.dec()
            meter.running.inc()
        # The slot is free again before the caller can see the result.
        try:
            return _logged(work, *args, **kwargs)
        finally:
            if meter is not None:
                meter.running.dec()
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
    """``function`` under ``name``, its runs and failures counted (corral.core.metrics)."""
    name = name or getattr(function, "__name__", "task")
    runs, failures = metrics.PERIODIC_RUNS.labels(name), metrics.PERIODIC_FAILURES.labels(name)
    duration = metrics.PERIODIC_DURATION.labels(name)

    def run() -> Any:
        started = time.perf_counter()
        try:
            return function()
        except BaseException:
            failures.inc()
            raise
        finally:
            runs.inc()
            duration.observe(time.perf_counter() - started)

    run.__name__ = run.__qualname__ = name
    return run


def _log_failure(callable_: Any, kind: Any, exc: BaseException, traceback: Any, **_kw: Any) -> None:
    LOG.error("periodic task %s failed: %s", getattr(callable_, "__name__", callable_), exc)
