"""The catalog as resources: ``/v3/services``, ``/v3/endpoints``, ``/v3/regions`` (read-only).

The catalog comes from the configuration (see
:mod:`corral.identity.domain.catalog`), so these lists cannot be changed
through the API.
"""

from __future__ import annotations

from typing import Any

import falcon

from corral.core.http import Route, send_json
from corral.identity.api import util
from corral.identity.api.errors import not_found
from corral.identity.api.state import IdentityState
from corral.identity.domain import catalog


def _endpoints(state: IdentityState, req: falcon.Request) -> list[catalog.Endpoint]:
    return catalog.endpoints(state.conf.catalog, util.server_url(state, req), util.identity_url(state, req))


def _service(state: IdentityState, req: falcon.Request, service: catalog.CatalogService) -> dict[str, Any]:
    return {"name": service.name, "id": service.id, "type": service.type, "enabled": True,
            "links": util.self_link(state, req, f"services/{service.id}")}


def _endpoint(state: IdentityState, req: falcon.Request, endpoint: catalog.Endpoint) -> dict[str, Any]:
    return {"id": endpoint.id, "interface": endpoint.interface, "region_id": endpoint.region,
            "service_id": endpoint.service.id, "url": endpoint.url, "enabled": True, "region": endpoint.region,
            "links": util.self_link(state, req, f"endpoints/{endpoint.id}")}


def _region(state: IdentityState, req: falcon.Request) -> dict[str, Any]:
    region = state.conf.catalog.region_id
    return {"id": region, "description": "", "parent_region_id": None,
            "links": util.self_link(state, req, f"regions/{region}")}


def list_services(state: IdentityState, req: falcon.Request, resp: falcon.Response) -> None:
    util.authorize(state, req, "identity:list_services")
    wanted = req.get_param("type")
    services = [s for s in catalog.SERVICES if wanted is None or s.type == wanted]
    send_json(resp, {"services": [_service(state, req, s) for s in services],
                     "links": util.collection_links(state, req)})


def show_service(state: IdentityState, req: falcon.Request, resp: falcon.Response, service_id: str) -> None:
    util.authorize(state, req, "identity:get_service")
    for service in catalog.SERVICES:
        if service.id == service_id:
            send_json(resp, {"service": _service(state, req, service)})
            return
    raise not_found("service", service_id)


def list_endpoints(state: IdentityState, req: falcon.Request, resp: falcon.Response) -> None:
    util.authorize(state, req, "identity:list_endpoints")
    interface, service_id = req.get_param("interface"), req.get_param("service_id")
    found = [e for e in _endpoints(state, req)
             if (interface is None or e.interface == interface) and (service_id is None or e.service.id == service_id)]
    send_json(resp, {"endpoints": [_endpoint(state, req, e) for e in found], "links": util.collection_links(state, req)})


def show_endpoint(state: IdentityState, req: falcon.Request, resp: falcon.Response, endpoint_id: str) -> None:
    util.authorize(state, req, "identity:get_endpoint")
    for endpoint in _endpoints(state, req):
        if endpoint.id == endpoint_id:
            send_json(resp, {"endpoint": _endpoint(state, req, endpoint)})
            return
    raise not_found("endpoint", endpoint_id)


def list_regions(state: IdentityState, req: falcon.Request, resp: falcon.Response) -> None:
    util.authorize(state, req, "identity:list_regions")
    send_json(resp, {"regions": [_region(state, req)], "links": util.collection_links(state, req)})


def show_region(state: IdentityState, req: falcon.Request, resp: falcon.Response, region_id: str) -> None:
    util.authorize(state, req, "identity:get_region")
    if region_id != state.conf.catalog.region_id:
        raise not_found("region", region_id)
    send_json(resp, {"region": _region(state, req)})


ROUTES = [
    Route("/v3/services", {"GET": list_services}),
    Route("/v3/services/{service_id}", {"GET": show_service}),
    Route("/v3/endpoints", {"GET": list_endpoints}),
    Route("/v3/endpoints/{endpoint_id}", {"GET": show_endpoint}),
    Route("/v3/regions", {"GET": list_regions}),
    Route("/v3/regions/{region_id}", {"GET": show_region}),
]
