"""Chassis: /v1/chassis, /v1/chassis/detail, /v1/chassis/{uuid}, /v1/chassis/{uuid}/nodes."""

from __future__ import annotations

import copy
from typing import Any

import falcon
from oslo_utils import uuidutils

from corral.baremetal.api import common, links, resource_common, schemas
from corral.baremetal.api.handlers import nodes as node_handlers
from corral.baremetal.api.handlers.nodes import apply_patch
from corral.baremetal.api.resource_views import CHASSIS, chassis_body, collection_body, parse_fields, return_fields
from corral.baremetal.api.state import BaremetalState
from corral.baremetal.db import chassis as chassis_db
from corral.core.db import is_duplicate
from corral.core.errors import BadRequest, Conflict, NotFound
from corral.core.http import Route, send_empty, send_json

_SCHEMA = {
    "type": "object",
    "properties": {
        "uuid": {"type": ["string", "null"]},
        "extra": {"type": ["object", "null"]},
        "description": {"type": ["string", "null"], "maxLength": 255},
    },
    "additionalProperties": False,
}
CHASSIS_CHECK = resource_common.validator(_SCHEMA)
PATCHABLE = ("uuid", "extra", "description")


def _normalized(body: Any, what: str = "chassis") -> dict[str, Any]:
    resource_common.check_schema(CHASSIS_CHECK, body, what)
    if body.get("uuid") is not None:
        resource_common.as_uuid("uuid", body["uuid"])
    return dict(body)


def find_chassis(state: BaremetalState, ident: str) -> dict[str, Any]:
    resource_common.as_uuid("chassis_uuid", ident)
    with state.db.read() as conn:
        row = chassis_db.get(conn, uuid=ident)
    if row is None:
        raise NotFound(f"Chassis {ident} could not be found.")
    return row


def create(state: BaremetalState, req: falcon.Request, resp: falcon.Response) -> None:
    common.authorize(state, req, "baremetal:chassis:create")
    values = _normalized(common.json_body(state, req))
    row = {"uuid": values.get("uuid") or uuidutils.generate_uuid(), "description": values.get("description"),
           "extra": values.get("extra") or {}}
    try:
        chassis_id = state.db.write(lambda conn: chassis_db.insert(conn, row))
    except Exception as error:
        if is_duplicate(error):
            raise Conflict(f"A chassis with UUID {row['uuid']} already exists.") from None
        raise
    with state.db.read() as conn:
        created = chassis_db.get(conn, chassis_id=chassis_id)
    assert created is not None
    resp.set_header("Location", f"{links.base(req)}/v1/chassis/{created['uuid']}")
    send_json(resp, chassis_body(req, created), 201)


def _list(state: BaremetalState, req: falcon.Request, resp: falcon.Response, *, detail_path: bool) -> None:
    common.authorize(state, req, "baremetal:chassis:get")
    fields, detail = return_fields(CHASSIS, req, detail_path=detail_path)
    limit, sort_key, sort_dir, marker = resource_common.list_paging(
        state, req, CHASSIS, sort_keys=chassis_db.SORT_KEYS, json_fields=chassis_db.JSON,
        find_marker=lambda conn, uuid: chassis_db.get(conn, uuid=uuid), kind="Chassis")
    with state.db.read() as conn:
        rows = chassis_db.list_chassis(conn, sort_key=sort_key, sort_dir=sort_dir, limit=limit, marker=marker)
    items = [chassis_body(req, row, fields) for row in rows]
    send_json(resp, collection_body(req, "chassis", items, rows, limit=limit,
                                    path="chassis/detail" if detail_path else "chassis", sort_key=sort_key,
                                    sort_dir=sort_dir, fields=fields, detail=detail))


def list_chassis(state: BaremetalState, req: falcon.Request, resp: falcon.Response) -> None:
    _list(state, req, resp, detail_path=False)


def list_detail(state: BaremetalState, req: falcon.Request, resp: falcon.Response) -> None:
    _list(state, req, resp, detail_path=True)


def show(state: BaremetalState, req: falcon.Request, resp: falcon.Response, chassis_uuid: str) -> None:
    common.authorize(state, req, "baremetal:chassis:get")
    row = find_chassis(state, chassis_uuid)
    send_json(resp, chassis_body(req, row, parse_fields(CHASSIS, req)))


def patch(state: BaremetalState, req: falcon.Request, resp: falcon.Response, chassis_uuid: str) -> None:
    common.authorize(state, req, "baremetal:chassis:update")
    operations = common.json_body(state, req)
    schemas.validate(schemas.PATCH, operations, "patch")
    resource_common.check_patch_fields(operations, PATCHABLE)
    row = find_chassis(state, chassis_uuid)
    current = {key: copy.deepcopy(row.get(key)) for key in PATCHABLE}
    patched = _normalized(apply_patch(current, operations), "patch")
    if patched.get("uuid") != row["uuid"]:
        raise BadRequest("Cannot overwrite UUID for an existing Chassis.")
    changes = {"description": patched.get("description"), "extra": patched.get("extra") or {}}
    changes = {key: value for key, value in changes.items() if row.get(key) != value}
    if changes:
        state.db.write(lambda conn: chassis_db.update(conn, row["id"], changes))
    with state.db.read() as conn:
        updated = chassis_db.get(conn, chassis_id=row["id"])
    assert updated is not None
    send_json(resp, chassis_body(req, updated))


def delete(state: BaremetalState, req: falcon.Request, resp: falcon.Response, chassis_uuid: str) -> None:
    common.authorize(state, req, "baremetal:chassis:delete")
    resource_common.as_uuid("chassis_uuid", chassis_uuid)
    row = find_chassis(state, chassis_uuid)
    try:
        deleted = state.db.write(lambda conn: chassis_db.delete_if_empty(conn, row["id"]))
    except Exception as error:
        if "foreign key" not in str(error).lower():
            raise
        deleted = False  # a node joined the chassis meanwhile
    if not deleted:
        raise BadRequest(f"Cannot complete the requested action because chassis {row['uuid']} contains nodes.")
    send_empty(resp, 204)


def list_nodes(state: BaremetalState, req: falcon.Request, resp: falcon.Response, chassis_uuid: str) -> None:
    row = find_chassis(state, chassis_uuid)
    node_handlers.list_in_chassis(state, req, resp, row, detail=False)


def list_nodes_detail(state: BaremetalState, req: falcon.Request, resp: falcon.Response, chassis_uuid: str) -> None:
    row = find_chassis(state, chassis_uuid)
    node_handlers.list_in_chassis(state, req, resp, row, detail=True)


ROUTES = [
    Route("/v1/chassis", {"GET": list_chassis, "POST": create}),
    Route("/v1/chassis/detail", {"GET": list_detail}),
    Route("/v1/chassis/{chassis_uuid}", {"GET": show, "PATCH": patch, "DELETE": delete}),
    Route("/v1/chassis/{chassis_uuid}/nodes", {"GET": list_nodes}),
    Route("/v1/chassis/{chassis_uuid}/nodes/detail", {"GET": list_nodes_detail}),
]
