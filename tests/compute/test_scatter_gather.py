"""The scatter-gather over cells: results, failures, timeouts, and fast answers for cells that just failed."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from corral.compute.cells import DID_NOT_RESPOND, CellMapping, CellRecentlyDown, CellRegistry, is_failure
from tests.compute.conftest import ComputeServer


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


def test_results_errors_and_timeouts_per_cell(registry: CellRegistry) -> None:
    release = threading.Event()
    calls: list[str] = []

    def work(cell: CellMapping, _database: Any) -> str:
        calls.append(cell.name or "")
        if cell.name == "cell1":
            raise RuntimeError("cell1 is broken")
        if cell.name == "cell2":
            release.wait(5)
        return f"hello from {cell.name}"

    cells = registry.mappings()
    answers = registry.scatter_gather(cells, work)
    by_name = {cell.name: answers[cell.uuid] for cell in cells}
    assert by_name["cell0"] == "hello from cell0"
    assert isinstance(by_name["cell1"], RuntimeError)
    assert by_name["cell2"] is DID_NOT_RESPOND
    assert is_failure(by_name["cell1"]) and is_failure(by_name["cell2"]) and not is_failure(by_name["cell0"])

    # Both failed cells are answered at once now, without running the work again.
    calls.clear()
    again = registry.scatter_gather(cells, work)
    assert calls == ["cell0"]
    assert all(isinstance(again[cell.uuid], CellRecentlyDown) for cell in cells if cell.name != "cell0")
    assert registry.is_recently_down(next(c for c in cells if c.name == "cell1"))
    release.set()

    # Once the failures are forgotten (or the interval passed), the cells are asked again.
    registry.forget_failures()
    calls.clear()
    healed = registry.scatter_gather(cells, lambda cell, _db: cell.name)
    assert {cell.name: healed[cell.uuid] for cell in cells} == {"cell0": "cell0", "cell1": "cell1", "cell2": "cell2"}


def test_run_in_cell_raises_failures(registry: CellRegistry) -> None:
    cell = registry.mappings()[1]
    assert registry.run_in_cell(cell, lambda c, _db: c.uuid) == cell.uuid

    def broken(_cell: CellMapping, _db: Any) -> None:
        raise ValueError("nope")

    with pytest.raises(ValueError):
        registry.run_in_cell(cell, broken)
    with pytest.raises(CellRecentlyDown):
        registry.run_in_cell(cell, lambda c, _db: c.uuid)
