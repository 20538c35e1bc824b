"""The ``fake-hardware`` type: interfaces that talk to no hardware.

Power reports the power state stored on the node; the conductor stores
what was asked.  Clean steps record what they did in the node's
``driver_internal_info["fake_actions"]`` (and BIOS settings in the BIOS
table), so tests can see which steps ran and in which order.  Optional
delays (``[fake] power_delay``, ``bios_delay``, ``vendor_delay``) make
long-running work observable.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from corral.baremetal.drivers.base import (
    ASYNC,
    BaseInterface,
    HardwareType,
    InvalidParameterValue,
    clean_step,
    deploy_step,
    service_step,
)

BOOT_DEVICES = ["pxe", "disk", "cdrom", "bios", "safe"]


def record(task: Any, action: str) -> None:
    """Append an action to the node's list of what the fake driver did."""
    info = dict(task.node["driver_internal_info"] or {})
    info["fake_actions"] = [*info.get("fake_actions", []), action]
    task.update(driver_internal_info=info)


class _Fake(BaseInterface):
    name = "fake"


class FakePower(_Fake):
    interface_type = "power"

    def get_power_state(self, task: Any) -> str | None:
        return task.node["power_state"]

    def set_power_state(self, task: Any, power_state: str, timeout: int | None = None) -> None:
        time.sleep(self.conf.fake.power_delay)

    def get_supported_power_states(self, task: Any) -> list[str]:
        return ["power on", "power off", "rebooting", "soft power off", "soft rebooting"]


class FakeManagement(_Fake):
    interface_type = "management"

    def get_supported_boot_devices(self, task: Any) -> list[str]:
        return list(BOOT_DEVICES)

    def get_boot_device(self, task: Any) -> dict[str, Any]:
        stored = (task.node["driver_internal_info"] or {}).get("fake_boot_device")
        return stored or {"boot_device": "pxe", "persistent": False}

    def set_boot_device(self, task: Any, device: str, persistent: bool = False) -> None:
        info = dict(task.node["driver_internal_info"] or {})
        info["fake_boot_device"] = {"boot_device": device, "persistent": persistent}
        task.update(driver_internal_info=info)

    def inject_nmi(self, task: Any) -> None:
        record(task, "management.inject_nmi")


class FakeConsole(_Fake):
    interface_type = "console"

    def start_console(self, task: Any) -> None:
        record(task, "console.start")

    def stop_console(self, task: Any) -> None:
        record(task, "console.stop")

    def get_console(self, task: Any) -> dict[str, str]:
        return {"type": "fake", "url": "fake://console"}


_BIOS_ARGS = {
    "settings": {
        "description": "List of BIOS settings, each item needs to contain a dictionary with name/value pairs",
        "required": True,
    }
}


class FakeBios(_Fake):
    interface_type = "bios"

    def _delay(self) -> None:
        time.sleep(self.conf.fake.bios_delay)

    @deploy_step(priority=0)
    @clean_step(priority=0)
    def factory_reset(self, task: Any) -> None:
        self._delay()
        task.bios_settings({})
        record(task, "bios.factory_reset")

    @clean_step(priority=0)
    def cache_bios_settings(self, task: Any) -> None:
        self._delay()
        record(task, "bios.cache_bios_settings")

    @deploy_step(priority=0, argsinfo=_BIOS_ARGS)
    @clean_step(priority=0, argsinfo=_BIOS_ARGS)
    def apply_configuration(self, task: Any, settings: Any) -> None:
        self._delay()
        task.bios_settings(parse_bios_settings(settings), merge=True)
        record(task, "bios.apply_configuration")


def parse_bios_settings(settings: Any) -> dict[str, str]:
    """[{"name": ..., "value": ...}, ...] -> {name: value}; anything else is rejected."""
    if not isinstance(settings, list) or not settings:
        raise InvalidParameterValue(
            "Invalid BIOS settings: 'settings' must be a non-empty list of {'name': ..., 'value': ...}"
        )
    parsed: dict[str, str] = {}
    for item in settings:
        if not isinstance(item, Mapping) or set(item) != {"name", "value"} or not isinstance(item["name"], str):
            raise InvalidParameterValue(f"Invalid BIOS setting {item!r}: needs exactly 'name' and 'value'")
        parsed[item["name"]] = str(item["value"])
    return parsed


class FakeFirmware(_Fake):
    interface_type = "firmware"

    @clean_step(
        priority=0,
        argsinfo={
            "settings": {
                "description": "A list of dicts with firmware components to be updated",
                "required": True,
            }
        },
    )
    def update(self, task: Any, settings: Any) -> None:
        if not isinstance(settings, list) or not all(
            isinstance(item, Mapping) and "component" in item for item in settings
        ):
            raise InvalidParameterValue("Invalid firmware settings: each item needs a 'component'")
        record(task, "firmware.update")


class FakeVendor(_Fake):
    interface_type = "vendor"

    @service_step(requires_ramdisk=False)
    @clean_step(priority=1)
    def log_passthrough(self, task: Any) -> None:
        time.sleep(self.conf.fake.vendor_delay)
        record(task, "vendor.log_passthrough")


class FakeDeploy(_Fake):
    interface_type = "deploy"

    @deploy_step(priority=100)
    def deploy(self, task: Any) -> None:
        record(task, "deploy.deploy")

    def tear_down(self, task: Any) -> None:
        record(task, "deploy.tear_down")

    @clean_step(
        priority=0,
        abortable=True,
        argsinfo={"duration": {"description": "Seconds the burn-in runs (default 3600).", "required": False}},
    )
    def burnin_cpu(self, task: Any, duration: Any = 3600) -> str:
        if isinstance(duration, bool) or not isinstance(duration, (int, float)) or duration < 0:
            raise InvalidParameterValue(f"Invalid burn-in duration {duration!r}: must be a number of seconds")
        info = dict(task.node["driver_internal_info"] or {})
        info["fake_burnin_until"] = time.time() + duration
        task.update(driver_internal_info=info)
        record(task, "deploy.burnin_cpu")
        return ASYNC

    def poll_step(self, task: Any, step: Mapping[str, Any]) -> bool:
        until = (task.node["driver_internal_info"] or {}).get("fake_burnin_until", 0)
        return time.time() >= until

    def abort_step(self, task: Any, step: Mapping[str, Any]) -> None:
        record(task, f"deploy.{step['step']}.aborted")


def _simple(interface_type: str, implementation: str = "fake") -> type[BaseInterface]:
    return type(
        f"{implementation.title()}{interface_type.title()}",
        (BaseInterface,),
        {"interface_type": interface_type, "name": implementation},
    )


FAKE_HARDWARE = HardwareType(
    name="fake-hardware",
    description="Interfaces that record what they are asked and touch no hardware.",
    supported={
        "bios": [FakeBios],
        "boot": [_simple("boot")],
        "console": [FakeConsole],
        "deploy": [FakeDeploy],
        "firmware": [FakeFirmware],
        "inspect": [_simple("inspect")],
        "management": [FakeManagement],
        "network": [_simple("network", "noop")],
        "power": [FakePower],
        "raid": [_simple("raid")],
        "rescue": [_simple("rescue")],
        "storage": [_simple("storage", "noop")],
        "vendor": [FakeVendor],
    },
)
