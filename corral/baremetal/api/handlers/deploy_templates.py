"""Deploy templates (1.55): /v1/deploy_templates.

A template is named after a trait; when an instance asks for that trait
(``instance_info["traits"]``, set by an allocation or the client), its
deploy steps join the deployment (see corral.baremetal.conductor.steps).
"""

from __future__ import annotations

from typing import Any

import falcon
from oslo_utils import uuidutils

from corral.baremetal.api import common, links, schemas
from corral.baremetal.api.handlers import step_sets as shared
from corral.baremetal.api.state import BaremetalState
from corral.baremetal.db import step_sets as db
from corral.core.db import is_duplicate
from corral.core.errors import Conflict
from corral.core.http import Route, send_empty, send_json

VERSION = (1, 55)
NOT_ALLOWED = "The API version does not allow deploy templates"
NOT_FOUND = "Deploy template {ident} could not be found."
PATCHABLE = ("extra", "name", "steps", "description")


def _schema() -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "description": {"type": ["string", "null"], "maxLength": 255},
            "extra": {"type": ["object", "null"]},
            "name": shared.trait_schema(),
            "steps": {"type": "array", "items": shared.DEPLOY_STEP, "minItems": 1},
            "uuid": {"type": ["string", "null"]},
        },
        "required": ["name", "steps"],
        "additionalProperties": False,
    }


def _render(req: falcon.Request, template: dict[str, Any], fields: list[str] | None = None) -> dict[str, Any]:
    return shared.body(req, "deploy_templates", template, ("name",), fields)


def _check(body: Any, what: str) -> dict[str, Any]:
    """``what`` names the document in schema errors: "template" on create, "patch" on update (upstream's)."""
    schemas.validate(_schema(), body, what)
    shared.check_uuid(body)
    shared.check_duplicates(body["steps"])
    return body


def list_templates(state: BaremetalState, req: falcon.Request, resp: falcon.Response) -> None:
    shared.require_version(req, VERSION, NOT_ALLOWED)
    common.authorize(state, req, "baremetal:deploy_template:get")
    send_json(resp, shared.list_page(state, req, db.TEMPLATES, collection="deploy_templates",
                                     kind_name="Deploy template",
                                     render=lambda item, fields: _render(req, item, fields)))


def show(state: BaremetalState, req: falcon.Request, resp: falcon.Response, template_ident: str) -> None:
    shared.require_version(req, VERSION, NOT_ALLOWED)
    common.authorize(state, req, "baremetal:deploy_template:get")
    template = shared.find(state, db.TEMPLATES, template_ident, NOT_FOUND)
    send_json(resp, _render(req, template, shared.parse_fields(req)))


def create(state: BaremetalState, req: falcon.Request, resp: falcon.Response) -> None:
    shared.require_version(req, VERSION, NOT_ALLOWED)
    common.authorize(state, req, "baremetal:deploy_template:create")
    body = _check(common.json_body(state, req), "template")
    values = {"uuid": body.get("uuid") or uuidutils.generate_uuid(), "name": body["name"],
              "extra": body.get("extra") or {}}
    steps = shared.normalized_steps(body["steps"], "priority")
    template_id = _write(state, lambda conn: db.insert(conn, db.TEMPLATES, values, steps), values)
    with state.db.read() as conn:
        template = db.get(conn, db.TEMPLATES, set_id=template_id)
    assert template is not None
    resp.set_header("Location", f"{links.base(req)}/v1/deploy_templates/{template['uuid']}")
    send_json(resp, _render(req, template), 201)


def _write(state: BaremetalState, work: Any, values: dict[str, Any]) -> Any:
    try:
        return state.db.write(work)
    except Exception as error:
        if not is_duplicate(error):
            raise
        with state.db.read() as conn:
            if db.get(conn, db.TEMPLATES, name=values.get("name")) is not None:
                raise Conflict(f"A deploy template with name {values['name']} already exists.") from None
        raise Conflict(f"A deploy template with UUID {values.get('uuid')} already exists.") from None


def patch(state: BaremetalState, req: falcon.Request, resp: falcon.Response, template_ident: str) -> None:
    shared.require_version(req, VERSION, NOT_ALLOWED)
    common.authorize(state, req, "baremetal:deploy_template:update")
    template = shared.find(state, db.TEMPLATES, template_ident, NOT_FOUND)
    result = shared.patched(template, common.json_body(state, req), PATCHABLE)
    for step in result.get("steps") or []:
        schemas.validate(shared.DEPLOY_STEP, step, None)
    document = {key: value for key, value in result.items() if value is not None}
    _check({**document, "uuid": template["uuid"]}, "patch")
    values = {"name": result["name"], "extra": result.get("extra") or {}}
    steps = shared.normalized_steps(result["steps"], "priority")
    _write(state, lambda conn: db.update(conn, db.TEMPLATES, template["id"], values, steps), values)
    with state.db.read() as conn:
        updated = db.get(conn, db.TEMPLATES, set_id=template["id"])
    assert updated is not None
    send_json(resp, _render(req, updated))


def delete(state: BaremetalState, req: falcon.Request, resp: falcon.Response, template_ident: str) -> None:
    shared.require_version(req, VERSION, NOT_ALLOWED)
    common.authorize(state, req, "baremetal:deploy_template:delete")
    template = shared.find(state, db.TEMPLATES, template_ident, NOT_FOUND)
    state.db.write(lambda conn: db.delete(conn, db.TEMPLATES, template["id"]))
    send_empty(resp, 204)



ROUTES = [
    Route("/v1/deploy_templates", {"GET": list_templates, "POST": create}),
    Route("/v1/deploy_templates/{template_ident}", {"GET": show, "PATCH": patch, "DELETE": delete}),
]
