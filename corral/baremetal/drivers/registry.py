"""The enabled hardware types and building a node's driver from its fields."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from oslo_config import cfg

from corral.baremetal.drivers.base import INTERFACE_TYPES, BaseInterface, Driver, HardwareType
from corral.core.errors import BadRequest


def _known_types() -> dict[str, HardwareType]:
    from corral.baremetal.drivers import redfish, vmedia
    from corral.baremetal.drivers.agent import AgentDeploy
    from corral.baremetal.drivers.agent_inspect import AgentInspect
    from corral.baremetal.drivers.fake import FAKE_HARDWARE
    from corral.baremetal.drivers.rescue import AgentRescue

    redfish_type = redfish.hardware_type(boot=[vmedia.RedfishVirtualMediaBoot],
                                         deploy=[AgentDeploy, vmedia.RamdiskDeploy], rescue=[AgentRescue],
                                         inspect=[AgentInspect])
    return {hw.name: hw for hw in (FAKE_HARDWARE, redfish_type)}


def _enabled_interfaces(conf: cfg.ConfigOpts) -> dict[str, list[str]]:
    """Interface types restricted by an ``enabled_<type>_interfaces`` option, and the names it allows."""
    return {"boot": list(conf.enabled_boot_interfaces), "deploy": list(conf.enabled_deploy_interfaces),
            "inspect": list(conf.enabled_inspect_interfaces)}


class DriverRegistry:
    def __init__(self, conf: cfg.ConfigOpts) -> None:
        self.conf = conf
        known = _known_types()
        unknown = [name for name in conf.enabled_hardware_types if name not in known]
        if unknown:
            raise ValueError(f"unknown hardware types in enabled_hardware_types: {', '.join(unknown)}")
        self.hardware_types = {name: known[name] for name in conf.enabled_hardware_types}
        self.enabled = _enabled_interfaces(conf)
        for interface_type, names in self.enabled.items():
            offered = {name for hw in known.values() for name in hw.names(interface_type)}
            unknown = [name for name in names if name not in offered]
            if unknown:
                raise ValueError(f"unknown {interface_type} interfaces in enabled_{interface_type}_interfaces: "
                                 f"{', '.join(unknown)}")
            for hw in self.hardware_types.values():
                if not self.names(hw, interface_type):
                    raise ValueError(f"hardware type {hw.name} supports none of enabled_{interface_type}_interfaces")

    def names(self, hw: HardwareType, interface_type: str) -> list[str]:
        """The implementations of ``hw`` nodes may use for ``interface_type``, its default first."""
        allowed = self.enabled.get(interface_type)
        return [name for name in hw.names(interface_type) if allowed is None or name in allowed]

    def _check(self, hw: HardwareType, interface_type: str, name: str) -> type[BaseInterface]:
        cls = hw.interface_class(interface_type, name)
        if cls is None:
            raise BadRequest(
                f"{interface_type} interface implementation '{name}' is not supported by hardware type {hw.name}."
            )
        if name not in self.names(hw, interface_type):
            raise BadRequest(
                f"{interface_type} interface implementation '{name}' is not enabled "
                f"(enabled_{interface_type}_interfaces)."
            )
        return cls

    def interface_rows(self) -> list[tuple[str, str, str, bool]]:
        """(hardware type, interface type, implementation, is default) for registration."""
        rows = []
        for hw in self.hardware_types.values():
            for interface_type in INTERFACE_TYPES:
                for index, name in enumerate(self.names(hw, interface_type)):
                    rows.append((hw.name, interface_type, name, index == 0))
        return rows

    def resolve_interfaces(self, driver: str, requested: Mapping[str, Any]) -> dict[str, str]:
        """Every ``<type>_interface`` value for a node: requested ones checked, the rest defaulted."""
        hw = self.hardware_types.get(driver)
        if hw is None:
            raise BadRequest(f"Hardware type {driver} is not enabled.")
        resolved = {}
        for interface_type in INTERFACE_TYPES:
            field = f"{interface_type}_interface"
            name = requested.get(field)
            if name is None:
                name = self.names(hw, interface_type)[0]
            else:
                self._check(hw, interface_type, name)
            resolved[field] = name
        return resolved

    def build(self, node: Mapping[str, Any]) -> Driver:
        hw = self.hardware_types.get(node["driver"])
        if hw is None:
            raise BadRequest(f"Hardware type {node['driver']} is not enabled on this conductor.")
        interfaces = {}
        for interface_type in INTERFACE_TYPES:
            name = node.get(f"{interface_type}_interface") or self.names(hw, interface_type)[0]
            interfaces[interface_type] = self._check(hw, interface_type, name)(self.conf)
        return Driver(hw, interfaces)
