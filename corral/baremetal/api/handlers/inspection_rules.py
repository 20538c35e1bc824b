"""Inspection rules (1.96): /v1/inspection_rules.

Operators create, list, show, patch and delete rules; a ``sensitive``
rule never shows its conditions and actions again, and cannot be made
non-sensitive. See corral.baremetal.domain.inspection_rules for what a
rule may hold.
"""

from __future__ import annotations

import copy
from typing import Any
from urllib.parse import urlencode

import falcon
from oslo_utils import uuidutils

from corral.baremetal.api import common, links, schemas, views
from corral.baremetal.api.handlers import step_sets as shared
from corral.baremetal.api.handlers.nodes import apply_patch
from corral.baremetal.api.resource_views import detail_requested
from corral.baremetal.api.state import BaremetalState
from corral.baremetal.db import inspection_rules as db
from corral.baremetal.domain import inspection_rules as rules
from corral.core.db import is_duplicate
from corral.core.errors import BadRequest, Conflict, NotFound
from corral.core.http import Route, send_empty, send_json

VERSION = (1, 96)
NOT_ALLOWED = "The API version does not allow inspection rules"
NOT_FOUND = "Inspection rule {ident} could not be found."
FIELDS = ("uuid", "created_at", "updated_at", "description", "priority", "sensitive", "phase", "conditions",
          "actions", "links")
LIST_FIELDS = ["uuid", "priority", "phase", "description"]
PATCHABLE = ("description", "priority", "sensitive", "phase", "conditions", "actions")
# Upstream builds the rules' links under "inspection", not "inspection_rules".
LINK_COLLECTION = "inspection"


def _render(req: falcon.Request, rule: dict[str, Any], fields: list[str] | None = None) -> dict[str, Any]:
    shown: dict[str, Any] = {
        "uuid": rule["uuid"], "created_at": views.timestamp(rule["created_at"]),
        "updated_at": views.timestamp(rule["updated_at"]), "description": rule["description"],
        "priority": rule["priority"], "sensitive": rule["sensitive"], "phase": rule["phase"],
        "conditions": rules.shown_conditions(rule["conditions"]), "actions": rules.shown_actions(rule["actions"]),
        "links": links.resource(req, LINK_COLLECTION, rule["uuid"]),
    }
    if rule["sensitive"]:
        shown["conditions"] = shown["actions"] = None
    if fields is not None:
        shown = {key: value for key, value in shown.items() if key in fields or key == "links"}
    return shown


def _fields(req: falcon.Request) -> list[str] | None:
    fields = shared.parse_fields(req)
    if fields is not None:
        unknown = sorted(set(fields) - set(FIELDS))
        if unknown:
            raise BadRequest(f'Field(s) "{", ".join(unknown)}" are not valid')
    return fields


def _find(state: BaremetalState, ident: str) -> dict[str, Any]:
    if not uuidutils.is_uuid_like(ident):
        raise BadRequest(f"Expected a UUID but received {ident}.")
    with state.db.read() as conn:
        rule = db.get(conn, uuid=ident)
    if rule is None:
        raise NotFound(NOT_FOUND.format(ident=ident))
    return rule


def _checked(body: Any) -> dict[str, Any]:
    schemas.validate(rules.schema(), body, None)
    # Upstream stores a rule with a bad UUID and answers 500; refused here.
    shared.check_uuid(body)
    rules.check(body)
    return body


def list_rules(state: BaremetalState, req: falcon.Request, resp: falcon.Response) -> None:
    shared.require_version(req, VERSION, NOT_ALLOWED)
    common.authorize(state, req, "baremetal:inspection_rule:get")
    fields = _fields(req)
    detail = detail_requested(req)
    if fields is not None and detail:
        raise BadRequest("Can not specify ?detail=True and fields in the same request.")
    if fields is None and not detail:
        fields = list(LIST_FIELDS)
    limit, sort_key, sort_dir, marker = common.paging(
        state, req, sort_keys=db.SORT_KEYS, kind="Inspection rule",
        find_marker=lambda conn, uuid: db.get(conn, uuid=uuid))
    phase = req.get_param("phase")
    with state.db.read() as conn:
        found = db.list_rules(conn, phase=phase, sort_key=sort_key, sort_dir=sort_dir, limit=limit, marker=marker)
    page: dict[str, Any] = {"inspection_rules": [_render(req, rule, fields) for rule in found]}
    if found and len(found) == limit:
        query = {"sort_key": sort_key, "sort_dir": sort_dir}
        if detail is not None:
            query["detail"] = str(detail)
        if req.get_param("fields") is not None and fields is not None:
            query["fields"] = ",".join(fields)
        query["limit"] = str(limit)
        query["marker"] = found[-1]["uuid"]
        page["next"] = f"{links.base(req)}/v1/inspection_rules?{urlencode(query, safe=',')}"
    send_json(resp, page)


