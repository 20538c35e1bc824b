"""Validation and lookups shared by the port, port group, chassis and volume handlers."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any

import falcon
import jsonschema
from oslo_utils import strutils, uuidutils

from corral.baremetal.api import common
from corral.baremetal.api.resource_views import ResourceView, request_not_acceptable
from corral.baremetal.api.state import BaremetalState
from corral.baremetal.db import nodes as node_db
from corral.baremetal.db import ports as port_db
from corral.baremetal.domain import ports as port_rules
from corral.core.errors import BadRequest, NotFound


def validator(schema: Mapping[str, Any]) -> jsonschema.Draft7Validator:
    """A validator built once per schema (module constants hold them)."""
    return jsonschema.Draft7Validator(schema)


def check_schema(checker: jsonschema.Draft7Validator, value: Any, name: str) -> None:
    """400 with upstream's text: "Schema error for <name>: <message>[. Possible root cause: <cause>]"."""
    error = jsonschema.exceptions.best_match(checker.iter_errors(value))
    if error is None:
        return
    message = f"Schema error for {name}: {error.message}"
    cause = None
    current = error
    while current.context:
        current = jsonschema.exceptions.best_match(current.context)
        cause = current.message
    if cause is not None:
        message += f". Possible root cause: {cause}"
    raise BadRequest(message)


def as_boolean(name: str, value: Any) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    try:
        return strutils.bool_from_string(value, strict=True)
    except ValueError as error:
        raise BadRequest(f"Invalid {name}: {error}") from None


def as_uuid(name: str, value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not uuidutils.is_uuid_like(value):
        raise BadRequest(f"Expected UUID for {name}: {value}")
    return value


def as_mac(name: str, value: Any) -> str | None:
    if value is None:
        return None
    mac = port_rules.normalize_mac(value)
    if mac is None:
        raise BadRequest(f"Expected valid MAC address for {name}: {value}")
    return mac


def patch_paths(operations: list[dict[str, Any]]) -> list[str]:
    return [operation["path"] for operation in operations]


def is_path_updated(operations: list[dict[str, Any]], path: str) -> bool:
    return any(operation["path"] == path or operation["path"].startswith(f"{path}/") for operation in operations)


def check_patch_fields(operations: list[dict[str, Any]], allowed: Collection[str]) -> None:
    """Only ``allowed`` top-level fields may be patched (upstream's wording)."""
    for operation in operations:
        field = operation["path"].split("/")[1]
        if field not in allowed:
            raise BadRequest(f"Cannot patch {operation['path']}. Only the following can be updated: "
                             f"{', '.join(allowed)}")
        if operation["op"] != "remove" and "value" not in operation:
            raise BadRequest(f"'add' and 'replace' operations need a value: {operation['path']}")


def list_paging(state: BaremetalState, req: falcon.Request, view: ResourceView, *, sort_keys: Collection[str],
                json_fields: Collection[str], find_marker: Callable[[Any, str], dict[str, Any] | None],
                kind: str) -> tuple[int, str, str, dict[str, Any] | None]:
    """limit, sort_key, sort_dir and marker; JSON columns cannot sort (upstream's two messages)."""
    limit = req.get_param("limit")
    if limit is not None:
        try:
            int(limit)
        except ValueError:
            raise BadRequest(f"Expected an integer for limit: {limit}") from None
    marker = req.get_param("marker")
    if marker is not None:
        as_uuid("marker", marker)
    sort_key = req.get_param("sort_key") or "id"
    if sort_key in json_fields:
        raise BadRequest(f"The sort_key value {sort_key} is an invalid field for sorting")
    if sort_key in view.strict and not view.visible(sort_key, req):
        raise request_not_acceptable()
    return common.paging(state, req, sort_keys=sort_keys, find_marker=find_marker, kind=kind)


def node_for_child(state: BaremetalState, req: falcon.Request, ident: str, *, field: str = "node_uuid",
                   by_name: bool = False) -> dict[str, Any]:
    """The node a new port/port group/volume record names: 400 when absent, as upstream answers."""
    with state.db.read() as conn:
        if uuidutils.is_uuid_like(ident):
            node = node_db.get(conn, uuid=ident)
        elif by_name:
            node = node_db.get(conn, name=ident)
        else:
            node = None
    if node is None or not common.can_see(req, node):
        raise BadRequest(f"Node {ident} could not be found.")
    return node


def owner_view(row: dict[str, Any]) -> dict[str, Any]:
    """The owner and lessee of a port group's node, as the policy checks read them."""
    return {"owner": row.get("node_owner"), "lessee": row.get("node_lessee")}


def find_portgroup(state: BaremetalState, req: falcon.Request, ident: str) -> dict[str, Any]:
    """The port group named or numbered ``ident``, 404 when missing or not the caller's to see."""
    with state.db.read() as conn:
        if uuidutils.is_uuid_like(ident):
            portgroup = port_db.get_portgroup(conn, uuid=ident)
        else:
            portgroup = port_db.get_portgroup(conn, name=ident)
    if portgroup is None or not common.can_see(req, owner_view(portgroup)):
        raise NotFound(f"Portgroup {ident} could not be found.")
    return portgroup


def patched_node(state: BaremetalState, req: falcon.Request, row: dict[str, Any], ident: str) -> dict[str, Any]:
    """The node a patched record belongs to; a new one must be visible and have the same owner."""
    with state.db.read() as conn:
        current = node_db.get(conn, node_id=row["node_id"])
        if ident == row["node_uuid"]:
            node = current
        elif uuidutils.is_uuid_like(ident):
            node = node_db.get(conn, uuid=ident)
        else:
            node = node_db.get(conn, name=ident)
    if node is None or not common.can_see(req, node) or (current or {}).get("owner") != node.get("owner"):
        # The same answer whether the node is missing or not the caller's (nothing disclosed).
        raise BadRequest(f"Unable to apply the requested node_uuid '{ident}'. Requested value was invalid.")
    return node
