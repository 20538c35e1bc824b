"""The scatter-gather over cells: results, failures, timeouts, and fast answers for cells that just failed."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa

from corral.compute.cells import DID_NOT_RESPOND, CellMapping, CellRecentlyDown, CellRegistry, is_failure
from corral.core import metrics
from tests.compute.conftest import ComputeServer

# Nothing listens there: connecting is refused at once.
UNREACHABLE = "postgresql+psycopg://postgres@127.0.0.1:1/corral_cell_down"


def _reach_nothing() -> None:
    """Raise the error a cell whose database refuses connections raises."""
    engine = sa.create_engine(UNREACHABLE, poolclass=sa.pool.NullPool)
    try:
        with engine.connect():
            pass
    finally:
        engine.dispose()


@pytest.fixture
def registry(cloud: ComputeServer) -> Iterator[CellRegistry]:
    conf = cloud.conf
    conf.set_override("timeout", 0.5, group="cells")
    conf.set_override("down_cell_recheck_interval", 60.0, group="cells")
    cells = CellRegistry(conf, cloud.state.api_db)
    yield cells
    cells.close()
    conf.clear_override("timeout", group="cells")
    conf.clear_override("down_cell_recheck_interval", group="cells")


def _cell_metric(name: str, cell: str) -> float:
    return metrics.REGISTRY.get_sample_value(name, {"cell": cell}) or 0.0


def test_results_errors_and_timeouts_per_cell(registry: CellRegistry) -> None:
    release = threading.Event()
    calls: list[str] = []
    counted = ("corral_compute_cell_failures_total", "corral_compute_cell_timeouts_total",
               "corral_compute_cell_skipped_total")
    before = {(name, cell): _cell_metric(name, cell) for name in counted for cell in ("cell0", "cell1", "cell2")}

    def more(name: str, cell: str) -> float:
        return _cell_metric(name, cell) - before[(name, cell)]

    def work(cell: CellMapping, _database: Any) -> str:
        calls.append(cell.name or "")
        if cell.name == "cell1":
            _reach_nothing()
        if cell.name == "cell2":
            release.wait(5)
        return f"hello from {cell.name}"

    cells = registry.mappings()
    answers = registry.scatter_gather(cells, work)
    by_name = {cell.name: answers[cell.uuid] for cell in cells}
    assert by_name["cell0"] == "hello from cell0"
    assert isinstance(by_name["cell1"], sa.exc.OperationalError)
    assert by_name["cell2"] is DID_NOT_RESPOND
    assert is_failure(by_name["cell1"]) and is_failure(by_name["cell2"]) and not is_failure(by_name["cell0"])
    assert more("corral_compute_cell_failures_total", "cell1") == 1
    assert more("corral_compute_cell_timeouts_total", "cell2") == 1
    assert more("corral_compute_cell_failures_total", "cell0") == more("corral_compute_cell_timeouts_total", "cell0") == 0
    assert [_cell_metric("corral_compute_cell_up", cell) for cell in ("cell0", "cell1", "cell2")] == [1, 0, 0]

    # Both failed cells are answered at once now, without running the work again.
    calls.clear()
    again = registry.scatter_gather(cells, work)
    assert calls == ["cell0"]
    assert all(isinstance(again[cell.uuid], CellRecentlyDown) for cell in cells if cell.name != "cell0")
    assert registry.is_recently_down(next(c for c in cells if c.name == "cell1"))
    assert more("corral_compute_cell_skipped_total", "cell1") == more("corral_compute_cell_skipped_total", "cell2") == 1
    release.set()

    # Once the failures are forgotten (or the interval passed), the cells are asked again.
    registry.forget_failures()
    calls.clear()
    healed = registry.scatter_gather(cells, lambda cell, _db: cell.name)
    assert {cell.name: healed[cell.uuid] for cell in cells} == {"cell0": "cell0", "cell1": "cell1", "cell2": "cell2"}
    assert [_cell_metric("corral_compute_cell_up", cell) for cell in ("cell0", "cell1", "cell2")] == [1, 1, 1]


def test_run_in_cell_raises_failures(registry: CellRegistry) -> None:
    cell = registry.mappings()[1]
    assert registry.run_in_cell(cell, lambda c, _db: c.uuid) == cell.uuid

    def broken(_cell: CellMapping, _db: Any) -> None:
        _reach_nothing()

    with pytest.raises(sa.exc.OperationalError):
        registry.run_in_cell(cell, broken)
    with pytest.raises(CellRecentlyDown):
        registry.run_in_cell(cell, lambda c, _db: c.uuid)


def _refused_value(backend: str) -> tuple[str, dict[str, Any], type[BaseException]]:
    """A statement and a value the backend refuses, and the error it raises."""
    if backend == "postgresql":
        return "SELECT CAST(:value AS TEXT)", {"value": "a\x00b"}, sa.exc.DataError
    if backend == "mysql":
        # PyMySQL reports this one as an OperationalError.
        return "SELECT CAST(:value AS UNSIGNED) + 1", {"value": 18446744073709551615}, sa.exc.OperationalError
    return "SELECT :value", {"value": 2**64}, OverflowError


def test_a_request_error_is_raised_and_never_marks_a_cell_down(registry: CellRegistry, backend: str) -> None:
    statement, params, error_type = _refused_value(backend)
    calls: list[str] = []

    def work(cell: CellMapping, database: Any) -> str:
        calls.append(cell.name or "")
        if cell.name == "cell1":
            with database.read() as conn:
                conn.execute(sa.text(statement), params)
        return f"hello from {cell.name}"

    cells = registry.mappings()
    with pytest.raises(error_type):
        registry.scatter_gather(cells, work)
    assert not any(registry.is_recently_down(cell) for cell in cells)

    # Every cell is asked again at once and answers: nothing was remembered.
    calls.clear()
    answers = registry.scatter_gather(cells, lambda cell, _db: (calls.append(cell.name or ""), cell.name)[1])
    assert sorted(calls) == ["cell0", "cell1", "cell2"]
    assert {cell.name: answers[cell.uuid] for cell in cells} == {"cell0": "cell0", "cell1": "cell1", "cell2": "cell2"}


def test_a_bug_in_a_cell_task_is_the_requests_error(registry: CellRegistry) -> None:
    cell = registry.mappings()[1]

    def broken(_cell: CellMapping, _db: Any) -> None:
        raise ValueError("nope")

    with pytest.raises(ValueError):
        registry.run_in_cell(cell, broken)
    assert not registry.is_recently_down(cell)
    assert registry.run_in_cell(cell, lambda c, _db: c.uuid) == cell.uuid
