"""Allocation requests and the consumer-generation rules, without HTTP or SQL.

Every way of writing allocations (PUT /allocations/{consumer}, POST
/allocations, POST /reshaper) is turned into a list of
:class:`ConsumerAllocations` and written by one function, so the rules of
consumer generations live in one place:

* before 1.28 a write always succeeds and bumps the consumer's generation;
* from 1.28 the caller sends the generation it knows: ``None`` for a
  consumer it believes new (no consumer record, whether or not old
  allocations exist), the current number otherwise; a mismatch, or a
  concurrent write that got there first, is a 409
  ``placement.concurrent_update``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from corral.core import errors
from corral.placement.api import errors as codes
from corral.placement.domain.inventory import Inventory

CONSUMER_GENERATION = (1, 28)
DICT_ALLOCATIONS = (1, 12)
PROJECT_USER_REQUIRED = (1, 8)
CONSUMER_TYPES = (1, 38)


class UnknownResourceClass(errors.BadRequest):
    """An allocation names a resource class that does not exist."""

    def __init__(self, name: str) -> None:
        super().__init__(f"No such resource class {name}.")
        self.name = name


@dataclass
class ConsumerAllocations:
    consumer_uuid: str
    # provider uuid -> resource class -> amount
    allocations: dict[str, dict[str, int]]
    project_id: str
    user_id: str
    # Only checked when ``check_generation`` (1.28+); None means "new".
    generation: int | None = None
    check_generation: bool = False
    consumer_type: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def from_list_form(entries: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """Allocations as 1.0-1.11 send them: a list of provider/resources pairs."""
    result: dict[str, dict[str, int]] = {}
    for entry in entries:
        uuid = entry["resource_provider"]["uuid"]
        result.setdefault(uuid, {}).update(entry["resources"])
    return result


def from_dict_form(allocations: Mapping[str, Any]) -> dict[str, dict[str, int]]:
    return {uuid: dict(entry["resources"]) for uuid, entry in allocations.items()}


def consumer_from_body(
    consumer_uuid: str,
    body: Mapping[str, Any],
    version: tuple[int, int],
    *,
    default_project: str,
    default_user: str,
) -> ConsumerAllocations:
    """One consumer's allocations from a validated PUT/POST body section."""
    if version >= DICT_ALLOCATIONS:
        allocations = from_dict_form(body["allocations"])
    else:
        allocations = from_list_form(body["allocations"])
    return ConsumerAllocations(
        consumer_uuid=consumer_uuid,
        allocations=allocations,
        project_id=body.get("project_id", default_project),
        user_id=body.get("user_id", default_user),
        generation=body.get("consumer_generation"),
        check_generation=version >= CONSUMER_GENERATION,
        consumer_type=body.get("consumer_type"),
    )


def check_generation(request: ConsumerAllocations, current: int | None) -> None:
    """Compare the caller's consumer generation with the stored one (None: no record)."""
    if not request.check_generation:
        return
    if current is None and request.generation is not None:
        raise errors.Conflict(
            f"consumer generation conflict - expected null but got {request.generation}",
            code=codes.CONCURRENT_UPDATE,
        )
    if current is not None and request.generation != current:
        got = request.generation  # upstream prints a missing one as None
        raise errors.Conflict(
            f"consumer generation conflict - expected {current} but got {got}",
            code=codes.CONCURRENT_UPDATE,
        )


def concurrent_consumer_update(consumer_uuid: str) -> errors.Conflict:
    return errors.Conflict(
        f"consumer generation conflict for consumer {consumer_uuid}: another process changed its allocations",
        code=codes.CONCURRENT_UPDATE,
    )


def check_capacity(
    current: dict[tuple[int, int], tuple[Inventory, int]],
    wanted: dict[tuple[int, int], list[int]],
    uuids: dict[int, str],
    class_names: dict[int, str],
) -> None:
    """409 unless every amount fits the inventory, given what is in use: keys are (provider id, class id)."""
    for key, amounts in sorted(wanted.items()):
        provider_uuid, rc = uuids[key[0]], class_names[key[1]]
        if key not in current:
            raise errors.Conflict(
                f"Unable to allocate inventory: Inventory for '{rc}' on resource provider '{provider_uuid}' invalid."
            )
        inventory, in_use = current[key]
        if not all(inventory.fits(amount) for amount in amounts):
            raise errors.Conflict(
                f"Unable to allocate inventory: Unable to create allocation for '{rc}' on resource provider "
                f"'{provider_uuid}'. The requested amount would violate inventory constraints."
            )
        if in_use + sum(amounts) > inventory.capacity:
            raise errors.Conflict(
                f"Unable to allocate inventory: Unable to create allocation for '{rc}' on resource provider "
                f"'{provider_uuid}'. The requested amount would exceed the capacity."
            )
