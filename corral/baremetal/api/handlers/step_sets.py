"""What deploy templates and runbooks share: bodies, lookup, list, patch."""

from __future__ import annotations

import collections
import copy
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

import falcon
from oslo_utils import strutils, uuidutils

from corral.baremetal.api import common, links, schemas, views
from corral.baremetal.api.handlers.nodes import apply_patch
from corral.baremetal.api.state import BaremetalState
from corral.baremetal.db import step_sets as db
from corral.core.errors import BadRequest, MethodNotAllowed, NotFound

STEP_INTERFACES = ("bios", "boot", "console", "deploy", "firmware", "inspect", "management", "network", "power",
                   "raid", "rescue", "storage", "vendor")
_NUMBER = {"anyOf": [{"type": "integer", "minimum": 0}, {"type": "string", "minLength": 1, "pattern": "^[0-9]+$"}]}
TRAIT = {"type": "string", "minLength": 1, "maxLength": 255,
         "anyOf": [{"pattern": schemas.TRAIT_PATTERN}, {"enum": []}]}

DEPLOY_STEP = {
    "type": "object",
    "properties": {"args": {"type": "object"}, "interface": {"type": "string", "enum": list(STEP_INTERFACES)},
                   "priority": _NUMBER, "step": {"type": "string", "minLength": 1}},
    "required": ["interface", "step", "args", "priority"],
    "additionalProperties": False,
}
RUNBOOK_STEP = {
    "type": "object",
    "properties": {"args": {"type": "object"},
                   "interface": {"type": "string", "enum": ["vendor", "power", "management", "firmware", "deploy",
                                                            "bios", "raid"]},
                   "step": {"type": "string", "minLength": 1}, "order": _NUMBER},
    "required": ["interface", "step", "order"],
    "additionalProperties": False,
}


def trait_schema() -> dict[str, Any]:
    """A trait: custom or one of os-traits' standard names."""
    return {**TRAIT, "anyOf": [{"pattern": schemas.TRAIT_PATTERN},
                               {"enum": sorted(schemas._standard_traits())}]}  # noqa: SLF001


def check_uuid(body: dict[str, Any]) -> None:
    """A given ``uuid`` must be one: upstream checks it after the schema, in its own words."""
    value = body.get("uuid")
    if value is not None and not uuidutils.is_uuid_like(value):
        raise BadRequest(f"Expected UUID for uuid: {value}")


def check_duplicates(steps: list[dict[str, Any]]) -> None:
    counter = collections.Counter((step["interface"], step["step"]) for step in steps)
    duplicates = sorted(f"interface: {interface}, step: {step}"
                        for (interface, step), count in counter.items() if count > 1)
    if duplicates:
        raise BadRequest("Deploy template invalid: Duplicate deploy steps. A template cannot have multiple deploy "
                         f"steps with the same interface and step. Duplicates: {'; '.join(duplicates)}.")


def normalized_steps(steps: list[dict[str, Any]], number: str) -> list[dict[str, Any]]:
    """Steps as stored: numbers given as text turned into integers, args defaulted."""
    return [{"interface": step["interface"], "step": step["step"], "args": step.get("args") or {},
             number: int(step[number])} for step in steps]


def masked_steps(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**step, "args": strutils.mask_dict_password(step["args"], "******")} if step.get("args") else step
            for step in steps]


def body(req: falcon.Request, collection: str, item: dict[str, Any], fields: tuple[str, ...],
         wanted: list[str] | None) -> dict[str, Any]:
    shown: dict[str, Any] = {"uuid": item["uuid"], "created_at": views.timestamp(item["created_at"]),
                             "updated_at": views.timestamp(item["updated_at"])}
    for field in fields:
        shown[field] = item.get(field)
    shown["extra"] = item.get("extra") or {}
    shown["links"] = links.resource(req, collection, item["uuid"])
    shown["steps"] = masked_steps(item["steps"])
    if wanted is not None:
        unknown = set(wanted) - set(shown)
        if unknown:
            raise BadRequest(f'Field(s) "{", ".join(sorted(unknown))}" are not valid')
        shown = {key: value for key, value in shown.items() if key in wanted or key == "links"}
    return shown


def parse_fields(req: falcon.Request) -> list[str] | None:
    raw = req.get_param("fields")
    if raw is None:
        return None
    return [field.strip() for field in raw.split(",") if field.strip()]


def require_version(req: falcon.Request, version: tuple[int, int], message: str) -> None:
    if not req.context.at_least(*version):
        if req.method in ("GET", "HEAD"):
            raise NotFound(message)
        raise MethodNotAllowed(message)


def find(state: BaremetalState, kind: db.Kind, ident: str, not_found: str) -> dict[str, Any]:
    with state.db.read() as conn:
        item = db.get(conn, kind, uuid=ident) if uuidutils.is_uuid_like(ident) else db.get(conn, kind, name=ident)
    if item is None:
        raise NotFound(not_found.format(ident=ident))
    return item


def list_page(state: BaremetalState, req: falcon.Request, kind: db.Kind, *, collection: str, kind_name: str,
              render: Callable[[dict[str, Any], list[str] | None], dict[str, Any]],
              filters: dict[str, Any] | None = None) -> dict[str, Any]:
    fields = parse_fields(req)
    detail = req.get_param("detail")
    if detail is not None and strutils.bool_from_string(detail, default=False):
        if fields is not None:
            raise BadRequest("Can not specify ?detail=True and fields in the same request.")
    elif fields is None:
        fields = ["uuid", "name"]
    limit, sort_key, sort_dir, marker = common.paging(
        state, req, sort_keys=db.SORT_KEYS, kind=kind_name,
        find_marker=lambda conn, uuid: db.get(conn, kind, uuid=uuid))
    with state.db.read() as conn:
        found = db.list_sets(conn, kind, filters=filters, sort_key=sort_key, sort_dir=sort_dir, limit=limit,
                             marker=marker)
    page: dict[str, Any] = {collection: [render(item, fields) for item in found]}
    if found and len(found) == limit:
        query = {"sort_key": sort_key, "sort_dir": sort_dir}
        if req.get_param("fields") is not None and fields is not None:
            query["fields"] = ",".join(fields)
        query["limit"] = str(limit)
        query["marker"] = found[-1]["uuid"]
        page["next"] = f"{links.base(req)}/v1/{collection}?{urlencode(query, safe=',')}"
    return page


def patched(item: dict[str, Any], operations: Any, allowed: tuple[str, ...]) -> dict[str, Any]:
    """The item after a JSON patch limited to ``allowed`` top-level fields."""
    schemas.validate(schemas.PATCH, operations, "patch")
    for operation in operations:
        field = operation["path"].split("/")[1]
        if field not in allowed:
            raise BadRequest(f"Cannot patch {operation['path']}. Only the following can be updated: "
                             f"{', '.join(allowed)}")
    document = {field: copy.deepcopy(item.get(field)) for field in allowed}
    return apply_patch(document, operations)
