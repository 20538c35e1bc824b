"""Driver interfaces, hardware types and the ``clean_step`` decorator.

A hardware type (``fake-hardware``, ``redfish``) names, per interface type
(power, management, bios ...), the interface implementations it supports
and its default.  An interface implementation is a class; methods
decorated with :func:`clean_step` are its clean steps.

A clean step returns ``None`` when it finished, or :data:`ASYNC` when it
keeps running on the hardware: the node then waits in ``clean wait`` and
the conductor asks the interface's :meth:`BaseInterface.poll_step` until
it reports the step done (or failed).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

# Every interface type a node has, as upstream names them.
INTERFACE_TYPES = (
    "bios",
    "boot",
    "console",
    "deploy",
    "firmware",
    "inspect",
    "management",
    "network",
    "power",
    "raid",
    "rescue",
    "storage",
    "vendor",
)

# Interface types that may carry clean steps (upstream's list, in its order).
CLEANING_INTERFACE_PRIORITY = {
    # When two steps have the same priority, this order decides (higher first).
    "vendor": 6,
    "power": 5,
    "management": 4,
    "firmware": 7,
    "deploy": 3,
    "bios": 2,
    "raid": 1,
}
CLEAN_STEP_INTERFACES = ("vendor", "power", "management", "firmware", "deploy", "bios", "raid")

# Returned by a step that goes on running after the call returns.
ASYNC = "async"


class DriverError(Exception):
    """A driver could not do what it was asked; the message is user-facing."""


class InvalidParameterValue(DriverError):
    """Arguments or driver_info the interface cannot use."""


class MissingParameterValue(DriverError):
    """Required driver_info is absent."""


class StepsNotAvailable(DriverError):
    """The interface cannot list its steps yet (the API answers 202 and asks to retry)."""

    def __init__(self, message: str, retry_after: int = -1) -> None:
        super().__init__(message)
        self.retry_after = retry_after


@dataclass(frozen=True)
class StepInfo:
    priority: int
    abortable: bool
    argsinfo: Mapping[str, Mapping[str, Any]]
    requires_ramdisk: bool


def _check_argsinfo(argsinfo: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
    """argsinfo maps each argument name to {"description": str, "required": bool}."""
    if argsinfo is None:
        return {}
    if not isinstance(argsinfo, Mapping):
        raise ValueError("argsinfo must be a dictionary keyed by argument name")
    checked: dict[str, dict[str, Any]] = {}
    for name, info in argsinfo.items():
        if not isinstance(info, Mapping):
            raise ValueError(f"argsinfo entry {name!r} must be a dictionary")
        description = info.get("description")
        if not isinstance(description, str) or not description:
            raise ValueError(f"argsinfo entry {name!r} needs a non-empty 'description'")
        required = info.get("required", False)
        if not isinstance(required, bool):
            raise ValueError(f"argsinfo entry {name!r}: 'required' must be a boolean")
        unknown = set(info) - {"description", "required"}
        if unknown:
            raise ValueError(f"argsinfo entry {name!r} has unknown keys: {', '.join(sorted(unknown))}")
        checked[name] = {"description": description, "required": required}
    return checked


def clean_step(
    priority: int,
    abortable: bool = False,
    argsinfo: Mapping[str, Mapping[str, Any]] | None = None,
    requires_ramdisk: bool = True,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Mark an interface method as a clean step.

    ``priority`` 0 makes it a manual-only step; higher priorities run in
    automated cleaning, highest first.  ``abortable`` steps may be aborted
    while they run.  ``argsinfo`` describes the keyword arguments a manual
    clean request may pass: ``{"name": {"description": ..., "required": bool}}``.
    """
    if not isinstance(priority, int) or isinstance(priority, bool) or priority < 0:
        raise ValueError("clean step priority must be a non-negative integer")
    if not isinstance(abortable, bool):
        raise ValueError("abortable must be a boolean")
    info = StepInfo(priority, abortable, _check_argsinfo(argsinfo), requires_ramdisk)

    def mark(function: Callable[..., Any]) -> Callable[..., Any]:
        function._clean_step = info  # type: ignore[attr-defined]
        return function

    return mark


