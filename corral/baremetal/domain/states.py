"""The provision state machine, as data.

``TRANSITIONS`` maps (state, event) to the next state, with upstream's
state and event names; :func:`machine` turns it into an automaton state
machine, which runs every transition.  ``TARGETS`` gives the target provision state a
transient state works towards; stable states have none.  API verbs map
to events through ``VERB_EVENTS``.
"""

from __future__ import annotations

import functools

from automaton import machines

from corral.core import statemachine

# Stable states
ENROLL = "enroll"
MANAGEABLE = "manageable"
AVAILABLE = "available"
ACTIVE = "active"
ERROR = "error"
RESCUE = "rescue"
# Transient (work in progress) states
VERIFYING = "verifying"
CLEANING = "cleaning"
DEPLOYING = "deploying"
DELETING = "deleting"
INSPECTING = "inspecting"
ADOPTING = "adopting"
RESCUING = "rescuing"
UNRESCUING = "unrescuing"
# Waiting states (the hardware works, the node is not locked)
CLEANWAIT = "clean wait"
DEPLOYWAIT = "wait call-back"
INSPECTWAIT = "inspect wait"
RESCUEWAIT = "rescue wait"
CLEANHOLD = "clean hold"
DEPLOYHOLD = "deploy hold"
# Servicing (1.87): steps run on a deployed node, which returns to active.
SERVICING = "servicing"
SERVICEWAIT = "service wait"
SERVICEHOLD = "service hold"
SERVICEFAIL = "service failed"
# Failure states
CLEANFAIL = "clean failed"
DEPLOYFAIL = "deploy failed"
INSPECTFAIL = "inspect failed"
ADOPTFAIL = "adopt failed"
RESCUEFAIL = "rescue failed"
UNRESCUEFAIL = "unrescue failed"

# Shown as "available" from 1.2; older clients knew it as no state at all.
NOSTATE = None

POWER_ON = "power on"
POWER_OFF = "power off"
REBOOT = "rebooting"
SOFT_POWER_OFF = "soft power off"
SOFT_REBOOT = "soft rebooting"

