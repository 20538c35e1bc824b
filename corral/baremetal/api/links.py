"""Link objects as upstream builds them: "self" under /v1, "bookmark" without."""

from __future__ import annotations

import falcon

from corral.core.http import base_url


def base(req: falcon.Request) -> str:
    extras = req.context.extras
    found = extras.get("baremetal_base")
    if found is None:
        # Once per request: a node list builds five links per node.
        conf = extras.get("baremetal_conf")
        endpoint = conf.baremetal_api.public_endpoint if conf is not None else None
        found = extras["baremetal_base"] = base_url(req, endpoint)
    return found


def resource(req: falcon.Request, collection: str, ident: str, suffix: str = "") -> list[dict[str, str]]:
    root = base(req)
    tail = f"{ident}{suffix}" if ident else suffix.lstrip("/")
    return [
        {"href": f"{root}/v1/{collection}/{tail}", "rel": "self"},
        {"href": f"{root}/{collection}/{tail}", "rel": "bookmark"},
    ]


def collection(req: falcon.Request, name: str) -> list[dict[str, str]]:
    root = base(req)
    return [{"href": f"{root}/v1/{name}/", "rel": "self"}, {"href": f"{root}/{name}/", "rel": "bookmark"}]
