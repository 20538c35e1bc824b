"""The virt driver interface: what Compute asks of the thing that runs servers.

A compute service (:mod:`corral.compute.manager`) owns one driver, chosen
by ``[DEFAULT] compute_driver`` as upstream names them (``fake.FakeDriver``
is :class:`corral.compute.virt.fake.FakeDriver`; ``ironic.IronicDriver``
is ``corral.compute.virt.ironic.IronicDriver``, the default). The methods are
those of upstream's ``nova.virt.driver.ComputeDriver`` that the manager
calls for the actions Corral serves, with Corral's plain types:

* an **instance** is the server's row (a dict: ``uuid``, ``host``,
  ``node``, ``image_ref``, ``user_data``, ``config_drive``, ``key_data``,
  ``flavor``, ``vm_state``, ``task_state``...);
* an **image** is the Image service's record of the image (at least
  ``id``);
* ``network_info`` is a list (always empty: Corral has no networks) and
  ``block_device_info`` None.

Every call may block for as long as the work takes (a bare metal deploy
takes minutes): the manager runs each server's work on a thread of its
own. A driver reports failure by raising; :class:`VirtDriverError`'s
message (or the class name of any other exception, as upstream records
it) becomes the server's fault. ``NotImplementedError`` means the driver
cannot do that at all: the API answers it as upstream does (501 for the
console log; a snapshot fails on the compute service).

Nodes: :meth:`get_available_nodes` lists the hypervisors this service
manages, one compute node (and one Placement resource provider) each: a
libvirt-like driver has one, the Ironic driver one per bare metal node.
:meth:`node_resources` describes a node (inventories and traits for
Placement, the facts ``os-hypervisors`` shows), Corral's simpler
equivalent of ``update_provider_tree``. The scheduler places a server on
a node; the manager hands the driver the instance with its ``node``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from oslo_config import cfg

from corral.compute.domain import states

# Upstream's short names of the drivers, relative to this package.
_PACKAGE = "corral.compute.virt"


class VirtDriverError(Exception):
    """An action failed in the driver; the message is what the server's fault shows."""

    def __init__(self, message: str, code: int = 500) -> None:
        super().__init__(message)
        self.code = code

    def format_message(self) -> str:
        return str(self)


class BuildAbortException(VirtDriverError):
    """A build no other host would do better (upstream's: bad image, flavor too small...): not rescheduled."""

    def __init__(self, instance_uuid: str, reason: str) -> None:
        super().__init__(f"Build of instance {instance_uuid} aborted: {reason}")


class InstanceNotFound(VirtDriverError):
    """The driver has no guest for this server."""

    def __init__(self, instance_uuid: str) -> None:
        super().__init__(f"Instance {instance_uuid} could not be found.", code=404)


@dataclass(frozen=True)
class InstanceInfo:
    """What :meth:`ComputeDriver.get_info` tells of a guest (upstream's ``hardware.InstanceInfo``)."""

    state: int = states.NOSTATE


@dataclass(frozen=True)
class NodeResources:
    """One node as Placement and ``os-hypervisors`` see it."""

    nodename: str
    hypervisor_type: str
    hypervisor_version: int
    cpu_info: str
    vcpus: int
    memory_mb: int
    local_gb: int
    # resource class -> {"total", "reserved", "min_unit", "max_unit", "step_size", "allocation_ratio"}
    inventories: dict[str, dict[str, Any]]
    traits: frozenset[str] = frozenset()
    extra: dict[str, Any] = field(default_factory=dict)


def inventory(total: int, *, reserved: int = 0, allocation_ratio: float = 1.0) -> dict[str, Any]:
    """One resource class's inventory, whole units."""
    return {"total": total, "reserved": reserved, "min_unit": 1, "max_unit": total, "step_size": 1,
            "allocation_ratio": allocation_ratio}