# (state, event) -> next state
TRANSITIONS: dict[tuple[str, str], str] = {
    (ENROLL, "manage"): VERIFYING,
    (VERIFYING, "done"): MANAGEABLE,
    (VERIFYING, "fail"): ENROLL,
    (MANAGEABLE, "provide"): CLEANING,
    (MANAGEABLE, "clean"): CLEANING,
    (MANAGEABLE, "inspect"): INSPECTING,
    (MANAGEABLE, "adopt"): ADOPTING,
    (CLEANING, "done"): AVAILABLE,
    (CLEANING, "manage"): MANAGEABLE,
    (CLEANING, "fail"): CLEANFAIL,
    (CLEANING, "wait"): CLEANWAIT,
    (CLEANING, "hold"): CLEANHOLD,
    (CLEANWAIT, "resume"): CLEANING,
    (CLEANWAIT, "fail"): CLEANFAIL,
    (CLEANWAIT, "abort"): CLEANFAIL,
    (CLEANWAIT, "hold"): CLEANHOLD,
    (CLEANHOLD, "unhold"): CLEANWAIT,
    (CLEANHOLD, "abort"): CLEANFAIL,
    (CLEANFAIL, "manage"): MANAGEABLE,
    (AVAILABLE, "deploy"): DEPLOYING,
    (AVAILABLE, "manage"): MANAGEABLE,
    (DEPLOYING, "done"): ACTIVE,
    (DEPLOYING, "wait"): DEPLOYWAIT,
    (DEPLOYING, "fail"): DEPLOYFAIL,
    (DEPLOYING, "hold"): DEPLOYHOLD,
    (DEPLOYWAIT, "resume"): DEPLOYING,
    (DEPLOYWAIT, "fail"): DEPLOYFAIL,
    (DEPLOYWAIT, "delete"): DELETING,
    (DEPLOYWAIT, "abort"): DEPLOYFAIL,
    (DEPLOYWAIT, "hold"): DEPLOYHOLD,
    (DEPLOYHOLD, "unhold"): DEPLOYWAIT,
    (DEPLOYHOLD, "abort"): DEPLOYFAIL,
    (DEPLOYFAIL, "deploy"): DEPLOYING,
    (DEPLOYFAIL, "rebuild"): DEPLOYING,
    (DEPLOYFAIL, "delete"): DELETING,
    (ACTIVE, "rebuild"): DEPLOYING,
    (ACTIVE, "delete"): DELETING,
    (ACTIVE, "rescue"): RESCUING,
    (DELETING, "clean"): CLEANING,
    (DELETING, "error"): ERROR,
    (ERROR, "rebuild"): DEPLOYING,
    (ERROR, "delete"): DELETING,
    (INSPECTING, "done"): MANAGEABLE,
    (INSPECTING, "fail"): INSPECTFAIL,
    (INSPECTING, "wait"): INSPECTWAIT,
    (INSPECTWAIT, "done"): MANAGEABLE,
    (INSPECTWAIT, "resume"): INSPECTING,
    (INSPECTWAIT, "fail"): INSPECTFAIL,
    (INSPECTWAIT, "abort"): INSPECTFAIL,
    (INSPECTFAIL, "manage"): MANAGEABLE,
    (INSPECTFAIL, "inspect"): INSPECTING,
    (ADOPTING, "done"): ACTIVE,
    (ADOPTING, "fail"): ADOPTFAIL,
    (ADOPTFAIL, "adopt"): ADOPTING,
    (ADOPTFAIL, "manage"): MANAGEABLE,
    (RESCUING, "done"): RESCUE,
    (RESCUING, "wait"): RESCUEWAIT,
    (RESCUING, "fail"): RESCUEFAIL,
    (RESCUEWAIT, "resume"): RESCUING,
    (RESCUEWAIT, "fail"): RESCUEFAIL,
    (RESCUEWAIT, "abort"): RESCUEFAIL,
    (RESCUEWAIT, "delete"): DELETING,
    (RESCUE, "rescue"): RESCUING,
    (RESCUE, "unrescue"): UNRESCUING,
    (RESCUE, "delete"): DELETING,
    (RESCUEFAIL, "rescue"): RESCUING,
    (RESCUEFAIL, "unrescue"): UNRESCUING,
    (RESCUEFAIL, "delete"): DELETING,
    (UNRESCUING, "done"): ACTIVE,
    (UNRESCUING, "fail"): UNRESCUEFAIL,
    (UNRESCUEFAIL, "rescue"): RESCUING,
    (UNRESCUEFAIL, "unrescue"): UNRESCUING,
    (UNRESCUEFAIL, "delete"): DELETING,
    (ACTIVE, "service"): SERVICING,
    (SERVICING, "done"): ACTIVE,
    (SERVICING, "fail"): SERVICEFAIL,
    (SERVICING, "wait"): SERVICEWAIT,
    (SERVICING, "hold"): SERVICEHOLD,
    (SERVICEWAIT, "resume"): SERVICING,
    (SERVICEWAIT, "fail"): SERVICEFAIL,
    (SERVICEWAIT, "abort"): SERVICEFAIL,
    (SERVICEWAIT, "hold"): SERVICEHOLD,
    (SERVICEWAIT, "delete"): DELETING,
    (SERVICEHOLD, "service"): SERVICING,
    (SERVICEHOLD, "unhold"): SERVICEWAIT,
    (SERVICEHOLD, "fail"): SERVICEFAIL,
    (SERVICEHOLD, "abort"): SERVICEFAIL,
    (SERVICEFAIL, "service"): SERVICING,
    (SERVICEFAIL, "rescue"): RESCUING,
    (SERVICEFAIL, "delete"): DELETING,
    (SERVICEFAIL, "abort"): ACTIVE,
}