def show(state: BaremetalState, req: falcon.Request, resp: falcon.Response, rule_uuid: str) -> None:
    shared.require_version(req, VERSION, NOT_ALLOWED)
    common.authorize(state, req, "baremetal:inspection_rule:get")
    send_json(resp, _render(req, _find(state, rule_uuid), _fields(req)))


def create(state: BaremetalState, req: falcon.Request, resp: falcon.Response) -> None:
    shared.require_version(req, VERSION, NOT_ALLOWED)
    common.authorize(state, req, "baremetal:inspection_rule:create")
    body = _checked(common.json_body(state, req))
    values = {
        "uuid": body.get("uuid") or uuidutils.generate_uuid(), "description": body.get("description"),
        "priority": body.get("priority", 0), "sensitive": bool(body.get("sensitive")),
        "phase": body.get("phase") or "main", "conditions": body.get("conditions") or [],
        "actions": body["actions"],
    }
    try:
        rule_id = state.db.write(lambda conn: db.insert(conn, values))
    except Exception as error:
        if not is_duplicate(error):
            raise
        raise Conflict(f"An inspection rule with UUID {values['uuid']} already exists.") from None
    with state.db.read() as conn:
        rule = db.get(conn, rule_id=rule_id)
    assert rule is not None
    resp.set_header("Location", f"{links.base(req)}/v1/inspection_rules/{rule['uuid']}")
    send_json(resp, _render(req, rule), 201)


def patch(state: BaremetalState, req: falcon.Request, resp: falcon.Response, rule_uuid: str) -> None:
    shared.require_version(req, VERSION, NOT_ALLOWED)
    common.authorize(state, req, "baremetal:inspection_rule:update")
    rule = _find(state, rule_uuid)
    operations = common.json_body(state, req)
    schemas.validate(schemas.PATCH, operations, "patch")
    for operation in operations:
        field = operation["path"].split("/")[1]
        if field not in PATCHABLE:
            raise BadRequest(f"Cannot patch {operation['path']}. Only the following can be updated: "
                             f"{', '.join(PATCHABLE)}")
        if (field == "sensitive" and operation["op"] != "remove" and not operation.get("value")
                and rule["sensitive"]):
            raise BadRequest(f"Couldn't apply patch '{operations}'. Reason: Inspection rules cannot have the "
                             "sensitive flag unset.")
    document = {field: copy.deepcopy(rule.get(field)) for field in PATCHABLE}
    result = apply_patch(document, operations)
    if rule["sensitive"] and not result.get("sensitive"):
        raise BadRequest(f"Couldn't apply patch '{operations}'. Reason: Inspection rules cannot have the "
                         "sensitive flag unset.")
    body = _checked({key: value for key, value in result.items() if value is not None})
    values = {"description": body.get("description"), "priority": body.get("priority", 0),
              "sensitive": bool(body.get("sensitive")), "phase": body.get("phase") or "main",
              "conditions": body.get("conditions") or [], "actions": body["actions"]}
    state.db.write(lambda conn: db.update(conn, rule["id"], values))
    with state.db.read() as conn:
        updated = db.get(conn, rule_id=rule["id"])
    assert updated is not None
    send_json(resp, _render(req, updated))


def delete(state: BaremetalState, req: falcon.Request, resp: falcon.Response, rule_uuid: str) -> None:
    shared.require_version(req, VERSION, NOT_ALLOWED)
    common.authorize(state, req, "baremetal:inspection_rule:delete")
    rule = _find(state, rule_uuid)
    state.db.write(lambda conn: db.delete(conn, rule["id"]))
    send_empty(resp, 204)


ROUTES = [
    Route("/v1/inspection_rules", {"GET": list_rules, "POST": create}),
    Route("/v1/inspection_rules/{rule_uuid}", {"GET": show, "PATCH": patch, "DELETE": delete}),
]
