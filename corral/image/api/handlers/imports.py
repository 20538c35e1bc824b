"""The interoperable import: ``POST /v2/images/{image_id}/import``, and ``/v2/info/*``.

An accepted import answers 202 at once; the data is then imported in the
background (on the application's import pool) and the image ends
``active``, or ``queued`` with ``os_glance_failed_import`` naming the
store.
"""

from __future__ import annotations

from typing import Any

import falcon

from corral.core.http import Route, send_json
from corral.image import fetch
from corral.image.api import common
from corral.image.api.handlers.data import writer
from corral.image.api.state import ImageState
from corral.image.data import staged_source
from corral.image.db import images as image_db
from corral.image.domain import quotas


def _method(state: ImageState, body: Any) -> tuple[str, dict[str, Any]]:
    if not isinstance(body, dict) or "method" not in body:
        raise common.fail(400, "Import request requires a 'method' field.")
    method = body["method"]
    if not isinstance(method, dict) or "name" not in method:
        raise common.fail(400, "Import request requires a 'name' field.")
    if method["name"] not in state.conf.enabled_import_methods:
        raise common.fail(400, f"Unknown import method name '{method['name']}'.")
    for flag in ("all_stores_must_succeed", "all_stores"):
        if not isinstance(body.get(flag, flag == "all_stores_must_succeed"), bool):
            raise common.fail(400, f"'{flag}' must be boolean value only")
    return method["name"], method


def _check_image(image: dict[str, Any], name: str) -> None:
    if image["status"] == "active":
        raise common.fail(409, "Image with status active cannot be target for import")
    if name == "web-download" and image["status"] != "queued":
        raise common.fail(409, f"Image needs to be in 'queued' state to use '{name}' method")
    if name == "glance-direct" and image["status"] != "uploading":
        raise common.fail(409, "Image needs to be staged before 'glance-direct' method can be used")
    if not image["container_format"]:
        raise common.fail(409, "'container_format' needs to be set before import")
    if not image["disk_format"]:
        raise common.fail(409, "'disk_format' needs to be set before import")


def import_image(state: ImageState, req: falcon.Request, resp: falcon.Response, image_id: str) -> None:
    body = common.json_body(state, req)
    name, method = _method(state, body)
    image = common.find_image(state, req, image_id)
    _check_image(image, name)
    common.enforce(state, req, "modify_image", image)
    if body.get("all_stores_must_succeed", True) is False:
        raise common.fail(400, f"All_stores_must_succeed can only be set with enabled_backends {method.get('uri')}")
    url_filter = fetch.Filter(state.conf.import_filtering_opts)
    uri = method.get("uri")
    if name == "web-download":
        try:
            if not isinstance(uri, str) or not uri:
                raise fetch.Refused(str(uri))
            url_filter.check_url(uri)
        except fetch.Refused:
            raise common.fail(400, f"URI for web-download does not pass filtering: {uri}") from None
    data = writer(state)
    token = common.run(data.start_import, image, name)
    opts = state.conf.import_filtering_opts
    if name == "web-download":
        source = lambda: fetch.open_url(uri, url_filter, opts.timeout, opts.max_redirects)
        after = lambda: None
    else:
        source = staged_source(state.staging, image_id)
        after = lambda: state.staging.remove(image_id)
    state.imports.submit(data.finish_import, image, token, source, after)
    resp.status = 202
    resp.data = b""
    resp.content_type = "text/html; charset=UTF-8"


def info_import(state: ImageState, req: falcon.Request, resp: falcon.Response) -> None:
    send_json(resp, {"import-methods": {
        "description": "Import methods available.", "type": "array",
        "value": list(state.conf.enabled_import_methods)}})


def info_usage(state: ImageState, req: falcon.Request, resp: falcon.Response) -> None:
    """The caller's project's use of each limit (empty when no limit is set, as Glance without limits)."""
    limits = {name: getattr(state.conf.image_limits, name) for name in quotas.LIMITS}
    if all(limit < 0 for limit in limits.values()) or req.context.project_id is None:
        send_json(resp, {"usage": {}})
        return
    with state.db.read() as conn:
        usage = quotas.reported_usage(image_db.owner_usage(conn, req.context.project_id))
    send_json(resp, {"usage": {name: {"usage": usage[name], "limit": limits[name]} for name in quotas.LIMITS}})


def info_stores(state: ImageState, req: falcon.Request, resp: falcon.Response) -> None:
    # Without enabled_backends (one store), Glance has no stores to list.
    raise common.fail(404, "Multi backend is not supported at this site.")


ROUTES = [
    Route("/v2/images/{image_id}/import", {"POST": import_image}),
    Route("/v2/info/import", {"GET": info_import}),
    Route("/v2/info/stores", {"GET": info_stores}),
    Route("/v2/info/stores/detail", {"GET": info_stores}),
    Route("/v2/info/usage", {"GET": info_usage}),
]
