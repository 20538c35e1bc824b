"""/flavors: list, detail, show, create and delete (admins), extra specs."""

from __future__ import annotations

import uuid
from typing import Any

import falcon
from sqlalchemy.engine import Connection

from corral.core import errors
from corral.core.http import Endpoint, Route, send_empty, send_json
from corral.compute.api import links, policies, util
from corral.compute.api.state import ComputeState
from corral.compute.db import flavors as db

DESCRIPTION = (2, 55)
EXTRA_SPECS_IN_FLAVOR = (2, 61)

_INT = {"type": ["integer", "string"], "pattern": "^[0-9]+$", "maximum": util.MAX_INT}
# Upstream's bound for rxtx_factor: the largest single-precision float.
_MAX_RXTX = 3.40282e38

_CREATE = util.Schema({
    "type": "object",
    "properties": {
        "flavor": {
            "type": "object",
            "properties": {
                "name": {"type": "string", "minLength": 1, "maxLength": 255, "pattern": r"^(?! )[^\n\r]*(?<! )$"},
                "id": {"type": ["string", "integer", "null"], "minLength": 1, "maxLength": 255,
                       "pattern": r"^(?! )[a-zA-Z0-9. _-]+(?<! )$"},
                "ram": {**_INT, "minimum": 1},
                "vcpus": {**_INT, "minimum": 1},
                "disk": {**_INT, "minimum": 0},
                "OS-FLV-EXT-DATA:ephemeral": {**_INT, "minimum": 0},
                "swap": {**_INT, "minimum": 0},
                "rxtx_factor": {"type": ["number", "string"], "exclusiveMinimum": 0},
                "os-flavor-access:is_public": {"type": "boolean"},
                "description": {"type": ["string", "null"], "maxLength": 65535},
            },
            "required": ["name", "ram", "vcpus", "disk"],
            "additionalProperties": False,
        },
    },
    "required": ["flavor"],
    "additionalProperties": False,
})

_UPDATE = util.Schema({
    "type": "object",
    "properties": {
        "flavor": {
            "type": "object",
            "properties": {"description": {"type": ["string", "null"], "maxLength": 65535}},
            "required": ["description"],
            "additionalProperties": False,
        },
    },
    "required": ["flavor"],
    "additionalProperties": False,
})

_SPEC_KEY = r"^[\w.\-: ]{1,255}$"
_EXTRA_SPECS = util.Schema({
    "type": "object",
    "properties": {
        "extra_specs": {
            "type": "object",
            "patternProperties": {_SPEC_KEY: {"type": ["string", "number", "boolean"], "maxLength": 255}},
            "additionalProperties": False,
        },
    },
    "required": ["extra_specs"],
    "additionalProperties": False,
})
_ONE_SPEC = util.Schema({
    "type": "object",
    "patternProperties": {_SPEC_KEY: {"type": ["string", "number", "boolean"], "maxLength": 255}},
    "minProperties": 1,
    "maxProperties": 1,
    "additionalProperties": False,
})


def _not_found(flavor_id: str) -> errors.NotFound:
    return errors.NotFound(f"Flavor {flavor_id} could not be found.")


def _spec_value(value: Any) -> str:
    if isinstance(value, bool):
        return "True" if value else "False"
    return str(value)


# ------------------------------------------------------------ views


def basic_view(state: ComputeState, req: falcon.Request, flavor: dict[str, Any]) -> dict[str, Any]:
    view: dict[str, Any] = {
        "id": flavor["flavorid"],
        "name": flavor["name"],
        "links": links.resource_links(state, req, "flavors", flavor["flavorid"]),
    }
    if req.context.at_least(*DESCRIPTION):
        view["description"] = flavor["description"]
    return view


def detail_view(state: ComputeState, req: falcon.Request, flavor: dict[str, Any]) -> dict[str, Any]:
    view: dict[str, Any] = {
        "id": flavor["flavorid"],
        "name": flavor["name"],
        "ram": flavor["memory_mb"],
        "disk": flavor["root_gb"],
        "swap": flavor["swap"] or "",
        "OS-FLV-EXT-DATA:ephemeral": flavor["ephemeral_gb"],
        "OS-FLV-DISABLED:disabled": bool(flavor["disabled"]),
        "vcpus": flavor["vcpus"],
        "os-flavor-access:is_public": bool(flavor["is_public"]),
        "rxtx_factor": flavor["rxtx_factor"],
        "links": links.resource_links(state, req, "flavors", flavor["flavorid"]),
    }
    if req.context.at_least(*DESCRIPTION):
        view["description"] = flavor["description"]
    if req.context.at_least(*EXTRA_SPECS_IN_FLAVOR) and util.allows(state, req, policies.FLAVOR_EXTRA_SPECS_INDEX):
        view["extra_specs"] = flavor["extra_specs"]
    return view


# ------------------------------------------------------------ list/show


