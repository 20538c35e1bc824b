"""The service catalog: Corral's own services, at URLs from the configuration.

Each service's public URL is ``[catalog] <service>_url`` when set, else the
base URL (``[catalog] public_url``, ``[api] public_endpoint``, or the URL
the client used to reach the identity service) followed by the service's
path in the all-in-one server.  Every endpoint is listed for the
``public``, ``internal`` and ``admin`` interfaces in one region.  Ids are
derived from the service type and interface, so they stay the same across
processes and restarts.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

INTERFACES = ("public", "internal", "admin")
_NAMESPACE = uuid.UUID("7f3a58c4-6a0e-4c1e-9d36-1c0f2f6b8d11")


@dataclass(frozen=True)
class CatalogService:
    type: str
    name: str
    # Path after the base URL in the all-in-one server.
    path: str
    # The [catalog] option that overrides the whole URL.
    option: str

    @property
    def id(self) -> str:
        return uuid.uuid5(_NAMESPACE, f"service:{self.type}").hex

    def endpoint_id(self, interface: str) -> str:
        return uuid.uuid5(_NAMESPACE, f"endpoint:{self.type}:{interface}").hex


# Upstream's service types and the names devstack gives them.
SERVICES = (
    CatalogService("identity", "keystone", "/identity", "identity_url"),
    CatalogService("placement", "placement", "/placement", "placement_url"),
    CatalogService("baremetal", "ironic", "/baremetal", "baremetal_url"),
    CatalogService("compute", "nova", "/compute/v2.1", "compute_url"),
    CatalogService("image", "glance", "/image", "image_url"),
)


@dataclass(frozen=True)
class Endpoint:
    service: CatalogService
    interface: str
    url: str
    region: str

    @property
    def id(self) -> str:
        return self.service.endpoint_id(self.interface)


def endpoints(catalog_conf: Any, base_url: str, identity_url: str | None = None) -> list[Endpoint]:
    """Every endpoint; ``identity_url`` is where the identity service itself was reached."""
    base = (catalog_conf.public_url or base_url).rstrip("/")
    found = []
    for service in SERVICES:
        url = getattr(catalog_conf, service.option, None)
        if not url and service.type == "identity" and identity_url and not catalog_conf.public_url:
            url = identity_url
        url = url or base + service.path
        for interface in INTERFACES:
            found.append(Endpoint(service, interface, url.rstrip("/"), catalog_conf.region_id))
    return found


def render(endpoint_list: list[Endpoint]) -> list[dict[str, Any]]:
    """The ``catalog`` list of a token body, in Keystone's key order."""
    by_service: dict[str, dict[str, Any]] = {}
    for endpoint in endpoint_list:
        entry = by_service.setdefault(endpoint.service.type, {
            "endpoints": [], "id": endpoint.service.id, "type": endpoint.service.type, "name": endpoint.service.name,
        })
        entry["endpoints"].append({
            "id": endpoint.id, "interface": endpoint.interface, "region_id": endpoint.region,
            "url": endpoint.url, "region": endpoint.region,
        })
    return list(by_service.values())
