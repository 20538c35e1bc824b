"""The providers of one resource class, sorted by the most they can give.

No search over a whole cloud looks at every provider: it asks the index
for the few that cannot give the amount, and takes the rest.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

# (capacity as a float, used, min_unit, max_unit, step_size)
InventoryRow = tuple[float, int, int, int, int]


@dataclass
class ClassIndex:
    """Where the providers of one resource class can serve, usage aside.

    Built once per topology snapshot and class, so that a search over the
    whole cloud only looks at the providers that cannot give the amount
    asked (few, usually) instead of every provider.

    A later snapshot shares the sorted lists and records the providers
    whose limit changed since in ``changed``, instead of copying lists of
    every provider for each change: their entries in the lists are stale.
    """

    # anchor root -> providers of the class usable there (its tree's and
    # sharing providers'); never modified
    by_anchor: dict[int, list[int]]
    # min(capacity, max_unit) in ascending order, and the providers in that order
    limits: list[float]
    limited: list[int]
    # providers whose min_unit or step_size is not 1
    special: list[int]
    # provider -> its limit now (None: it has left the class), where it
    # differs from what the lists say; never modified
    changed: dict[int, float | None] = field(default_factory=dict)

    def below(self, amount: float) -> set[int]:
        """The providers whose limit is under ``amount``."""
        found = self.limited[: bisect.bisect_left(self.limits, amount)]
        changed = self.changed
        if not changed:
            return set(found)
        below = {rp for rp in found if rp not in changed}
        below.update(rp for rp, limit in changed.items() if limit is not None and limit < amount)
        return below

    def ordered(self) -> list[tuple[float, int]]:
        """(limit, provider) of every provider of the class, in ascending order."""
        changed = self.changed
        pairs = [(limit, rp) for limit, rp in zip(self.limits, self.limited) if rp not in changed]
        pairs += [(limit, rp) for rp, limit in changed.items() if limit is not None]
        pairs.sort()
        return pairs


def inventory_limit(row: InventoryRow) -> float:
    """The most one allocation can take from ``row``: its capacity or max_unit."""
    return min(row[0], row[3])


def is_special(row: InventoryRow) -> bool:
    """Whether ``row``'s min_unit or step_size rules out some amounts below its limit."""
    return row[2] != 1 or row[4] != 1


def sorted_limits(rows: dict[int, InventoryRow]) -> tuple[list[float], list[int]]:
    """The limits of ``rows`` in ascending order, and their providers in that order."""
    ordered = sorted((inventory_limit(row), rp) for rp, row in rows.items())
    return [limit for limit, _rp in ordered], [rp for _limit, rp in ordered]


def class_index(
    rows: dict[int, InventoryRow], root_of: dict[int, int], sharing: frozenset[int], anchors_of: dict[int, frozenset[int]]
) -> ClassIndex:
    by_anchor: dict[int, list[int]] = {}
    for rp in rows:
        root = root_of[rp]
        found = by_anchor.get(root)
        if found is None:
            by_anchor[root] = [rp]
        else:
            found.append(rp)
        if rp in sharing:
            for anchor in anchors_of.get(rp, ()):
                if anchor != root:
                    by_anchor.setdefault(anchor, []).append(rp)
    limits, limited = sorted_limits(rows)
    special = [rp for rp, row in rows.items() if is_special(row)]
    return ClassIndex(by_anchor=by_anchor, limits=limits, limited=limited, special=special)
