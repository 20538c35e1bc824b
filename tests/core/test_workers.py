"""Bounded worker pools and periodic tasks."""

from __future__ import annotations

import threading

import pytest

from corral.core.workers import PeriodicTask, PeriodicTasks, PoolFull, WorkerPool


def test_pool_refuses_work_beyond_its_size() -> None:
    pool = WorkerPool(2, name="test")
    release = threading.Event()
    started = threading.Barrier(3)

    def block() -> str:
        started.wait(timeout=5)
        release.wait(timeout=5)
        return "done"

    futures = [pool.submit(block), pool.submit(block)]
    started.wait(timeout=5)
    with pytest.raises(PoolFull):
        pool.submit(block)
    release.set()
    assert [future.result(timeout=5) for future in futures] == ["done", "done"]
    assert pool.submit(lambda: 7).result(timeout=5) == 7
    pool.stop()


def test_periodic_tasks_run_and_survive_failures() -> None:
    runs: list[str] = []
    enough = threading.Event()

    def flaky() -> None:
        runs.append("flaky")
        if len(runs) >= 3:
            enough.set()
        raise RuntimeError("keeps going")

    tasks = PeriodicTasks([PeriodicTask(flaky, 0.01, run_immediately=True, name="flaky"),
                           PeriodicTask(lambda: runs.append("never"), 0)]).start()
    try:
        assert enough.wait(timeout=10)
    finally:
        tasks.stop()
    assert "never" not in runs and runs.count("flaky") >= 3