def _list(state: ComputeState, req: falcon.Request) -> list[dict[str, Any]]:
    is_admin = req.context.is_admin
    is_public: bool | None = True
    raw_public = util.last_value(req, "is_public")
    if is_admin:
        if raw_public is None:
            is_public = True
        elif raw_public.lower() == "none":
            is_public = None
        else:
            is_public = util.parse_bool(raw_public, "is_public")
    else:
        # Users always see public flavors plus the ones shared with them.
        is_public = None
    sort_key = util.last_value(req, "sort_key") or "flavorid"
    sort_dir = util.last_value(req, "sort_dir") or "asc"
    if sort_key not in db.SORT_KEYS or sort_dir not in ("asc", "desc"):
        raise errors.BadRequest(f"Invalid sort_key or sort_dir: {sort_key} {sort_dir}")
    max_limit = state.conf.api.max_limit
    limit = util.parse_int(util.last_value(req, "limit"), "limit")
    limit = max_limit if limit is None else min(limit, max_limit)
    min_ram = util.parse_int(util.last_value(req, "minRam"), "minRam")
    min_disk = util.parse_int(util.last_value(req, "minDisk"), "minDisk")
    marker = util.last_value(req, "marker")
    with state.api_db.read() as conn:
        marker_row = None
        if marker is not None:
            marker_row = db.flavor_row(conn, marker)
            if marker_row is None:
                raise errors.BadRequest(f"marker [{marker}] not found")
        if max(min_ram or 0, min_disk or 0) > util.MAX_INT:
            # No flavor is that large (and the database could not compare with it).
            return []
        return db.list_flavors(
            conn,
            project_id=None if is_admin else req.context.project_id,
            is_public=is_public,
            min_ram=min_ram,
            min_disk=min_disk,
            sort_key=sort_key,
            sort_dir=sort_dir,
            limit=limit,
            marker_row=marker_row,
        )


def _with_next_link(state: ComputeState, req: falcon.Request, body: dict[str, Any], flavors: list[dict[str, Any]],
                    collection: str) -> dict[str, Any]:
    limit = util.parse_int(util.last_value(req, "limit"), "limit")
    max_limit = state.conf.api.max_limit
    effective = max_limit if limit is None else min(limit, max_limit)
    if flavors and len(flavors) == effective:
        params = [f"{k}={v}" for k, v in req.params.items() if k != "marker" and not isinstance(v, list)]
        params.append(f"marker={flavors[-1]['flavorid']}")
        href = links.collection_url(state, req, collection) + "?" + "&".join(params)
        body["flavors_links"] = [{"rel": "next", "href": href}]
    return body


def index(state: ComputeState, req: falcon.Request, resp: falcon.Response) -> None:
    flavors = _list(state, req)
    body = {"flavors": [basic_view(state, req, flavor) for flavor in flavors]}
    send_json(resp, _with_next_link(state, req, body, flavors, "flavors"))


def detail(state: ComputeState, req: falcon.Request, resp: falcon.Response) -> None:
    flavors = _list(state, req)
    body = {"flavors": [detail_view(state, req, flavor) for flavor in flavors]}
    send_json(resp, _with_next_link(state, req, body, flavors, "flavors/detail"))


def show(state: ComputeState, req: falcon.Request, resp: falcon.Response, flavor_id: str) -> None:
    with state.api_db.read() as conn:
        flavor = db.get_flavor(conn, flavor_id)
    if flavor is None:
        raise _not_found(flavor_id)
    send_json(resp, {"flavor": detail_view(state, req, flavor)})


# ---------------------------------------------------------- manage


def create(state: ComputeState, req: falcon.Request, resp: falcon.Response) -> None:
    util.authorize(state, req, policies.FLAVOR_CREATE)
    body = util.json_body(state, req, _CREATE)["flavor"]
    if "description" in body and not req.context.at_least(*DESCRIPTION):
        raise errors.BadRequest(
            "Invalid input for field/attribute flavor. Value: "
            f"{body}. Additional properties are not allowed ('description' was unexpected)"
        )
    flavorid = body.get("id")
    flavorid = str(uuid.uuid4()) if flavorid in (None, "") else str(flavorid)
    try:
        rxtx = float(body.get("rxtx_factor", 1.0))
    except ValueError:
        raise errors.BadRequest(f"Invalid input for field/attribute rxtx_factor. Value: {body['rxtx_factor']}.") from None
    if not rxtx <= _MAX_RXTX:
        raise errors.BadRequest(
            f"Invalid input for field/attribute rxtx_factor. Value: {body['rxtx_factor']}. "
            f"{body['rxtx_factor']} is greater than the maximum of {_MAX_RXTX}"
        )
    values = {
        "flavorid": flavorid,
        "name": body["name"],
        "memory_mb": util.bounded_int(body["ram"], "ram", minimum=1),
        "vcpus": util.bounded_int(body["vcpus"], "vcpus", minimum=1),
        "root_gb": util.bounded_int(body["disk"], "disk", minimum=0),
        "ephemeral_gb": util.bounded_int(
            body.get("OS-FLV-EXT-DATA:ephemeral", 0), "OS-FLV-EXT-DATA:ephemeral", minimum=0
        ),
        "swap": util.bounded_int(body.get("swap", 0), "swap", minimum=0),
        "rxtx_factor": rxtx,
        "is_public": body.get("os-flavor-access:is_public", True),
        "disabled": False,
        "description": body.get("description"),
    }

    def work(conn: Connection) -> dict[str, Any]:
        if db.name_taken(conn, values["name"]):
            raise errors.Conflict(f"Flavor with name {values['name']} already exists.")
        if db.flavor_row(conn, flavorid) is not None:
            raise errors.Conflict(f"Flavor with ID {flavorid} already exists.")
        db.create_flavor(conn, values)
        flavor = db.get_flavor(conn, flavorid)
        assert flavor is not None
        return flavor

    flavor = state.api_db.write(work)
    send_json(resp, {"flavor": detail_view(state, req, flavor)})


