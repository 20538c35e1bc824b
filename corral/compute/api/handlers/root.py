"""Version documents: ``GET /`` (every API version) and ``GET /v2.1/``."""

from __future__ import annotations

import falcon

from corral.core.http import Route, send_json
from corral.compute.api.links import endpoint_url
from corral.compute.microversions import VERSIONS

# Upstream's fixed "updated" stamps of the two API versions.
_V20_UPDATED = "2011-01-21T11:33:21Z"
_V21_UPDATED = "2013-07-23T11:33:21Z"


def _v21(base: str) -> dict[str, object]:
    return {
        "id": "v2.1",
        "status": "CURRENT",
        "version": VERSIONS[-1],
        "min_version": VERSIONS[0],
        "updated": _V21_UPDATED,
        "links": [{"rel": "self", "href": f"{base}/v2.1/"}],
    }


def versions(state: object, req: falcon.Request, resp: falcon.Response) -> None:
    base = endpoint_url(state, req)
    v20 = {
        "id": "v2.0",
        "status": "DEPRECATED",
        "version": "",
        "min_version": "",
        "updated": _V20_UPDATED,
        "links": [{"rel": "self", "href": f"{base}/v2/"}],
    }
    send_json(resp, {"versions": [v20, _v21(base)]})


def version_v21(state: object, req: falcon.Request, resp: falcon.Response) -> None:
    version = _v21(endpoint_url(state, req))
    version["links"].append(  # type: ignore[attr-defined]
        {"rel": "describedby", "type": "text/html", "href": "http://docs.openstack.org/"}
    )
    version["media-types"] = [
        {"base": "application/json", "type": "application/vnd.openstack.compute+json;version=2.1"}
    ]
    send_json(resp, {"version": version})


ROUTES = [
    Route("/", {"GET": versions}, public=True),
    Route("/v2.1", {"GET": version_v21}, public=True),
    Route("/v2.1/", {"GET": version_v21}, public=True),
]
