"""Volume resources (1.32): /v1/volume, its connectors and targets, and a node's."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import falcon
from oslo_utils import uuidutils

from corral.baremetal.api import common, links, resource_common, schemas
from corral.baremetal.api.handlers.nodes import apply_patch
from corral.baremetal.api.resource_views import CONNECTOR, TARGET, ResourceView, collection_body, parse_fields, \
    return_fields
from corral.baremetal.api.state import BaremetalState
from corral.baremetal.conductor.ports import duplicate_volume
from corral.baremetal.db import nodes as node_db
from corral.baremetal.db import volumes as volume_db
from corral.core.db import is_duplicate
from corral.core.errors import ApiError, BadRequest, NotFound
from corral.core.http import Route, send_empty, send_json

VOLUME_VERSION = (1, 32)
# Shown instead of a target's properties to callers without the right to see them.
REDACTED = {"redacted_contents": "** Value redacted: Requires permission baremetal:volume:view_target_properties "
                                 "access. Permission denied. **"}


@dataclass(frozen=True)
class Kind:
    name: str           # "connector" | "target"
    plural: str         # collection key in list bodies
    title: str          # "Volume connector"
    view: ResourceView
    check: Any
    columns: tuple[str, ...]


_CONNECTOR_SCHEMA = {
    "type": "object",
    "properties": {
        "connector_id": {"type": "string", "maxLength": 255},
        "extra": {"type": ["object", "null"]},
        "node_uuid": {"type": "string"},
        "type": {"type": "string", "maxLength": 32},
        "uuid": {"type": ["string", "null"]},
    },
    "required": ["connector_id", "node_uuid", "type"],
    "additionalProperties": False,
}
_TARGET_SCHEMA = {
    "type": "object",
    "properties": {
        "boot_index": {"type": "integer"},
        "extra": {"type": ["object", "null"]},
        "node_uuid": {"type": "string"},
        "properties": {"type": ["object", "null"]},
        "volume_id": {"type": "string", "maxLength": 36},
        "volume_type": {"type": "string", "maxLength": 64},
        "uuid": {"type": ["string", "null"]},
    },
    "required": ["boot_index", "node_uuid", "volume_id", "volume_type"],
    "additionalProperties": False,
}
CONNECTORS = Kind("connector", "connectors", "Volume connector", CONNECTOR,
                  resource_common.validator(_CONNECTOR_SCHEMA), ("connector_id", "extra", "type"))
TARGETS = Kind("target", "targets", "Volume target", TARGET, resource_common.validator(_TARGET_SCHEMA),
               ("boot_index", "extra", "properties", "volume_id", "volume_type"))


def _unsupported() -> ApiError:
    return NotFound("The API is not supported for this version")


def _check_version(req: falcon.Request) -> None:
    if not req.context.at_least(*VOLUME_VERSION):
        raise _unsupported()


def _check_collection_version(req: falcon.Request) -> None:
    # Below 1.32 upstream's router answers for connectors and targets: an empty 404.
    if not req.context.at_least(*VOLUME_VERSION):
        raise NotFound("", routing=True)


def _owner_view(row: dict[str, Any]) -> dict[str, Any]:
    return {"owner": row.get("node_owner"), "lessee": row.get("node_lessee")}


def _body(state: BaremetalState, req: falcon.Request, kind: Kind, row: dict[str, Any],
          fields: list[str] | None = None) -> dict[str, Any]:
    body = kind.view.body(req, row, fields)
    if kind is TARGETS and "properties" in body and not state.policy.allows(
            req.context, "baremetal:volume:view_target_properties", {}):
        body["properties"] = dict(REDACTED)
    return body


def _normalized(kind: Kind, body: Any, what: str | None = None) -> dict[str, Any]:
    resource_common.check_schema(kind.check, body, what or kind.name)
    for name in ("node_uuid", "uuid"):
        if body.get(name) is not None:
            resource_common.as_uuid(name, body[name])
    return dict(body)


def _find(state: BaremetalState, req: falcon.Request, kind: Kind, ident: str) -> dict[str, Any]:
    row = None
    if uuidutils.is_uuid_like(ident):
        with state.db.read() as conn:
            row = volume_db.get(conn, kind.name, uuid=ident)
    if row is None or not common.can_see(req, _owner_view(row)):
        raise NotFound(f"{kind.title} {ident} could not be found.")
    return row


# ---------------------------------------------------------------- root


def volume_root(state: BaremetalState, req: falcon.Request, resp: falcon.Response,
                node_ident: str | None = None) -> None:
    _check_version(req)
    prefix = "volume"
    if node_ident is not None:
        common.find_node(state, req, node_ident)
        prefix = f"nodes/{node_ident}/volume"
    else:
        common.authorize(state, req, "baremetal:volume:get")
    base = links.base(req)
    send_json(resp, {
        "links": [{"href": f"{base}/v1/{prefix}/", "rel": "self"}, {"href": f"{base}/{prefix}/", "rel": "bookmark"}],
        "connectors": [{"href": f"{base}/v1/{prefix}/connectors", "rel": "self"},
                       {"href": f"{base}/{prefix}/connectors", "rel": "bookmark"}],
        "targets": [{"href": f"{base}/v1/{prefix}/targets", "rel": "self"},
                    {"href": f"{base}/{prefix}/targets", "rel": "bookmark"}],
    })


# ---------------------------------------------------------------- create


def _create(state: BaremetalState, req: falcon.Request, resp: falcon.Response, kind: Kind,
            parent: str | None) -> None:
    _check_collection_version(req)
    values = _normalized(kind, common.json_body(state, req))
    with state.db.read() as conn:
        node = node_db.get(conn, uuid=values["node_uuid"])
    if node is None or not common.can_see(req, node):
        raise BadRequest(f"Invalid input for field/attribute node_uuid. Value: '{values['node_uuid']}'. ")
    common.authorize(state, req, "baremetal:volume:create", node)
    if parent is not None:
        raise BadRequest("Malformed request URI.")
    row = {key: values[key] for key in kind.columns if values.get(key) is not None}
    row.update(uuid=values.get("uuid") or uuidutils.generate_uuid(), node_id=node["id"])
    try:
        row_id = state.db.write(lambda conn: volume_db.insert(conn, kind.name, row))
    except Exception as error:
        if is_duplicate(error):
            raise _duplicate(state, kind, row) from None
        raise
    with state.db.read() as conn:
        created = volume_db.get(conn, kind.name, row_id=row_id)
    assert created is not None
    resp.set_header("Location", f"{links.base(req)}/v1/{kind.view.collection}/{created['uuid']}")
    send_json(resp, _body(state, req, kind, created), 201)


def _duplicate(state: BaremetalState, kind: Kind, row: dict[str, Any]) -> ApiError:
    with state.db.read() as conn:
        if volume_db.get(conn, kind.name, uuid=row["uuid"]) is not None:
            return duplicate_volume(kind.name, {"uuid": row["uuid"]})
    return duplicate_volume(kind.name, row)


# ------------------------------------------------------------------ list


def _list(state: BaremetalState, req: falcon.Request, resp: falcon.Response, kind: Kind, *, detail_path: bool,
          node_ident: str | None) -> None:
    _check_collection_version(req)
    common.authorize(state, req, "baremetal:volume:get")
    # Upstream's volume lists take ``detail`` at every version they exist in.
    fields, detail = return_fields(kind.view, req, detail_path=detail_path, detail_since=None)
    filters: dict[str, Any] = {}
    node_ident = node_ident or req.get_param("node")
    if node_ident:
        filters["node_id"] = common.find_node(state, req, node_ident)["id"]
    if not req.context.is_admin:
        filters["project"] = req.context.project_id or ""
    limit, sort_key, sort_dir, marker = resource_common.list_paging(
        state, req, kind.view, sort_keys=volume_db.SORT_KEYS[kind.name], json_fields=volume_db.JSON[kind.name],
        find_marker=lambda conn, uuid: volume_db.get(conn, kind.name, uuid=uuid), kind=kind.title)
    with state.db.read() as conn:
        rows = volume_db.list_rows(conn, kind.name, filters, sort_key=sort_key, sort_dir=sort_dir, limit=limit,
                                   marker=marker)
    items = [_body(state, req, kind, row, fields) for row in rows]
    path = kind.view.collection + ("/detail" if detail_path else "")
    send_json(resp, collection_body(req, kind.plural, items, rows, limit=limit, path=path, sort_key=sort_key,
                                    sort_dir=sort_dir, fields=fields, detail=detail))


# ------------------------------------------------------ show/patch/delete


def _show(state: BaremetalState, req: falcon.Request, resp: falcon.Response, kind: Kind, ident: str) -> None:
    _check_collection_version(req)
    row = _find(state, req, kind, ident)
    common.authorize(state, req, "baremetal:volume:get", _owner_view(row))
    send_json(resp, _body(state, req, kind, row, parse_fields(kind.view, req)))


def _patch(state: BaremetalState, req: falcon.Request, resp: falcon.Response, kind: Kind, ident: str) -> None:
    _check_collection_version(req)
    row = _find(state, req, kind, ident)
    common.authorize(state, req, "baremetal:volume:update", _owner_view(row))
    operations = common.json_body(state, req)
    schemas.validate(schemas.PATCH, operations, "patch")
    resource_common.check_patch_fields(operations, (*kind.columns, "node_uuid"))
    for operation in operations:
        if operation["path"] == "/node_uuid" and not uuidutils.is_uuid_like(str(operation.get("value"))):
            raise BadRequest(f"Expected a UUID for node_uuid, but received {operation.get('value')}.")
    current = {key: copy.deepcopy(row.get(key)) for key in kind.columns}
    current["node_uuid"] = row["node_uuid"]
    patched = apply_patch(current, operations)
    values = _normalized(kind, {key: value for key, value in patched.items() if value is not None}, "patch")
    node = resource_common.patched_node(state, req, row, values["node_uuid"])
    changes = {key: values.get(key) for key in kind.columns}
    for name in ("extra", "properties"):
        if name in changes and changes[name] is None:
            changes[name] = {}
    changes["node_id"] = node["id"]
    changes = {key: value for key, value in changes.items() if row.get(key) != value}
    if changes:
        merged = {**{key: row.get(key) for key in kind.columns}, **changes}
        common.conductor_call(state, node, "update_volume", kind=kind.name, row_id=row["id"],
                              values={**merged, "node_id": node["id"]})
    with state.db.read() as conn:
        updated = volume_db.get(conn, kind.name, row_id=row["id"])
    assert updated is not None
    send_json(resp, _body(state, req, kind, updated))


def _delete(state: BaremetalState, req: falcon.Request, resp: falcon.Response, kind: Kind, ident: str) -> None:
    _check_collection_version(req)
    resource_common.as_uuid(f"{kind.name}_uuid", ident)
    row = _find(state, req, kind, ident)
    common.authorize(state, req, "baremetal:volume:delete", _owner_view(row))
    with state.db.read() as conn:
        node = node_db.get(conn, node_id=row["node_id"])
    assert node is not None
    common.conductor_call(state, node, "destroy_volume", kind=kind.name, row_id=row["id"])
    send_empty(resp, 204)


def _routes(kind: Kind) -> list[Route]:
    def create(state: BaremetalState, req: falcon.Request, resp: falcon.Response,
               node_ident: str | None = None) -> None:
        _create(state, req, resp, kind, node_ident)

    def listing(state: BaremetalState, req: falcon.Request, resp: falcon.Response,
               node_ident: str | None = None) -> None:
        _list(state, req, resp, kind, detail_path=False, node_ident=node_ident)

    def detail(state: BaremetalState, req: falcon.Request, resp: falcon.Response,
               node_ident: str | None = None) -> None:
        _list(state, req, resp, kind, detail_path=True, node_ident=node_ident)

    def show(state: BaremetalState, req: falcon.Request, resp: falcon.Response, ident: str) -> None:
        _show(state, req, resp, kind, ident)

    def patch(state: BaremetalState, req: falcon.Request, resp: falcon.Response, ident: str) -> None:
        _patch(state, req, resp, kind, ident)

    def delete(state: BaremetalState, req: falcon.Request, resp: falcon.Response, ident: str) -> None:
        _delete(state, req, resp, kind, ident)

    plural = kind.plural
    return [
        Route(f"/v1/volume/{plural}", {"GET": listing, "POST": create}),
        Route(f"/v1/volume/{plural}/detail", {"GET": detail}),
        Route(f"/v1/volume/{plural}/{{ident}}", {"GET": show, "PATCH": patch, "DELETE": delete}),
        Route(f"/v1/nodes/{{node_ident}}/volume/{plural}", {"GET": listing, "POST": create}),
        Route(f"/v1/nodes/{{node_ident}}/volume/{plural}/detail", {"GET": detail}),
    ]


ROUTES = [
    Route("/v1/volume", {"GET": volume_root}),
    Route("/v1/nodes/{node_ident}/volume", {"GET": volume_root}),
    *_routes(CONNECTORS),
    *_routes(TARGETS),
]
