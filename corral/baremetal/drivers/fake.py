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

from corral.baremetal.drivers.agent import AgentDeploy
from corral.baremetal.drivers.agent_inspect import AgentInspect
from corral.baremetal.drivers.rescue import AgentRescue
from corral.baremetal.drivers.network import FlatNetwork, NoopNetwork
from corral.baremetal.drivers.storage import CinderStorage, NoopStorage
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
# Virtual media slots of the fake BMC and the media types each takes.
VMEDIA_TYPES = {"cdrom": ("CD", "DVD"), "disk": ("USBStick",), "floppy": ("Floppy",)}
# The most recent actions kept: a node cleaned every day for years must not
# carry an ever-growing list in every answer.
FAKE_ACTIONS_KEPT = 50


def record(task: Any, action: str) -> None:
    """Append an action to the node's list of what the fake driver did."""
    info = dict(task.node["driver_internal_info"] or {})
    info["fake_actions"] = [*info.get("fake_actions", []), action][-FAKE_ACTIONS_KEPT:]
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

    # Boot mode and secure boot (1.76): the conductor records what was asked.
    def set_boot_mode(self, task: Any, mode: str) -> None:
        record(task, f"management.set_boot_mode.{mode}")

    def set_secure_boot(self, task: Any, enabled: bool) -> None:
        record(task, f"management.set_secure_boot.{str(enabled).lower()}")

    # Indicators (1.63): a read-only chassis LED and a system LED that can blink.
    def get_supported_indicators(self, task: Any) -> dict[str, Any]:
        return {
            "chassis": {"led-0": {"readonly": True, "states": ["off", "on"]}},
            "system": {"led": {"readonly": False, "states": ["blinking", "off", "on"]}},
        }

    def _indicator(self, task: Any, component: str, indicator: str) -> dict[str, Any]:
        supported = self.get_supported_indicators(task)
        if component not in supported:
            raise InvalidParameterValue(f"Invalid component {component} specified.")
        if indicator not in supported[component]:
            raise InvalidParameterValue(f"Invalid indicator {indicator} specified.")
        return supported[component][indicator]

    def get_indicator_state(self, task: Any, component: str, indicator: str) -> str:
        self._indicator(task, component, indicator)
        stored = (task.node["driver_internal_info"] or {}).get("fake_indicators") or {}
        return stored.get(f"{indicator}@{component}", "on")

    def set_indicator_state(self, task: Any, component: str, indicator: str, state: str) -> None:
        details = self._indicator(task, component, indicator)
        if details["readonly"]:
            raise InvalidParameterValue(f"Indicator {indicator} of component {component} is read-only.")
        if state not in details["states"]:
            raise InvalidParameterValue(f"Invalid state {state} for indicator {indicator}; valid states are "
                                        f"{', '.join(details['states'])}.")
        info = dict(task.node["driver_internal_info"] or {})
        info["fake_indicators"] = {**(info.get("fake_indicators") or {}), f"{indicator}@{component}": state}
        task.update(driver_internal_info=info)

    # Virtual media (1.89, 1.93): one slot per device type.
    def get_virtual_media(self, task: Any) -> list[dict[str, Any]]:
        inserted = (task.node["driver_internal_info"] or {}).get("fake_vmedia") or {}
        return [
            {"media_types": list(types), "inserted": device in inserted, "image": inserted.get(device)}
            for device, types in VMEDIA_TYPES.items()
        ]

    def attach_virtual_media(self, task: Any, device_type: str, image_url: str) -> None:
        info = dict(task.node["driver_internal_info"] or {})
        info["fake_vmedia"] = {**(info.get("fake_vmedia") or {}), device_type: image_url}
        task.update(driver_internal_info=info)

    def detach_virtual_media(self, task: Any, device_types: list[str] | None = None) -> None:
        info = dict(task.node["driver_internal_info"] or {})
        inserted = dict(info.get("fake_vmedia") or {})
        for device in device_types or list(inserted):
            inserted.pop(device, None)
        info["fake_vmedia"] = inserted
        task.update(driver_internal_info=info)


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
        for item in settings:
            # The version is the image's file name (what a real update would report afterwards).
            url = str(item.get("url") or "")
            version = url.rstrip("/").rsplit("/", 1)[-1] or "unknown"
            task.firmware_flashed(str(item["component"]), version)
        record(task, "firmware.update")


class FakeInspect(_Fake):
    """Inspection reports an inventory made from the node's properties."""

    interface_type = "inspect"

    def inspect_hardware(self, task: Any) -> None:
        properties = task.node.get("properties") or {}
        inventory = {
            "cpu": {"count": int(properties.get("cpus", 1) or 1), "architecture": properties.get("cpu_arch",
                                                                                              "x86_64")},
            "memory": {"physical_mb": int(properties.get("memory_mb", 1024) or 1024)},
            "disks": [{"name": "/dev/sda", "size": int(properties.get("local_gb", 10) or 10) * 1024 ** 3}],
            "interfaces": [],
        }
        task.store_inventory(inventory, {"fake": True})
        record(task, "inspect.inspect_hardware")


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
        # A deployed machine boots its instance: the node ends powered on, as after a real deployment.
        task.driver.boot.prepare_instance(task)
        task.update(power_state="power on", target_power_state=None)

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


class FakeBoot(_Fake):
    """Network boot that sets the boot device and nothing else: "power on" boots whatever the machine gets."""

    interface_type = "boot"
    # As upstream's fake boot interface: network boot, iPXE included (boot from iSCSI volumes).
    capabilities = ("ipxe_boot", "pxe_boot")

    def prepare_ramdisk(self, task: Any) -> None:
        task.driver.management.set_boot_device(task, "pxe", persistent=False)

    def clean_up_ramdisk(self, task: Any) -> None:
        pass

    def prepare_instance(self, task: Any) -> None:
        task.driver.management.set_boot_device(task, "disk", persistent=True)

    def clean_up_instance(self, task: Any) -> None:
        pass


def _simple(interface_type: str, implementation: str = "fake") -> type[BaseInterface]:
    return type(
        f"{implementation.title().replace('-', '')}{interface_type.title()}",
        (BaseInterface,),
        {"interface_type": interface_type, "name": implementation},
    )


FAKE_HARDWARE = HardwareType(
    name="fake-hardware",
    description="Interfaces that record what they are asked and touch no hardware.",
    supported={
        # Upstream's "no-*" implementations are enabled by default and the
        # fake hardware type supports them: clients create fake nodes with
        # them (``firmware_interface="no-firmware"``).
        "bios": [FakeBios, _simple("bios", "no-bios")],
        "boot": [FakeBoot],
        "console": [FakeConsole, _simple("console", "no-console")],
        "deploy": [FakeDeploy, AgentDeploy],
        "firmware": [FakeFirmware, _simple("firmware", "no-firmware")],
        "inspect": [FakeInspect, AgentInspect, _simple("inspect", "no-inspect")],
        "management": [FakeManagement],
        "network": [NoopNetwork, FlatNetwork],
        "power": [FakePower],
        "raid": [_simple("raid"), _simple("raid", "no-raid")],
        "rescue": [_simple("rescue"), _simple("rescue", "no-rescue"), AgentRescue],
        "storage": [NoopStorage, CinderStorage],
        "vendor": [FakeVendor, _simple("vendor", "no-vendor")],
    },
)
