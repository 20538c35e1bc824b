"""The enabled hardware types and building a node's driver from its fields."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from oslo_config import cfg

from corral.baremetal.drivers.base import INTERFACE_TYPES, Driver, HardwareType
from corral.core.errors import BadRequest


def _known_types() -> dict[str, HardwareType]:
    from corral.baremetal.drivers.fake import FAKE_HARDWARE
    from corral.baremetal.drivers.redfish import REDFISH

    return {hw.name: hw for hw in (FAKE_HARDWARE, REDFISH)}


class DriverRegistry:
    def __init__(self, conf: cfg.ConfigOpts) -> None:
        self.conf = conf
        known = _known_types()
        unknown = [name for name in conf.enabled_hardware_types if name not in known]
        if unknown:
            raise ValueError(f"unknown hardware types in enabled_hardware_types: {', '.join(unknown)}")
        self.hardware_types = {name: known[name] for name in conf.enabled_hardware_types}

    def interface_rows(self) -> list[tuple[str, str, str, bool]]:
        """(hardware type, interface type, implementation, is default) for registration."""
        rows = []
        for hw in self.hardware_types.values():
            for interface_type in INTERFACE_TYPES:
                for index, name in enumerate(hw.names(interface_type)):
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
                name = hw.default(interface_type)
            elif hw.interface_class(interface_type, name) is None:
                raise BadRequest(
                    f"{interface_type} interface implementation '{name}' is not supported by "
                    f"hardware type {driver}."
                )
            resolved[field] = name
        return resolved

    def build(self, node: Mapping[str, Any]) -> Driver:
        hw = self.hardware_types.get(node["driver"])
        if hw is None:
            raise BadRequest(f"Hardware type {node['driver']} is not enabled on this conductor.")
        interfaces = {}
        for interface_type in INTERFACE_TYPES:
            name = node.get(f"{interface_type}_interface") or hw.default(interface_type)
            cls = hw.interface_class(interface_type, name)
            if cls is None:
                raise BadRequest(
                    f"{interface_type} interface implementation '{name}' is not supported by "
                    f"hardware type {hw.name}."
                )
            interfaces[interface_type] = cls(self.conf)
        return Driver(hw, interfaces)