def update(state: ComputeState, req: falcon.Request, resp: falcon.Response, flavor_id: str) -> None:
    util.authorize(state, req, policies.FLAVOR_UPDATE)
    description = util.json_body(state, req, _UPDATE)["flavor"]["description"]

    def work(conn: Connection) -> dict[str, Any]:
        row = db.flavor_row(conn, flavor_id)
        if row is None:
            raise _not_found(flavor_id)
        db.update_flavor(conn, row.id, description=description)
        flavor = db.get_flavor(conn, flavor_id)
        assert flavor is not None
        return flavor

    send_json(resp, {"flavor": detail_view(state, req, state.api_db.write(work))})


def delete(state: ComputeState, req: falcon.Request, resp: falcon.Response, flavor_id: str) -> None:
    util.authorize(state, req, policies.FLAVOR_DELETE)

    def work(conn: Connection) -> None:
        row = db.flavor_row(conn, flavor_id)
        if row is None:
            raise _not_found(flavor_id)
        db.delete_flavor(conn, row.id)

    state.api_db.write(work)
    send_empty(resp, 202)


# ------------------------------------------------------ extra specs


def _flavor_or_404(conn: Connection, flavor_id: str) -> Any:
    row = db.flavor_row(conn, flavor_id)
    if row is None:
        raise _not_found(flavor_id)
    return row


def specs_index(state: ComputeState, req: falcon.Request, resp: falcon.Response, flavor_id: str) -> None:
    util.authorize(state, req, policies.FLAVOR_EXTRA_SPECS_INDEX)
    with state.api_db.read() as conn:
        specs = db.extra_specs(conn, _flavor_or_404(conn, flavor_id).id)
    send_json(resp, {"extra_specs": specs})


def specs_create(state: ComputeState, req: falcon.Request, resp: falcon.Response, flavor_id: str) -> None:
    util.authorize(state, req, policies.FLAVOR_EXTRA_SPECS_CREATE)
    specs = {key: _spec_value(value) for key, value in util.json_body(state, req, _EXTRA_SPECS)["extra_specs"].items()}

    def work(conn: Connection) -> None:
        db.set_extra_specs(conn, _flavor_or_404(conn, flavor_id).id, specs)

    state.api_db.write(work)
    send_json(resp, {"extra_specs": specs})


def specs_show(state: ComputeState, req: falcon.Request, resp: falcon.Response, flavor_id: str, key: str) -> None:
    util.authorize(state, req, policies.FLAVOR_EXTRA_SPECS_SHOW)
    with state.api_db.read() as conn:
        specs = db.extra_specs(conn, _flavor_or_404(conn, flavor_id).id)
    if key not in specs:
        raise errors.NotFound(f"Flavor {flavor_id} has no extra specs with key {key}.")
    send_json(resp, {key: specs[key]})


def specs_update(state: ComputeState, req: falcon.Request, resp: falcon.Response, flavor_id: str, key: str) -> None:
    util.authorize(state, req, policies.FLAVOR_EXTRA_SPECS_UPDATE)
    body = util.json_body(state, req, _ONE_SPEC)
    if key not in body:
        raise errors.BadRequest("Request body and URI mismatch")
    value = _spec_value(body[key])

    def work(conn: Connection) -> None:
        db.set_extra_specs(conn, _flavor_or_404(conn, flavor_id).id, {key: value})

    state.api_db.write(work)
    send_json(resp, {key: value})


def specs_delete(state: ComputeState, req: falcon.Request, resp: falcon.Response, flavor_id: str, key: str) -> None:
    util.authorize(state, req, policies.FLAVOR_EXTRA_SPECS_DELETE)

    def work(conn: Connection) -> None:
        if not db.delete_extra_spec(conn, _flavor_or_404(conn, flavor_id).id, key):
            raise errors.NotFound(f"Flavor {flavor_id} has no extra specs with key {key}.")

    state.api_db.write(work)
    send_empty(resp, 202)


ROUTES = [
    Route("/flavors", {"GET": index, "POST": create}),
    Route("/flavors/detail", {"GET": detail}),
    Route("/flavors/{flavor_id}", {"GET": show, "PUT": Endpoint(update, min_version=DESCRIPTION), "DELETE": delete}),
    Route("/flavors/{flavor_id}/os-extra_specs", {"GET": specs_index, "POST": specs_create}),
    Route("/flavors/{flavor_id}/os-extra_specs/{key}", {"GET": specs_show, "PUT": specs_update, "DELETE": specs_delete}),
]
