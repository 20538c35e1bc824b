"""Runbooks (1.92): /v1/runbooks, and their traits (1.112).

A runbook is an ordered list of clean or service steps.  A node may run
it (``"runbook"`` with the ``clean`` and ``service`` verbs) when it carries
one of the runbook's traits; before 1.112 the runbook's name is that trait.
Projects see their own runbooks and the public ones.
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
from corral.core.errors import BadRequest, Conflict, NotFound
from corral.core.http import Endpoint, Route, send_empty, send_json

VERSION = (1, 92)
TRAITS_VERSION = (1, 112)
NOT_ALLOWED = "The API version does not allow runbooks"
NOT_FOUND = "Runbook {ident} could not be found."
NAME_SCHEMA = {"type": "string", "minLength": 1, "maxLength": 255, "pattern": r"^[A-Za-z0-9\-._~]+$"}
BASE_FIELDS = ("name", "extra", "public", "owner", "disable_ramdisk")


def _schema(req: falcon.Request) -> dict[str, Any]:
    properties: dict[str, Any] = {
        "uuid": {"type": ["string", "null"]},
        "name": shared.trait_schema(),
        "steps": {"type": "array", "items": shared.RUNBOOK_STEP, "minItems": 1},
        "disable_ramdisk": {"type": ["boolean", "null"]},
        "extra": {"type": ["object", "null"]},
        "public": {"type": ["boolean", "null"]},
        "owner": {"type": ["string", "null"], "maxLength": 255},
    }
    if req.context.at_least(*TRAITS_VERSION):
        properties["name"] = NAME_SCHEMA
        properties["description"] = {"type": ["string", "null"], "maxLength": 255}
    return {"type": "object", "properties": properties, "required": ["steps", "name"],
            "additionalProperties": False}


def _patchable(req: falcon.Request) -> tuple[str, ...]:
    base = ("disable_ramdisk", "extra", "name", "owner", "public", "steps")
    return (*base, "description") if req.context.at_least(*TRAITS_VERSION) else base


def _render(req: falcon.Request, runbook: dict[str, Any], fields: list[str] | None = None) -> dict[str, Any]:
    shown_fields = BASE_FIELDS + (("description",) if req.context.at_least(*TRAITS_VERSION) else ())
    body = shared.body(req, "runbooks", {**runbook, "disable_ramdisk": bool(runbook["disable_ramdisk"]),
                                         "public": bool(runbook["public"])}, shown_fields, None)
    if req.context.at_least(*TRAITS_VERSION):
        body["traits"] = list(runbook["traits"])
    if fields is not None:
        unknown = set(fields) - set(body)
        if unknown:
            raise BadRequest(f'Field(s) "{", ".join(sorted(unknown))}" are not valid')
        body = {key: value for key, value in body.items() if key in fields or key == "links"}
    return body


def _target(runbook: dict[str, Any] | None) -> dict[str, Any]:
    return {"runbook.owner": (runbook or {}).get("owner") or ""}


def _find_visible(state: BaremetalState, req: falcon.Request, ident: str, rule: str) -> dict[str, Any]:
    """The runbook, when the caller may see it (404 otherwise) and ``rule`` allows (403 otherwise)."""
    runbook = shared.find(state, db.RUNBOOKS, ident, NOT_FOUND)
    if not runbook["public"] and not state.policy.allows(req.context, "baremetal:runbook:get", _target(runbook)):
        raise NotFound(NOT_FOUND.format(ident=ident))
    if rule != "baremetal:runbook:get":
        state.policy.authorize(req.context, rule, _target(runbook))
    return runbook


def usable_runbook(state: BaremetalState, req: falcon.Request, ident: str) -> dict[str, Any]:
    """The runbook a provisioning request names, when the caller may use it."""
    runbook = shared.find(state, db.RUNBOOKS, ident, NOT_FOUND)
    if runbook["public"]:
        return runbook
    if not state.policy.allows(req.context, "baremetal:runbook:get", _target(runbook)):
        raise NotFound(NOT_FOUND.format(ident=ident))
    state.policy.authorize(req.context, "baremetal:runbook:use", _target(runbook))
    return runbook


def list_runbooks(state: BaremetalState, req: falcon.Request, resp: falcon.Response) -> None:
    shared.require_version(req, VERSION, NOT_ALLOWED)
    filters = {}
    if not req.context.is_admin:
        state.policy.authorize(req.context, "baremetal:runbook:list")
        filters["project"] = req.context.project_id or ""
    send_json(resp, shared.list_page(state, req, db.RUNBOOKS, collection="runbooks", kind_name="Runbook",
                                     render=lambda item, fields: _render(req, item, fields), filters=filters))


def show(state: BaremetalState, req: falcon.Request, resp: falcon.Response, runbook_ident: str) -> None:
    shared.require_version(req, VERSION, NOT_ALLOWED)
    runbook = _find_visible(state, req, runbook_ident, "baremetal:runbook:get")
    send_json(resp, _render(req, runbook, shared.parse_fields(req)))


def _check(req: falcon.Request, body: Any, what: str) -> dict[str, Any]:
    """``what`` names the document in schema errors: "runbook" on create, "patch" on update (upstream's)."""
    schemas.validate(_schema(req), body, what)
    shared.check_uuid(body)
    shared.check_duplicates(body["steps"])
    return body


def create(state: BaremetalState, req: falcon.Request, resp: falcon.Response) -> None:
    shared.require_version(req, VERSION, NOT_ALLOWED)
    state.policy.authorize(req.context, "baremetal:runbook:create")
    body = _check(req, common.json_body(state, req), "runbook")
    owner = body.get("owner")
    # As upstream: whoever is not system-scoped (a project admin too)
    # creates runbooks of their own project; an admin without any project
    # (noauth2) names the owner it wants.
    project = req.context.project_id
    if req.context.system_scope != "all" and (project or not req.context.is_admin):
        if owner and owner != project:
            raise BadRequest("Cannot create a runbook as a project scoped admin with an owner other than your own "
                             "project.")
        if project and body.get("public"):
            raise BadRequest("Cannot create a public runbook as a project scoped admin.")
        owner = project
    if body.get("public") and owner:
        raise BadRequest("There cannot be an owner for a public runbook")
    values = {"uuid": body.get("uuid") or uuidutils.generate_uuid(), "name": body["name"],
              "extra": body.get("extra") or {}, "public": bool(body.get("public")), "owner": owner,
              "disable_ramdisk": bool(body.get("disable_ramdisk")), "description": body.get("description")}
    steps = shared.normalized_steps(body["steps"], "order")
    # Before 1.112 the name is the trait that lets a node use the runbook.
    traits = [] if req.context.at_least(*TRAITS_VERSION) else [body["name"]]
    runbook_id = _write(state, lambda conn: db.insert(conn, db.RUNBOOKS, values, steps, traits), values)
    with state.db.read() as conn:
        runbook = db.get(conn, db.RUNBOOKS, set_id=runbook_id)
    assert runbook is not None
    resp.set_header("Location", f"{links.base(req)}/v1/runbooks/{runbook['uuid']}")
    send_json(resp, _render(req, runbook), 201)


def _write(state: BaremetalState, work: Any, values: dict[str, Any]) -> Any:
    try:
        return state.db.write(work)
    except Exception as error:
        if not is_duplicate(error):
            raise
        with state.db.read() as conn:
            if db.get(conn, db.RUNBOOKS, name=values.get("name")) is not None:
                raise Conflict(f"A runbook with name {values['name']} already exists.") from None
        raise Conflict(f"A runbook with UUID {values.get('uuid')} already exists.") from None


def patch(state: BaremetalState, req: falcon.Request, resp: falcon.Response, runbook_ident: str) -> None:
    shared.require_version(req, VERSION, NOT_ALLOWED)
    runbook = _find_visible(state, req, runbook_ident, "baremetal:runbook:update")
    result = shared.patched(runbook, common.json_body(state, req), _patchable(req))
    for step in result.get("steps") or []:
        schemas.validate(shared.RUNBOOK_STEP, step, None)
    document = {key: value for key, value in result.items() if value is not None}
    _check(req, document, "patch")
    if result.get("public") and result.get("owner"):
        raise BadRequest("There cannot be an owner for a public runbook")
    if result.get("owner") != runbook["owner"] or bool(result.get("public")) != bool(runbook["public"]):
        state.policy.authorize(req.context, "baremetal:runbook:update:owner", _target(runbook))
    values = {field: result.get(field) for field in _patchable(req) if field != "steps"}
    values["extra"] = values.get("extra") or {}
    values["public"] = bool(values.get("public"))
    values["disable_ramdisk"] = bool(values.get("disable_ramdisk"))
    steps = shared.normalized_steps(result["steps"], "order")
    _write(state, lambda conn: db.update(conn, db.RUNBOOKS, runbook["id"], values, steps), values)
    with state.db.read() as conn:
        updated = db.get(conn, db.RUNBOOKS, set_id=runbook["id"])
    assert updated is not None
    send_json(resp, _render(req, updated))


def delete(state: BaremetalState, req: falcon.Request, resp: falcon.Response, runbook_ident: str) -> None:
    shared.require_version(req, VERSION, NOT_ALLOWED)
    runbook = _find_visible(state, req, runbook_ident, "baremetal:runbook:delete")
    state.db.write(lambda conn: db.delete(conn, db.RUNBOOKS, runbook["id"]))
    send_empty(resp, 204)


# ------------------------------------------------------------ traits


def _check_trait(trait: Any) -> None:
    if not schemas.is_valid_trait(trait):
        raise BadRequest(f"Schema error for trait: {trait!r} is not valid under any of the given schemas. Possible "
                         f"root cause: {trait!r} does not match '{schemas.TRAIT_PATTERN}'")


def get_traits(state: BaremetalState, req: falcon.Request, resp: falcon.Response, runbook_ident: str) -> None:
    runbook = _find_visible(state, req, runbook_ident, "baremetal:runbook:get")
    send_json(resp, {"traits": list(runbook["traits"])})


def set_traits(state: BaremetalState, req: falcon.Request, resp: falcon.Response, runbook_ident: str) -> None:
    runbook = _find_visible(state, req, runbook_ident, "baremetal:runbook:update")
    body = common.json_body(state, req)
    if not isinstance(body, dict) or set(body) != {"traits"} or not isinstance(body["traits"], list):
        raise BadRequest("Schema error for body: the body must be {\"traits\": [...]}")
    for trait in body["traits"]:
        _check_trait(trait)
    state.db.write(lambda conn: db.set_traits(conn, runbook["id"], body["traits"]))
    send_empty(resp, 204)


def add_trait(state: BaremetalState, req: falcon.Request, resp: falcon.Response, runbook_ident: str,
              trait: str) -> None:
    runbook = _find_visible(state, req, runbook_ident, "baremetal:runbook:update")
    if common.json_body(state, req, required=False) is not None:
        raise BadRequest("No body should be provided when adding a trait")
    _check_trait(trait)
    state.db.write(lambda conn: db.add_trait(conn, runbook["id"], trait))
    resp.set_header("Location", f"{links.base(req)}/v1/runbooks/{runbook_ident}/traits/{trait}")
    send_empty(resp, 204)


def remove_traits(state: BaremetalState, req: falcon.Request, resp: falcon.Response, runbook_ident: str) -> None:
    runbook = _find_visible(state, req, runbook_ident, "baremetal:runbook:update")
    state.db.write(lambda conn: db.set_traits(conn, runbook["id"], []))
    send_empty(resp, 204)


def remove_trait(state: BaremetalState, req: falcon.Request, resp: falcon.Response, runbook_ident: str,
                 trait: str) -> None:
    runbook = _find_visible(state, req, runbook_ident, "baremetal:runbook:update")
    # Removing a trait the runbook does not have is a no-op, as upstream.
    state.db.write(lambda conn: db.remove_trait(conn, runbook["id"], trait))
    send_empty(resp, 204)


def _t(handler: object) -> Endpoint:
    return Endpoint(handler, min_version=TRAITS_VERSION)  # type: ignore[arg-type]


ROUTES = [
    Route("/v1/runbooks", {"GET": list_runbooks, "POST": create}),
    Route("/v1/runbooks/{runbook_ident}", {"GET": show, "PATCH": patch, "DELETE": delete}),
    Route("/v1/runbooks/{runbook_ident}/traits", {"GET": _t(get_traits), "PUT": _t(set_traits),
                                                 "DELETE": _t(remove_traits)}),
    Route("/v1/runbooks/{runbook_ident}/traits/{trait}", {"PUT": _t(add_trait), "DELETE": _t(remove_trait)}),
]
