"""Conductor methods of later microversions: boot mode, indicators, virtual media.

Mixed into :class:`corral.baremetal.conductor.manager.Conductor`; every
method here is an RPC method and works on the node under its lock.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from corral.baremetal.drivers.base import DriverError
from corral.core.errors import BadRequest

if TYPE_CHECKING:
    from corral.baremetal.conductor.core import ConductorCore

RPC_METHODS = frozenset({
    "set_boot_mode", "set_secure_boot", "get_supported_indicators", "get_indicator_state", "set_indicator_state",
    "get_virtual_media", "attach_virtual_media", "detach_virtual_media",
})


def _management(task: Any, method: str) -> Any:
    function = getattr(task.driver.management, method, None)
    if function is None:
        raise BadRequest(f"Driver {task.node['driver']} does not support {method.replace('_', ' ')} "
                         "(disabled or not implemented).")
    return function


def _call(function: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return function(*args, **kwargs)
    except DriverError as error:
        raise BadRequest(str(error)) from None


class NodeExtras:
    """RPC methods for boot mode, secure boot, indicators and virtual media."""

    def set_boot_mode(self: ConductorCore, node_id: int, mode: str) -> None:
        with self._locked(node_id) as task:
            _call(_management(task, "set_boot_mode"), task, mode)
            task.update(boot_mode=mode)

    def set_secure_boot(self: ConductorCore, node_id: int, enabled: bool) -> None:
        with self._locked(node_id) as task:
            _call(_management(task, "set_secure_boot"), task, enabled)
            task.update(secure_boot=enabled)

    def get_supported_indicators(self: ConductorCore, node_id: int) -> dict[str, Any]:
        with self._locked(node_id) as task:
            return dict(_call(_management(task, "get_supported_indicators"), task))

    def get_indicator_state(self: ConductorCore, node_id: int, component: str, indicator: str) -> str:
        with self._locked(node_id) as task:
            return str(_call(_management(task, "get_indicator_state"), task, component, indicator))

    def set_indicator_state(self: ConductorCore, node_id: int, component: str, indicator: str, target: str) -> None:
        with self._locked(node_id) as task:
            _call(_management(task, "set_indicator_state"), task, component, indicator, target)

    def get_virtual_media(self: ConductorCore, node_id: int) -> list[dict[str, Any]]:
        with self._locked(node_id) as task:
            return list(_call(_management(task, "get_virtual_media"), task))

    def attach_virtual_media(self: ConductorCore, node_id: int, device_type: str, image_url: str,
                             image_download_source: str = "local") -> None:
        with self._locked(node_id) as task:
            _call(_management(task, "attach_virtual_media"), task, device_type, image_url)

    def detach_virtual_media(self: ConductorCore, node_id: int, device_types: list[str] | None = None) -> None:
        with self._locked(node_id) as task:
            _call(_management(task, "detach_virtual_media"), task, device_types)
