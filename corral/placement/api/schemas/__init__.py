"""Placement's request schemas, compiled once when the application is built."""

from __future__ import annotations

from corral.core.schema import VersionedSchema
from corral.placement.api.schemas.common import FORMAT_CHECKER, validation_message


def compile_all() -> dict[str, VersionedSchema]:
    from corral.placement.api.schemas import aggregates, allocations, catalog, inventories, reshaper, resource_providers

    bands = {
        "resource_providers.post": resource_providers.POST,
        "resource_providers.put": resource_providers.PUT,
        "resource_classes.post": catalog.RESOURCE_CLASS,
        "resource_classes.put": catalog.RESOURCE_CLASS,
        "provider_traits.put": catalog.PROVIDER_TRAITS,
        "inventories.post": inventories.POST,
        "aggregates.put": aggregates.PUT,
        "allocations.put": allocations.PUT,
        "allocations.post": allocations.POST,
        "reshaper.post": reshaper.POST,
        "inventories.put_one": inventories.PUT_ONE,
        "inventories.put_all": inventories.PUT_ALL,
    }
    return {
        name: VersionedSchema(band, message=validation_message, format_checker=FORMAT_CHECKER)
        for name, band in bands.items()
    }
