"""Version documents: ``GET /`` (300, every version) and ``GET /v3``."""

from __future__ import annotations

from typing import Any

import falcon
import orjson

from corral.core.http import Route, send_json
from corral.identity.api import util
from corral.identity.api.state import IdentityState

VERSION_ID = "v3.14"
UPDATED = "2020-04-07T00:00:00Z"


def _version(state: IdentityState, req: falcon.Request) -> dict[str, Any]:
    return {
        "id": VERSION_ID,
        "status": "stable",
        "updated": UPDATED,
        "links": [{"rel": "self", "href": f"{util.v3(state, req)}/"}],
        "media-types": [{"base": "application/json", "type": "application/vnd.openstack.identity-v3+json"}],
    }


def versions(state: IdentityState, req: falcon.Request, resp: falcon.Response) -> None:
    resp.status = 300
    resp.content_type = falcon.MEDIA_JSON
    resp.set_header("Location", f"{util.v3(state, req)}/")
    resp.data = orjson.dumps({"versions": {"values": [_version(state, req)]}})


def version_v3(state: IdentityState, req: falcon.Request, resp: falcon.Response) -> None:
    send_json(resp, {"version": _version(state, req)})


ROUTES = [
    Route("/", {"GET": versions}, public=True),
    Route("/v3", {"GET": version_v3}, public=True),
]
