"""The fake virt driver: pretends to run guests, for demonstrations and tests.

It has one node, named after the host (as upstream's ``FakeDriver``),
sized by ``[fake_driver]``, and keeps its guests' power states in memory.
Tests can:

* read :attr:`FakeDriver.calls` (method name, server uuid, arguments);
* make the next call of an action fail with :meth:`fail_next`;
* change a guest's power state behind Compute's back with
  :meth:`set_power_state` (a guest shut down from inside, say).

Its console log is upstream's fake text; with ``[fake_driver]
console_log = false`` it has none, as a driver without one (Ironic's).
It cannot snapshot (``NotImplementedError``), as Ironic cannot.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

from oslo_config import cfg

from corral.compute.domain import states
from corral.compute.virt.driver import ComputeDriver, InstanceInfo, InstanceNotFound, NodeResources, VirtDriverError
from corral.compute.virt.driver import inventory

# The traits every fake node reports.
FAKE_TRAITS = frozenset({"COMPUTE_NODE"})
# What upstream's fake driver reports of its hypervisor ("1.0" as an integer, and its CPU).
FAKE_HYPERVISOR_VERSION = 1000
FAKE_CPU_INFO = json.dumps({
    "arch": "x86_64", "model": "Nehalem", "vendor": "Intel", "features": ["pge", "clflush"],
    "topology": {"cores": 1, "threads": 1, "sockets": 4},
})
# Upstream's fake console log.
FAKE_CONSOLE_OUTPUT = "FAKE CONSOLE OUTPUT\nANOTHER\nLAST LINE"


class FakeDriver(ComputeDriver):
    hypervisor_type = "fake"
    capabilities = {"supports_console_log": True, "supports_snapshot": False, "supports_rebuild": True}

    def __init__(self, conf: cfg.ConfigOpts) -> None:
        super().__init__(conf)
        fake = conf.fake_driver
        self.vcpus = fake.vcpus
        self.memory_mb = fake.memory_mb
        self.local_gb = fake.local_gb
        self.spawn_delay = fake.spawn_delay
        self.nodenames: list[str] = []
        # uuid -> power state of each guest
        self.guests: dict[str, int] = {}
        self.rescued: set[str] = set()
        self.calls: list[tuple[str, str, dict[str, Any]]] = []
        self._failures: dict[str, VirtDriverError | BaseException] = {}
        self._lock = threading.Lock()

    # --------------------------------------------------------------- testing

    def fail_next(self, method: str, error: BaseException | None = None) -> None:
        """The next call of ``method`` raises ``error`` (a VirtDriverError naming it by default)."""
        self._failures[method] = error or VirtDriverError(f"Fake driver failed to {method}.")

    def set_power_state(self, instance_uuid: str, power_state: int) -> None:
        """Change a guest's power state without telling Compute."""
        with self._lock:
            self.guests[instance_uuid] = power_state

    def _call(self, method: str, instance: dict[str, Any], **arguments: Any) -> None:
        with self._lock:
            self.calls.append((method, instance["uuid"], arguments))
            error = self._failures.pop(method, None)
        if error is not None:
            raise error

    def _guest(self, instance: dict[str, Any]) -> str:
        if instance["uuid"] not in self.guests:
            raise InstanceNotFound(instance["uuid"])
        return str(instance["uuid"])

    # -------------------------------------------------------------- the host

    def init_host(self, host: str) -> None:
        if not self.nodenames:
            self.nodenames = [host]

    def get_available_nodes(self, refresh: bool = False) -> list[str]:
        return list(self.nodenames)

    def node_resources(self, nodename: str) -> NodeResources:
        return NodeResources(
            nodename=nodename, hypervisor_type=self.hypervisor_type, hypervisor_version=FAKE_HYPERVISOR_VERSION,
            cpu_info=FAKE_CPU_INFO, vcpus=self.vcpus, memory_mb=self.memory_mb, local_gb=self.local_gb,
            inventories={"VCPU": inventory(self.vcpus), "MEMORY_MB": inventory(self.memory_mb),
                         "DISK_GB": inventory(self.local_gb)},
            traits=FAKE_TRAITS,
        )

    def list_instance_uuids(self) -> list[str]:
        with self._lock:
            return list(self.guests)

    # ------------------------------------------------------------ the guests

    def spawn(self, instance: dict[str, Any], image: dict[str, Any], *, injected_files: list[tuple[str, bytes]],
              admin_password: str | None, network_info: list[Any], block_device_info: Any = None,
              user_data: str | None = None, config_drive: bool = False) -> None:
        self._call("spawn", instance, image=image.get("id"), admin_password=admin_password, user_data=user_data,
                   config_drive=config_drive)
        if self.spawn_delay:
            time.sleep(self.spawn_delay)
        self.set_power_state(instance["uuid"], states.RUNNING)

    def destroy(self, instance: dict[str, Any], network_info: list[Any], block_device_info: Any = None,
                destroy_disks: bool = True) -> None:
        self._call("destroy", instance)
        with self._lock:
            self.guests.pop(instance["uuid"], None)
            self.rescued.discard(instance["uuid"])

    def power_off(self, instance: dict[str, Any], timeout: int = 0, retry_interval: int = 0) -> None:
        self._call("power_off", instance, timeout=timeout)
        self.set_power_state(self._guest(instance), states.SHUTDOWN)

    def power_on(self, instance: dict[str, Any], network_info: list[Any], block_device_info: Any = None) -> None:
        self._call("power_on", instance)
        self.set_power_state(self._guest(instance), states.RUNNING)

    def reboot(self, instance: dict[str, Any], network_info: list[Any], reboot_type: str,
               block_device_info: Any = None) -> None:
        self._call("reboot", instance, reboot_type=reboot_type)
        self.set_power_state(self._guest(instance), states.RUNNING)

    def rebuild(self, instance: dict[str, Any], image: dict[str, Any], *, injected_files: list[tuple[str, bytes]],
                admin_password: str | None, network_info: list[Any], block_device_info: Any = None,
                user_data: str | None = None, config_drive: bool = False, preserve_ephemeral: bool = False) -> None:
        self._call("rebuild", instance, image=image.get("id"), admin_password=admin_password, user_data=user_data,
                   preserve_ephemeral=preserve_ephemeral)
        self.set_power_state(instance["uuid"], states.RUNNING)

    def rescue(self, instance: dict[str, Any], network_info: list[Any], image: dict[str, Any],
               rescue_password: str | None, block_device_info: Any = None) -> None:
        self._call("rescue", instance, image=image.get("id"), rescue_password=rescue_password)
        with self._lock:
            self.rescued.add(self._guest(instance))
            self.guests[instance["uuid"]] = states.RUNNING

    def unrescue(self, instance: dict[str, Any], network_info: list[Any]) -> None:
        self._call("unrescue", instance)
        with self._lock:
            self.rescued.discard(self._guest(instance))
            self.guests[instance["uuid"]] = states.RUNNING

    def get_info(self, instance: dict[str, Any]) -> InstanceInfo:
        with self._lock:
            if instance["uuid"] not in self.guests:
                raise InstanceNotFound(instance["uuid"])
            return InstanceInfo(state=self.guests[instance["uuid"]])

    def get_console_output(self, instance: dict[str, Any]) -> str:
        if not self.conf.fake_driver.console_log:
            raise NotImplementedError()
        return FAKE_CONSOLE_OUTPUT

    def snapshot(self, instance: dict[str, Any], image_id: str,
                 update_task_state: Callable[[str, str | None], None]) -> None:
        self._call("snapshot", instance, image_id=image_id)
        raise NotImplementedError()