def service_step(
    priority: int = 0,
    abortable: bool = False,
    argsinfo: Mapping[str, Mapping[str, Any]] | None = None,
    requires_ramdisk: bool = True,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Mark an interface method as a service step (run on a deployed node by the ``service`` verb)."""
    info = StepInfo(priority, abortable, _check_argsinfo(argsinfo), requires_ramdisk)

    def mark(function: Callable[..., Any]) -> Callable[..., Any]:
        function._service_step = info  # type: ignore[attr-defined]
        return function

    return mark


def deploy_step(
    priority: int, argsinfo: Mapping[str, Mapping[str, Any]] | None = None
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Mark an interface method as a deploy step.

    Steps with a priority above zero run on every deployment, highest
    first; priority 0 steps run only when a deploy template or the
    request's ``deploy_steps`` ask for them (with a priority of their own).
    """
    if not isinstance(priority, int) or isinstance(priority, bool) or priority < 0:
        raise ValueError("deploy step priority must be a non-negative integer")
    info = StepInfo(priority, False, _check_argsinfo(argsinfo), False)

    def mark(function: Callable[..., Any]) -> Callable[..., Any]:
        function._deploy_step = info  # type: ignore[attr-defined]
        return function

    return mark


# Marker attribute of each kind of step.
STEP_MARKERS = {"clean": "_clean_step", "service": "_service_step", "deploy": "_deploy_step"}


class BaseInterface:
    """One interface implementation; subclasses set ``interface_type`` and ``name``."""

    interface_type: str = ""
    name: str = ""

    def __init__(self, conf: Any) -> None:
        self.conf = conf

    def validate(self, task: Any) -> None:
        """Raise InvalidParameterValue/MissingParameterValue when driver_info is unusable."""

    def clean_steps(self) -> list[dict[str, Any]]:
        """Every clean step of this interface, as upstream represents them."""
        return self.steps("clean")

    def steps(self, kind: str) -> list[dict[str, Any]]:
        """Every step of one kind ("clean", "service", "deploy") of this interface."""
        marker = STEP_MARKERS[kind]
        steps = []
        for method_name, method in inspect.getmembers(type(self), predicate=inspect.isfunction):
            info: StepInfo | None = getattr(method, marker, None)
            if info is None:
                continue
            steps.append(
                {
                    "step": method_name,
                    "priority": info.priority,
                    "abortable": info.abortable,
                    "argsinfo": {name: dict(arg) for name, arg in info.argsinfo.items()},
                    "interface": self.interface_type,
                    "requires_ramdisk": info.requires_ramdisk,
                }
            )
        return steps

    def get_clean_steps(self, task: Any) -> list[dict[str, Any]]:
        """The steps available for this node (may raise StepsNotAvailable)."""
        return self.clean_steps()

    def execute_clean_step(self, task: Any, step: Mapping[str, Any]) -> str | None:
        method = getattr(self, step["step"])
        return method(task, **(step.get("args") or {}))

    execute_service_step = execute_clean_step
    execute_deploy_step = execute_clean_step

    def poll_step(self, task: Any, step: Mapping[str, Any]) -> bool:
        """For a step that returned ASYNC: True once it finished (raise if it failed)."""
        return True

    def abort_step(self, task: Any, step: Mapping[str, Any]) -> None:
        """Stop a running abortable step."""


@dataclass
class HardwareType:
    """A hardware type: for each interface type, the supported implementations (default first)."""

    name: str
    supported: dict[str, list[type[BaseInterface]]]
    description: str = ""
    _by_name: dict[str, dict[str, type[BaseInterface]]] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        missing = set(INTERFACE_TYPES) - set(self.supported)
        if missing:
            raise ValueError(f"hardware type {self.name} lacks interface types: {sorted(missing)}")
        for interface_type, classes in self.supported.items():
            self._by_name[interface_type] = {cls.name: cls for cls in classes}

    def default(self, interface_type: str) -> str:
        return self.supported[interface_type][0].name

    def names(self, interface_type: str) -> list[str]:
        return [cls.name for cls in self.supported[interface_type]]

    def interface_class(self, interface_type: str, name: str) -> type[BaseInterface] | None:
        return self._by_name[interface_type].get(name)


class Driver:
    """The interface instances a node uses, built from its ``*_interface`` fields."""

    def __init__(self, hardware_type: HardwareType, interfaces: dict[str, BaseInterface]) -> None:
        self.hardware_type = hardware_type
        self.interfaces = interfaces

    def __getattr__(self, interface_type: str) -> BaseInterface:
        try:
            return self.__dict__["interfaces"][interface_type]
        except KeyError:
            raise AttributeError(interface_type) from None
