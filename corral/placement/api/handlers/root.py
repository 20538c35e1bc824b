"""GET / : the version document (no authentication needed)."""

from __future__ import annotations

import falcon

from corral.core.http import Route
from corral.placement.api import util
from corral.placement.api.state import PlacementState
from corral.placement.microversions import VERSIONS


def home(state: PlacementState, req: falcon.Request, resp: falcon.Response) -> None:
    version = {
        "id": "v1.0",
        "max_version": VERSIONS[-1],
        "min_version": VERSIONS[0],
        # Upstream reports a fixed status and an empty link list here.
        "status": "CURRENT",
        "links": [{"rel": "self", "href": ""}],
    }
    util.send_cacheable(req, resp, {"versions": [version]}, None)


ROUTES = [Route("/", {"GET": home}, public=True)]
