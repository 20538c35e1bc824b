"""Tables of transitions run by automaton."""

from __future__ import annotations

from corral.core import statemachine


def test_step_follows_the_table_and_refuses_the_rest() -> None:
    machine = statemachine.build({("enroll", "manage"): "verifying", ("verifying", "done"): "manageable"})
    assert statemachine.step(machine, "enroll", "manage") == "verifying"
    assert statemachine.step(machine, "verifying", "done") == "manageable"
    assert statemachine.step(machine, "enroll", "done") is None
    assert statemachine.step(machine, "unknown", "manage") is None
    assert statemachine.step(machine, None, "manage") is None
    # The shared machine is never moved by a step.
    assert statemachine.step(machine, "enroll", "manage") == "verifying"
