"""Inventory rules: defaults, capacity and what may change while in use."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from corral.core import errors
from corral.placement.api import errors as codes

MAX_INT = 2147483647
# From 1.26, reserved may equal total (capacity zero).
RESERVED_EQUALS_TOTAL = (1, 26)
FIELDS = ("total", "reserved", "min_unit", "max_unit", "step_size", "allocation_ratio")


@dataclass(frozen=True)
class Inventory:
    total: int
    reserved: int = 0
    min_unit: int = 1
    max_unit: int = MAX_INT
    step_size: int = 1
    allocation_ratio: float = 1.0

    @property
    def capacity(self) -> int:
        """How much may be allocated: (total - reserved) x allocation_ratio."""
        return int((self.total - self.reserved) * self.allocation_ratio)

    def as_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in FIELDS}

    def fits(self, amount: int) -> bool:
        """Whether one allocation of ``amount`` respects min/max unit and step size."""
        return self.min_unit <= amount <= self.max_unit and amount % self.step_size == 0


def from_request(data: Mapping[str, Any]) -> Inventory:
    values = {name: data[name] for name in FIELDS if name in data}
    if "allocation_ratio" in values:
        values["allocation_ratio"] = float(values["allocation_ratio"])
    return Inventory(**values)


class InventoryInUse(errors.Conflict):
    """Inventory with allocations against it would be removed."""

    def __init__(self, provider_uuid: str, resource_classes: list[str]) -> None:
        super().__init__(
            f"Inventory for '{', '.join(resource_classes)}' on resource provider '{provider_uuid}' in use.",
            code=codes.INVENTORY_INUSE,
        )


def check_capacity(
    provider_uuid: str, resource_class: str, inventory: Inventory, version: tuple[int, int], action: str = "update"
) -> None:
    """Reserved above total (or equal, before 1.26) is a 400.

    ``action`` ("create" or "update") names the operation in the message.
    """
    capacity = inventory.capacity
    if version >= RESERVED_EQUALS_TOTAL:
        too_small, limit = capacity < 0, "greater than total"
    else:
        too_small, limit = capacity <= 0, "greater than or equal to total"
    if too_small:
        raise errors.BadRequest(
            f"Unable to {action} inventory for resource provider {provider_uuid}: Invalid inventory for "
            f"'{resource_class}' on resource provider '{provider_uuid}'. The reserved value is {limit}."
        )


def check_in_use(
    provider_uuid: str,
    current_usage: Mapping[str, int],
    new: Mapping[str, Inventory],
    *,
    refuse_below_usage: bool,
) -> None:
    """Classes with allocations cannot go away, nor (optionally) shrink below usage.

    Every in-use class that would go away is named, in ``current_usage`` order.
    """
    removed = [rc for rc, used in current_usage.items() if used > 0 and rc not in new]
    if removed:
        raise InventoryInUse(provider_uuid, removed)
    for resource_class, used in current_usage.items():
        if used <= 0:
            continue
        if refuse_below_usage and new[resource_class].capacity < used:
            raise errors.Conflict(
                f"Inventory for '{resource_class}' on resource provider '{provider_uuid}' would have a "
                f"capacity of {new[resource_class].capacity}, below the {used} already allocated.",
                code=codes.INVENTORY_INUSE,
            )
