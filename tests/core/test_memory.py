"""Large long-lived builds are moved out of the cyclic collector's way."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from corral.core import memory


@pytest.fixture
def unfrozen() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()


class Node:
    pass


def test_a_large_build_is_frozen_and_a_small_one_is_not(unfrozen) -> None:
    assert memory.settle(9, large=10) is False
    assert gc.get_freeze_count() == 0
    built = [Node() for _ in range(10)]
    assert memory.settle(len(built), large=10) is True
    assert gc.get_freeze_count() > 0


def test_garbage_alive_before_settling_is_collected_not_frozen(unfrozen) -> None:
    cycle = Node()
    cycle.self = cycle  # type: ignore[attr-defined]
    gone = weakref.ref(cycle)
    del cycle
    memory.settle(1, large=1)
    assert gone() is None


def test_frozen_objects_are_still_freed_when_dropped(unfrozen) -> None:
    kept = Node()
    alive = weakref.ref(kept)
    memory.settle(1, large=1)
    del kept
    assert alive() is None