# The target a transient state works towards, by (state left, event).
# Cleaning works towards manageable when started by "clean" (manual
# cleaning) and towards available otherwise (provide, tear-down).
TARGETS: dict[tuple[str, str], str] = {
    (ENROLL, "manage"): MANAGEABLE,
    (MANAGEABLE, "provide"): AVAILABLE,
    (MANAGEABLE, "clean"): MANAGEABLE,
    (DELETING, "clean"): AVAILABLE,
    (MANAGEABLE, "inspect"): MANAGEABLE,
    (INSPECTFAIL, "inspect"): MANAGEABLE,
    (MANAGEABLE, "adopt"): ACTIVE,
    (ADOPTFAIL, "adopt"): ACTIVE,
    (AVAILABLE, "deploy"): ACTIVE,
    (DEPLOYFAIL, "deploy"): ACTIVE,
    (DEPLOYFAIL, "rebuild"): ACTIVE,
    (ACTIVE, "rebuild"): ACTIVE,
    (ERROR, "rebuild"): ACTIVE,
    (ACTIVE, "delete"): AVAILABLE,
    (DEPLOYFAIL, "delete"): AVAILABLE,
    (DEPLOYWAIT, "delete"): AVAILABLE,
    (ERROR, "delete"): AVAILABLE,
    (RESCUE, "delete"): AVAILABLE,
    (RESCUEWAIT, "delete"): AVAILABLE,
    (RESCUEFAIL, "delete"): AVAILABLE,
    (UNRESCUEFAIL, "delete"): AVAILABLE,
    (ACTIVE, "rescue"): RESCUE,
    (RESCUE, "rescue"): RESCUE,
    (RESCUEFAIL, "rescue"): RESCUE,
    (UNRESCUEFAIL, "rescue"): RESCUE,
    (RESCUE, "unrescue"): ACTIVE,
    (RESCUEFAIL, "unrescue"): ACTIVE,
    (UNRESCUEFAIL, "unrescue"): ACTIVE,
    (ACTIVE, "service"): ACTIVE,
    (SERVICEHOLD, "service"): ACTIVE,
    (SERVICEFAIL, "service"): ACTIVE,
    (SERVICEWAIT, "delete"): AVAILABLE,
    (SERVICEFAIL, "delete"): AVAILABLE,
    (SERVICEFAIL, "rescue"): RESCUE,
}

STABLE_STATES = frozenset({ENROLL, MANAGEABLE, AVAILABLE, ACTIVE, ERROR, RESCUE})
# States in which a conductor is working on the node (it holds the lock).
WORKING_STATES = frozenset({VERIFYING, CLEANING, DEPLOYING, DELETING, INSPECTING, ADOPTING, RESCUING, UNRESCUING,
                            SERVICING})
WAITING_STATES = frozenset({CLEANWAIT, DEPLOYWAIT, INSPECTWAIT, RESCUEWAIT, CLEANHOLD, DEPLOYHOLD, SERVICEWAIT,
                            SERVICEHOLD})
FAILURE_STATES = frozenset({CLEANFAIL, DEPLOYFAIL, INSPECTFAIL, ADOPTFAIL, RESCUEFAIL, UNRESCUEFAIL, SERVICEFAIL})
# Where work interrupted by a conductor's death ends up.
INTERRUPTED = {
    VERIFYING: ENROLL,
    CLEANING: CLEANFAIL,
    DEPLOYING: DEPLOYFAIL,
    DELETING: ERROR,
    INSPECTING: INSPECTFAIL,
    ADOPTING: ADOPTFAIL,
    RESCUING: RESCUEFAIL,
    UNRESCUING: UNRESCUEFAIL,
    SERVICING: SERVICEFAIL,
}

# API verbs (PUT .../states/provision "target") -> events.
VERB_EVENTS = {
    "active": "deploy",
    "deploy": "deploy",
    "deleted": "delete",
    "undeploy": "delete",
    "manage": "manage",
    "provide": "provide",
    "inspect": "inspect",
    "abort": "abort",
    "clean": "clean",
    "adopt": "adopt",
    "rebuild": "rebuild",
    "rescue": "rescue",
    "unrescue": "unrescue",
    "unhold": "unhold",
    "service": "service",
}

# Node fields may change freely only in these states (PATCH rules).
UPDATE_ALLOWED_STATES = STABLE_STATES | FAILURE_STATES | {CLEANWAIT, CLEANHOLD, DEPLOYHOLD, SERVICEWAIT,
                                                           SERVICEHOLD}
# Deleting a node is refused in these states (unless in maintenance).
DELETE_ALLOWED_STATES = frozenset({ENROLL, MANAGEABLE, AVAILABLE, CLEANFAIL, INSPECTFAIL, ADOPTFAIL, ERROR})


@functools.cache
def machine() -> machines.FiniteMachine:
    """The transition table as an automaton state machine (built once, frozen)."""
    return statemachine.build(TRANSITIONS)


def next_state(state: str, event: str) -> str | None:
    return statemachine.step(machine(), state, event)


def target_for(old_state: str, event: str, new_state: str, current_target: str | None) -> str | None:
    """The target provision state after ``event`` moved the node from ``old_state`` to ``new_state``."""
    if new_state in STABLE_STATES:
        return None
    if (old_state, event) in TARGETS:
        return TARGETS[(old_state, event)]
    # Waiting, resuming and failing keep the target the work had.
    return current_target


def is_transient(state: str) -> bool:
    return state in WORKING_STATES


def events_from(state: str) -> list[str]:
    return sorted(event for (source, event) in TRANSITIONS if source == state)