class ComputeDriver:
    """The interface; every action a driver cannot do raises ``NotImplementedError``."""

    #: Shown as the hypervisor type of the nodes (``fake``, ``ironic``).
    hypervisor_type = ""
    #: Whether a delete is carried out by the compute service as upstream's: the server stays
    #: (task state ``deleting``) until :meth:`destroy` returned, and only then is it deleted and its
    #: allocation freed. False: the API deletes it at once and the host reaps the guest later,
    #: which is right for guests that go at once (the fake driver's).
    destroy_before_delete = False
    #: Upstream's capability flags the manager and the API look at.
    capabilities: dict[str, bool] = {"supports_console_log": False, "supports_snapshot": False,
                                     "supports_rebuild": False}

    def __init__(self, conf: cfg.ConfigOpts) -> None:
        self.conf = conf

    # ------------------------------------------------------------- the host

    def init_host(self, host: str) -> None:
        """Called once when the compute service of ``host`` starts."""

    def set_live_peers(self, hosts: list[str]) -> None:
        """The hosts whose compute services are up in this cell (drivers sharing nodes among them use it)."""

    def set_instance_filter(self, own: Callable[[list[str]], set[str]]) -> None:
        """``own(uuids)``: those of the servers named that are this host's (drivers sharing nodes use it)."""

    def get_available_nodes(self, refresh: bool = False) -> list[str]:
        """The node names this service manages (one compute node each)."""
        raise NotImplementedError()

    def node_resources(self, nodename: str) -> NodeResources:
        """The node's inventories, traits and facts (what ``update_provider_tree`` reports upstream)."""
        raise NotImplementedError()

    def list_instance_uuids(self) -> list[str]:
        """The servers that have a guest here (the manager reaps those deleted behind it)."""
        raise NotImplementedError()

    # ----------------------------------------------------------- the guests

    def spawn(self, instance: dict[str, Any], image: dict[str, Any], *, injected_files: list[tuple[str, bytes]],
              admin_password: str | None, network_info: list[Any], block_device_info: Any = None,
              user_data: str | None = None, config_drive: bool = False) -> None:
        """Create and start the guest; returns when it runs (raises otherwise)."""
        raise NotImplementedError()

    def destroy(self, instance: dict[str, Any], network_info: list[Any], block_device_info: Any = None,
                destroy_disks: bool = True) -> None:
        """Remove the guest; a guest that is already gone is no error."""
        raise NotImplementedError()

    def power_off(self, instance: dict[str, Any], timeout: int = 0, retry_interval: int = 0) -> None:
        """Stop the guest: cleanly within ``timeout`` seconds when it is not 0, then forcibly."""
        raise NotImplementedError()

    def power_on(self, instance: dict[str, Any], network_info: list[Any], block_device_info: Any = None) -> None:
        raise NotImplementedError()

    def reboot(self, instance: dict[str, Any], network_info: list[Any], reboot_type: str,
               block_device_info: Any = None) -> None:
        """``reboot_type`` is ``SOFT`` (ask the guest) or ``HARD`` (power cycle)."""
        raise NotImplementedError()

    def rebuild(self, instance: dict[str, Any], image: dict[str, Any], *, injected_files: list[tuple[str, bytes]],
                admin_password: str | None, network_info: list[Any], block_device_info: Any = None,
                user_data: str | None = None, config_drive: bool = False, preserve_ephemeral: bool = False) -> None:
        """Redeploy the guest from ``image``.

        Not implemented: the manager destroys the guest and spawns it
        again (upstream's ``_rebuild_default_impl``).
        """
        raise NotImplementedError()

    def rescue(self, instance: dict[str, Any], network_info: list[Any], image: dict[str, Any],
               rescue_password: str | None, block_device_info: Any = None) -> None:
        raise NotImplementedError()

    def unrescue(self, instance: dict[str, Any], network_info: list[Any]) -> None:
        raise NotImplementedError()

    def get_info(self, instance: dict[str, Any]) -> InstanceInfo:
        """The guest's power state; raises :class:`InstanceNotFound` when there is none."""
        raise NotImplementedError()

    def get_console_output(self, instance: dict[str, Any]) -> str | bytes:
        """The guest's console log; ``NotImplementedError`` when the driver has none."""
        raise NotImplementedError()

    def snapshot(self, instance: dict[str, Any], image_id: str,
                 update_task_state: Callable[[str, str | None], None]) -> None:
        """Upload the guest's disk into the (queued) image ``image_id``."""
        raise NotImplementedError()


def driver_class(name: str) -> type[ComputeDriver]:
    """The class ``[DEFAULT] compute_driver`` names (``module.Class`` within this package)."""
    module_name, _, class_name = name.rpartition(".")
    if not module_name or not class_name:
        raise ValueError(f"compute_driver {name!r} is not of the form module.Class")
    module = importlib.import_module(f"{_PACKAGE}.{module_name}")
    found = getattr(module, class_name, None)
    if not (isinstance(found, type) and issubclass(found, ComputeDriver)):
        raise ValueError(f"compute_driver {name!r} names no virt driver")
    return found


def load_driver(conf: cfg.ConfigOpts, name: str | None = None) -> ComputeDriver:
    name = name or conf.compute_driver
    if not name:
        raise ValueError("no [DEFAULT] compute_driver is set")
    return driver_class(name)(conf)


# Drivers by the hypervisor type their nodes show, for the calls the API
# makes itself (upstream makes them over RPC to the host): the console log.
_BY_HYPERVISOR_TYPE = {"fake": "fake.FakeDriver", "ironic": "ironic.IronicDriver"}


def destroys_before_delete(hypervisor_type: str | None) -> bool:
    """Whether the servers on nodes of this hypervisor type are deleted by their compute service."""
    name = _BY_HYPERVISOR_TYPE.get(hypervisor_type or "")
    if name is None:
        return False
    try:
        return driver_class(name).destroy_before_delete
    except (ImportError, ValueError):
        return False


def driver_for_hypervisor_type(conf: cfg.ConfigOpts, hypervisor_type: str) -> ComputeDriver | None:
    name = _BY_HYPERVISOR_TYPE.get(hypervisor_type)
    if name is None:
        return None
    try:
        return load_driver(conf, name)
    except (ImportError, ValueError):
        return None
