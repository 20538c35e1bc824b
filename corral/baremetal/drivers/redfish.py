"""The ``redfish`` hardware type: a real Redfish BMC through the ``sushy`` library.

``driver_info`` names the BMC: ``redfish_address`` (required),
``redfish_system_id`` (the ComputerSystem path; the only system when
absent), ``redfish_username``, ``redfish_password``, ``redfish_verify_ca``.

Power and boot devices go to the BMC.  Clean steps (all manual, priority 0):
``management.set_boot_mode`` and ``management.set_secure_boot`` change the
system's boot settings; ``bios.factory_reset`` and
``bios.apply_configuration`` use the system's BIOS resource.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

import sushy

from corral.baremetal.drivers.base import (
    BaseInterface,
    DriverError,
    HardwareType,
    InvalidParameterValue,
    MissingParameterValue,
    clean_step,
)
from corral.baremetal.drivers.fake import parse_bios_settings
from corral.baremetal.domain import states

LOG = logging.getLogger(__name__)

POWER_STATES = {
    sushy.PowerState.ON: states.POWER_ON,
    sushy.PowerState.POWERING_OFF: states.POWER_ON,
    sushy.PowerState.OFF: states.POWER_OFF,
    sushy.PowerState.POWERING_ON: states.POWER_OFF,
}
RESETS = {
    states.POWER_ON: sushy.ResetType.ON,
    states.POWER_OFF: sushy.ResetType.FORCE_OFF,
    states.REBOOT: sushy.ResetType.FORCE_RESTART,
    states.SOFT_POWER_OFF: sushy.ResetType.GRACEFUL_SHUTDOWN,
    states.SOFT_REBOOT: sushy.ResetType.GRACEFUL_RESTART,
}
BOOT_DEVICES = {
    "pxe": sushy.BootSource.PXE,
    "disk": sushy.BootSource.HDD,
    "cdrom": sushy.BootSource.CD,
    "bios": sushy.BootSource.BIOS_SETUP,
}
BOOT_MODES = {"uefi": sushy.BootSourceOverrideMode.UEFI, "bios": sushy.BootSourceOverrideMode.LEGACY}


def _driver_info(task: Any) -> dict[str, Any]:
    info = task.node["driver_info"] or {}
    address = info.get("redfish_address")
    if not address:
        raise MissingParameterValue(
            f"Missing the following Redfish properties in node {task.node['uuid']} driver_info: redfish_address"
        )
    if not isinstance(address, str) or not address.startswith(("http://", "https://")):
        raise InvalidParameterValue(f"Invalid Redfish address {address!r}: it must be an http(s) URL")
    verify = info.get("redfish_verify_ca", True)
    if isinstance(verify, str):
        verify = verify.lower() not in ("false", "no", "0")
    return {
        "address": address.rstrip("/"),
        "system_id": info.get("redfish_system_id"),
        "username": info.get("redfish_username"),
        "password": info.get("redfish_password"),
        "verify": verify,
    }


def get_system(task: Any, conf: Any) -> Any:
    """The node's ComputerSystem, retried while the BMC cannot be reached."""
    info = _driver_info(task)
    attempts = conf.redfish.connection_attempts
    last: Exception | None = None
    for attempt in range(attempts):
        try:
            # Empty strings, not None: requests refuses non-string credentials.
            connection = sushy.Sushy(
                info["address"], username=info["username"] or "", password=info["password"] or "",
                verify=info["verify"],
            )
            if info["system_id"]:
                return connection.get_system(info["system_id"])
            members = connection.get_system_collection().get_members()
            if len(members) != 1:
                raise InvalidParameterValue(
                    f"The BMC at {info['address']} has {len(members)} systems; set redfish_system_id"
                )
            return members[0]
        except sushy.exceptions.ConnectionError as error:
            last = error
            if attempt + 1 < attempts:
                time.sleep(conf.redfish.connection_retry_interval)
        except sushy.exceptions.ResourceNotFoundError as error:
            raise InvalidParameterValue(f"Redfish system {info['system_id']} was not found: {error}") from None
    raise DriverError(f"Unable to connect to the Redfish BMC at {info['address']}: {last}")


