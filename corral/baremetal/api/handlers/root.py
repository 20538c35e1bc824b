"""GET / and GET /v1: the version documents (no authentication needed)."""

from __future__ import annotations

import falcon

from corral.baremetal.api import links
from corral.baremetal.api.state import BaremetalState
from corral.baremetal.microversions import MAX_VERSION, MIN_VERSION
from corral.core.http import Route, send_json


def _version(req: falcon.Request) -> dict[str, object]:
    return {
        "id": "v1",
        "links": [{"href": f"{links.base(req)}/v1/", "rel": "self"}],
        "status": "CURRENT",
        "min_version": MIN_VERSION,
        "version": MAX_VERSION,
    }


def root(state: BaremetalState, req: falcon.Request, resp: falcon.Response) -> None:
    version = _version(req)
    send_json(
        resp,
        {
            "name": "OpenStack Ironic API",
            "description": "Ironic is an OpenStack project which enables the provision and "
            "management of baremetal machines.",
            "default_version": version,
            "versions": [version],
        },
    )


def v1(state: BaremetalState, req: falcon.Request, resp: falcon.Response) -> None:
    base = links.base(req)
    body: dict[str, object] = {
        "id": "v1",
        "links": [
            {"href": f"{base}/v1/", "rel": "self"},
            {"href": "https://docs.openstack.org//ironic/latest/contributor//webapi.html", "rel": "describedby",
             "type": "text/html"},
        ],
        "media_types": {"base": "application/json", "type": "application/vnd.openstack.ironic.v1+json"},
    }
    for collection in ("chassis", "nodes", "ports", "drivers"):
        body[collection] = links.collection(req, collection)
    body["version"] = _version(req)
    send_json(resp, body)


ROUTES = [
    Route("/", {"GET": root}, public=True),
    Route("/v1", {"GET": v1}, public=True),
]
