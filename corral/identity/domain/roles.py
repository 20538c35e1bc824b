"""Implied roles: a role brings every role it implies, transitively."""

from __future__ import annotations

from collections.abc import Iterable, Mapping


def expand(direct: Iterable[str], implies: Mapping[str, Iterable[str]]) -> list[str]:
    """``direct`` role ids followed by the ones they imply, each once, in discovery order."""
    seen: list[str] = []
    pending = list(direct)
    while pending:
        role = pending.pop(0)
        if role in seen:
            continue
        seen.append(role)
        pending.extend(implies.get(role, ()))
    return seen


def creates_cycle(prior: str, implied: str, implies: Mapping[str, Iterable[str]]) -> bool:
    """Whether adding ``prior -> implied`` would let a role imply itself."""
    return prior == implied or prior in expand([implied], implies)
