"""State machines written as data tables, run by automaton.

A service writes its machine as ``{(state, event): next_state}``;
:func:`build` turns that table into a frozen automaton machine and
:func:`step` asks it where an event leads.
"""

from __future__ import annotations

from collections.abc import Mapping

from automaton import exceptions as automaton_errors
from automaton import machines


def build(transitions: Mapping[tuple[str, str], str]) -> machines.FiniteMachine:
    machine = machines.FiniteMachine()
    for state in sorted({state for (source, _event), target in transitions.items() for state in (source, target)}):
        machine.add_state(state)
    for (source, event), target in transitions.items():
        machine.add_transition(source, target, event)
    machine.freeze()
    return machine


def step(machine: machines.FiniteMachine, state: str | None, event: str) -> str | None:
    """The state ``event`` leads to from ``state``; None when the table has no such transition."""
    if state is None or state not in machine:
        return None
    running = machine.copy()
    running.initialize(state)
    try:
        running.process_event(event)
    except automaton_errors.NotFound:
        return None
    return running.current_state
