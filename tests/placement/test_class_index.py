"""A class index patched change by change answers as one built whole."""

from __future__ import annotations

import random

import pytest

from corral.placement.db import topology_cache
from corral.placement.db.topology_cache import _patched_index
from corral.placement.domain.class_index import ClassIndex, InventoryRow, class_index

NO_SHARING: frozenset[int] = frozenset()


def _row(rng: random.Random) -> InventoryRow:
    # (capacity, used, min_unit, max_unit, step_size)
    return (float(rng.randrange(0, 64)), 0, 1, rng.randrange(1, 64), rng.choice([1, 1, 1, 2]))


def _whole(rows: dict[int, InventoryRow]) -> ClassIndex:
    return class_index(rows, {rp: rp for rp in rows}, NO_SHARING, {})


def _patch(index: ClassIndex, rows: dict[int, InventoryRow], changes: dict[int, InventoryRow | None]) -> ClassIndex:
    """Apply ``changes`` to ``rows`` (in place, as a catch-up does) and to ``index``."""
    before = {rp: rows[rp] for rp in changes if rp in rows}
    for rp, row in changes.items():
        if row is None:
            rows.pop(rp, None)
        else:
            rows[rp] = row
    root_of = {rp: rp for rp in rows}
    old_root_of = {**root_of, **{rp: rp for rp in before}}
    return _patched_index(index, rows, before, changes, old_root_of, root_of)


def _same_answers(index: ClassIndex, rows: dict[int, InventoryRow]) -> None:
    whole = _whole(rows)
    assert index.ordered() == whole.ordered()
    for amount in (0, 1, 2, 7, 31, 32, 33, 63, 64, 1000):
        assert index.below(amount) == whole.below(amount), amount
    assert sorted(index.special) == sorted(whole.special)
    assert {root: sorted(found) for root, found in index.by_anchor.items()} == {
        root: sorted(found) for root, found in whole.by_anchor.items()
    }


@pytest.mark.parametrize("seed", range(5))
def test_patched_indexes_answer_as_indexes_built_whole(seed: int) -> None:
    rng = random.Random(seed)
    rows = {rp: _row(rng) for rp in range(1, 301)}
    index = _whole(rows)
    next_id = 301
    for _step in range(120):
        changes: dict[int, InventoryRow | None] = {}
        for _change in range(rng.randrange(1, 6)):
            kind = rng.random()
            if kind < 0.15 and rows:
                changes[rng.choice(list(rows))] = None  # the provider leaves the class
            elif kind < 0.3:
                changes[next_id] = _row(rng)  # a provider joins it
                next_id += 1
            else:
                changes[rng.choice(list(rows))] = _row(rng)
        index = _patch(index, rows, changes)
        _same_answers(index, rows)


def test_an_old_index_keeps_its_answers_after_a_patch() -> None:
    rows = {1: (4.0, 0, 1, 4, 1), 2: (8.0, 0, 1, 8, 1)}
    old = _whole(rows)
    new = _patch(old, dict(rows), {1: (16.0, 0, 1, 16, 1), 3: (2.0, 0, 1, 2, 1), 2: None})
    assert old.below(5) == {1} and old.below(9) == {1, 2}
    assert new.below(5) == {3} and new.below(17) == {1, 3}
    # The sorted lists are shared, not copied.
    assert new.limits is old.limits and new.limited is old.limited


def test_many_changed_limits_are_sorted_into_new_lists(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(topology_cache, "MIN_CHANGED_LIMITS", 4)
    rng = random.Random(7)
    rows = {rp: _row(rng) for rp in range(1, 51)}
    index = _whole(rows)
    for rp in range(1, 5):
        index = _patch(index, rows, {rp: _row(rng)})
    assert len(index.changed) == 4
    kept = index
    index = _patch(index, rows, {5: _row(rng)})
    assert index.changed == {} and index.limits is not kept.limits
    _same_answers(index, rows)
