"""Cleaning logic without HTTP: the clean_step decorator and aborting a step that is not abortable."""

from __future__ import annotations

from typing import Any

import pytest

from corral.baremetal.conductor import cleaning
from corral.baremetal.domain import states
from corral.baremetal.drivers.base import ASYNC, BaseInterface, clean_step


class _Conf:
    class conductor:  # noqa: N801 - mirrors the option group's name
        automated_clean = True


class SlowManagement(BaseInterface):
    interface_type = "management"
    name = "slow"
    finished = False

    @clean_step(priority=0)
    def long_update(self, task: Any) -> str:
        return ASYNC

    @clean_step(priority=0, argsinfo={"level": {"description": "How much.", "required": False}})
    def quick(self, task: Any, level: int = 1) -> None:
        task.ran.append(f"quick:{level}")

    def poll_step(self, task: Any, step: Any) -> bool:
        return self.finished


class _Nothing(BaseInterface):
    pass


class StubDriver:
    def __init__(self) -> None:
        self.management = SlowManagement(_Conf)
        for name in ("vendor", "power", "firmware", "deploy", "bios", "raid"):
            setattr(self, name, _Nothing(_Conf))


class StubTask:
    """A task on an in-memory node; state changes follow the real transition table."""

    def __init__(self) -> None:
        self.node: dict[str, Any] = {
            "uuid": "1be26c0e-0000-4000-8000-000000000000", "provision_state": states.CLEANING,
            "target_provision_state": states.MANAGEABLE, "clean_step": {}, "driver_internal_info": {},
            "last_error": None, "automated_clean": None,
        }
        self.driver = StubDriver()
        self.ran: list[str] = []

        class _Conductor:
            conf = _Conf

        self.conductor = _Conductor

    @property
    def internal_info(self) -> dict[str, Any]:
        return dict(self.node["driver_internal_info"])

    def update(self, **values: Any) -> None:
        self.node.update(values)

    def process_event(self, event: str, **values: Any) -> str:
        current = self.node["provision_state"]
        new = states.next_state(current, event)
        assert new is not None, (current, event)
        target = states.target_for(current, event, new, self.node["target_provision_state"])
        self.node.update(provision_state=new, target_provision_state=target, **values)
        return new


def test_abort_of_a_step_that_is_not_abortable_waits_for_it() -> None:
    task = StubTask()
    cleaning.start_manual(task, [{"interface": "management", "step": "long_update"},
                                 {"interface": "management", "step": "quick", "args": {"level": 2}}])
    assert task.node["provision_state"] == states.CLEANWAIT
    assert cleaning.request_abort(task) is False
    assert task.node["clean_step"]["abort_after"] is True
    assert task.node["provision_state"] == states.CLEANWAIT
    assert cleaning.poll_waiting(task) is False  # still running
    task.driver.management.finished = True
    assert cleaning.poll_waiting(task) is True
    assert task.node["provision_state"] == states.CLEANFAIL
    assert task.node["last_error"] == (
        'By request, the clean operation was aborted after the completion of step "long_update"'
    )
    assert task.ran == []  # the step after it never ran
    assert task.node["driver_internal_info"]["clean_steps"] is None


def test_finished_async_step_resumes_with_the_next() -> None:
    task = StubTask()
    cleaning.start_manual(task, [{"interface": "management", "step": "long_update"},
                                 {"interface": "management", "step": "quick"}])
    task.driver.management.finished = True
    assert cleaning.poll_waiting(task) is True
    assert task.node["provision_state"] == states.MANAGEABLE
    assert task.ran == ["quick:1"]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"priority": -1},
        {"priority": "high"},
        {"priority": 0, "abortable": "yes"},
        {"priority": 0, "argsinfo": ["settings"]},
        {"priority": 0, "argsinfo": {"settings": {"required": True}}},
        {"priority": 0, "argsinfo": {"settings": {"description": "x", "required": "yes"}}},
        {"priority": 0, "argsinfo": {"settings": {"description": "x", "default": 1}}},
    ],
)
def test_clean_step_rejects_bad_declarations(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        clean_step(**kwargs)


def test_clean_steps_describe_themselves() -> None:
    steps = {step["step"]: step for step in SlowManagement(_Conf).clean_steps()}
    assert steps["quick"] == {
        "step": "quick", "priority": 0, "abortable": False, "interface": "management", "requires_ramdisk": True,
        "argsinfo": {"level": {"description": "How much.", "required": False}},
    }