def _sushy_call(action: str, function: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return function(*args, **kwargs)
    except sushy.exceptions.SushyError as error:
        raise DriverError(f"Redfish {action} failed: {error}") from None


class RedfishPower(BaseInterface):
    interface_type = "power"
    name = "redfish"

    def validate(self, task: Any) -> None:
        _driver_info(task)

    def get_power_state(self, task: Any) -> str | None:
        system = get_system(task, self.conf)
        return POWER_STATES.get(system.power_state)

    def set_power_state(self, task: Any, power_state: str, timeout: int | None = None) -> None:
        system = get_system(task, self.conf)
        _sushy_call(f"power {power_state}", system.reset_system, RESETS[power_state])
        expected = states.POWER_OFF if power_state in (states.POWER_OFF, states.SOFT_POWER_OFF) else states.POWER_ON
        self._wait(system, expected, timeout)

    def reboot(self, task: Any, timeout: int | None = None) -> None:
        system = get_system(task, self.conf)
        if POWER_STATES.get(system.power_state) == states.POWER_OFF:
            _sushy_call("power on", system.reset_system, sushy.ResetType.ON)
        else:
            _sushy_call("reboot", system.reset_system, sushy.ResetType.FORCE_RESTART)
        self._wait(system, states.POWER_ON, timeout)

    def _wait(self, system: Any, expected: str, timeout: int | None) -> None:
        """BMCs apply power changes after answering: wait until the system reports ``expected``."""
        exact = {states.POWER_ON: sushy.PowerState.ON, states.POWER_OFF: sushy.PowerState.OFF}[expected]
        limit = timeout or self.conf.conductor.power_state_change_timeout
        deadline = time.monotonic() + limit
        while True:
            _sushy_call("read power state", system.refresh)
            if system.power_state == exact:
                return
            if time.monotonic() >= deadline:
                raise DriverError(f"the system did not reach {expected} within {limit} seconds "
                                  f"(it reports {system.power_state})")
            time.sleep(self.conf.redfish.power_poll_interval)

    def get_supported_power_states(self, task: Any) -> list[str]:
        return list(RESETS)


class RedfishManagement(BaseInterface):
    interface_type = "management"
    name = "redfish"

    def validate(self, task: Any) -> None:
        _driver_info(task)

    def get_supported_boot_devices(self, task: Any) -> list[str]:
        return list(BOOT_DEVICES)

    def get_boot_device(self, task: Any) -> dict[str, Any]:
        system = get_system(task, self.conf)
        device = next((name for name, source in BOOT_DEVICES.items() if source == system.boot.target), None)
        persistent = system.boot.enabled == sushy.BootSourceOverrideEnabled.CONTINUOUS
        return {"boot_device": device, "persistent": persistent}

    def set_boot_device(self, task: Any, device: str, persistent: bool = False) -> None:
        system = get_system(task, self.conf)
        enabled = sushy.BootSourceOverrideEnabled.CONTINUOUS if persistent else sushy.BootSourceOverrideEnabled.ONCE
        _sushy_call("set boot device", system.set_system_boot_options, BOOT_DEVICES[device], enabled=enabled)

    def inject_nmi(self, task: Any) -> None:
        system = get_system(task, self.conf)
        _sushy_call("inject NMI", system.reset_system, sushy.ResetType.NMI)

    @clean_step(
        priority=0,
        argsinfo={"mode": {"description": "Boot mode to set: 'uefi' or 'bios'.", "required": True}},
        requires_ramdisk=False,
    )
    def set_boot_mode(self, task: Any, mode: Any) -> None:
        if mode not in BOOT_MODES:
            raise InvalidParameterValue(f"Invalid boot mode {mode!r}: must be one of {', '.join(BOOT_MODES)}")
        system = get_system(task, self.conf)
        _sushy_call("set boot mode", system.set_system_boot_options, mode=BOOT_MODES[mode])

    @clean_step(
        priority=0,
        argsinfo={"enabled": {"description": "True to enable UEFI secure boot, False to disable it.",
                              "required": True}},
        requires_ramdisk=False,
    )
    def set_secure_boot(self, task: Any, enabled: Any) -> None:
        if not isinstance(enabled, bool):
            raise InvalidParameterValue(f"Invalid secure boot value {enabled!r}: must be true or false")
        system = get_system(task, self.conf)
        secure_boot = _sushy_call("read secure boot", lambda: system.secure_boot)
        _sushy_call("set secure boot", secure_boot.set_enabled, enabled)


class RedfishBios(BaseInterface):
    interface_type = "bios"
    name = "redfish"

    def validate(self, task: Any) -> None:
        _driver_info(task)

    @clean_step(priority=0, requires_ramdisk=False)
    def factory_reset(self, task: Any) -> None:
        system = get_system(task, self.conf)
        bios = _sushy_call("read BIOS", lambda: system.bios)
        _sushy_call("BIOS factory reset", bios.reset_bios)
        task.bios_settings({})

    @clean_step(
        priority=0,
        argsinfo={
            "settings": {
                "description": "List of BIOS settings, each item needs to contain a dictionary "
                "with name/value pairs",
                "required": True,
            }
        },
        requires_ramdisk=False,
    )
    def apply_configuration(self, task: Any, settings: Any) -> None:
        parsed = parse_bios_settings(settings)
        system = get_system(task, self.conf)
        bios = _sushy_call("read BIOS", lambda: system.bios)
        _sushy_call("apply BIOS settings", bios.set_attributes, parsed)
        task.bios_settings(parsed, merge=True)


def _none(interface_type: str, implementation: str) -> type[BaseInterface]:
    return type(
        f"No{interface_type.title()}",
        (BaseInterface,),
        {"interface_type": interface_type, "name": implementation},
    )


def _fake(interface_type: str) -> type[BaseInterface]:
    from corral.baremetal.drivers.fake import FAKE_HARDWARE

    return FAKE_HARDWARE.supported[interface_type][0]


def hardware_type(
    boot: Sequence[type[BaseInterface]] = (), deploy: Sequence[type[BaseInterface]] = (),
    rescue: Sequence[type[BaseInterface]] = (),
    inspect: Sequence[type[BaseInterface]] = (),
) -> HardwareType:
    """The hardware type, with the boot, deploy and inspect interfaces of other modules (virtual media, agent)."""
    return HardwareType(
        name="redfish",
        description="Servers with a Redfish BMC (power, boot devices, virtual media, BIOS and boot settings).",
        supported={
            "bios": [RedfishBios, _none("bios", "no-bios")],
            # The fake boot and deploy interfaces stay the defaults: they only record.
            "boot": [_fake("boot"), *boot],
            "console": [_none("console", "no-console")],
            "deploy": [_fake("deploy"), *deploy],
            "firmware": [_none("firmware", "no-firmware")],
            # No out-of-band inspection: no-inspect stays the default, the agent's is chosen per node.
            "inspect": [_none("inspect", "no-inspect"), *inspect],
            "management": [RedfishManagement],
            "network": [_fake("network")],
            "power": [RedfishPower],
            "raid": [_none("raid", "no-raid")],
            "rescue": [_none("rescue", "no-rescue"), *rescue],
            "storage": [_fake("storage")],
            "vendor": [_none("vendor", "no-vendor")],
        },
    )



