"""What every Bare Metal handler needs: body parsing, node lookup, access checks."""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

import falcon
import orjson
from oslo_utils import strutils, uuidutils

from corral.baremetal.api.state import BaremetalState
from corral.baremetal.db import nodes as node_db
from corral.core.errors import ApiError, BadRequest, NotFound
from corral.core.http import read_body


def json_body(state: BaremetalState, req: falcon.Request, *, required: bool = True) -> Any:
    data = read_body(req, state.conf.api.max_request_body_size)
    if not data.strip():
        if required:
            raise BadRequest("Missing request body.")
        return None
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as error:
        # Upstream answers malformed JSON with a 500; a client error is what it is.
        raise BadRequest(f"Malformed JSON in request body: {error}") from None


def node_target(node: dict[str, Any] | None) -> dict[str, str]:
    if node is None:
        return {}
    return {"node.owner": node.get("owner") or "", "node.lessee": node.get("lessee") or ""}


def authorize(state: BaremetalState, req: falcon.Request, rule: str, node: dict[str, Any] | None = None) -> None:
    state.policy.authorize(req.context, rule, node_target(node))


def allowed(state: BaremetalState, req: falcon.Request, rule: str, node: dict[str, Any] | None = None) -> bool:
    return state.policy.allows(req.context, rule, node_target(node))


# Fields a caller sees only with their own "baremetal:node:get:<field>" rule.
REDACTED_FIELDS = ("last_error", "reservation", "driver_internal_info", "driver_info")


def redact(state: BaremetalState, req: falcon.Request, node: dict[str, Any], body: dict[str, Any],
           secrets: SecretsShown | None = None) -> dict[str, Any]:
    """Hide what the caller's policy does not let it read (a lessee sees less than the owner).

    Secrets are masked for every caller, operators included, unless
    ``show_password`` / ``show_instance_secrets`` allow them (by default
    nobody).  A list passes ``secrets`` decided once for the whole page.
    """
    if not req.context.is_admin:
        for field in REDACTED_FIELDS:
            if field in body and not allowed(state, req, f"baremetal:node:get:{field}", node):
                body[field] = f"** Value Redacted - Requires baremetal:node:get:{field} permission. **"
    return mask_secrets(body, secrets or secrets_shown(state, req, node))


class SecretsShown:
    """Whether a caller may read driver secrets and instance secrets."""

    __slots__ = ("driver", "instance")

    def __init__(self, driver: bool, instance: bool) -> None:
        self.driver = driver
        self.instance = instance


def secrets_shown(state: BaremetalState, req: falcon.Request, node: dict[str, Any] | None = None) -> SecretsShown:
    # Upstream's rule names: "show_password" covers every secret in driver_info.
    return SecretsShown(allowed(state, req, "show_password", node), allowed(state, req, "show_instance_secrets", node))


MASK = "******"


def mask_secrets(body: dict[str, Any], shown: SecretsShown) -> dict[str, Any]:
    """Mask secret-bearing keys as upstream does (``oslo_utils.strutils.mask_dict_password``).

    Keys naming a password, secret, token or key material anywhere in
    ``driver_info`` (BMC credentials) and ``instance_info`` (config drive,
    image credentials) read ``******``; so does instance_info's
    ``image_url`` (it may carry a temporary URL's signature) and the agent
    token in ``driver_internal_info``.  The node row itself is not changed.
    """
    info = body.get("driver_info")
    if not shown.driver and isinstance(info, dict):
        body["driver_info"] = strutils.mask_dict_password(info, MASK)
    info = body.get("instance_info")
    if not shown.instance and isinstance(info, dict):
        masked = strutils.mask_dict_password(info, MASK)
        # A config drive given as a JSON object is a dictionary, which mask_dict_password walks
        # through: it is masked whole, as upstream does.
        for key in ("image_url", "configdrive"):
            if masked.get(key):
                masked[key] = MASK
        body["instance_info"] = masked
    internal = body.get("driver_internal_info")
    if isinstance(internal, dict) and internal.get("agent_secret_token"):
        body["driver_internal_info"] = {**internal, "agent_secret_token": MASK}
    return body


def can_see(req: falcon.Request, node: dict[str, Any]) -> bool:
    context = req.context
    if context.is_admin:
        return True
    project = context.project_id
    return project is not None and project in (node.get("owner"), node.get("lessee"))


def find_node(state: BaremetalState, req: falcon.Request, ident: str, *, shown: bool = False) -> dict[str, Any]:
    """The node named by UUID or (from 1.5) by name; 404 when absent or not visible.

    ``shown``: with what its body shows from other tables, read with it
    (:func:`corral.baremetal.db.nodes.get_shown`).
    """
    node = _lookup(state, req, ident, shown)
    if node is None and ident.endswith(".json") and not req.context.at_least(1, 91):
        # Before 1.91 a trailing ".json" asked for JSON rather than naming the node.
        node = _lookup(state, req, ident.removesuffix(".json"), shown)
    # A node the caller may not see does not exist for it (404, not 403).
    if node is None or not (can_see(req, node) or allowed(state, req, "baremetal:node:get", node)):
        raise NotFound(f"Node {ident} could not be found.")
    return node


def _lookup(state: BaremetalState, req: falcon.Request, ident: str, shown: bool) -> dict[str, Any] | None:
    get = node_db.get_shown if shown else node_db.get
    if uuidutils.is_uuid_like(ident):
        with state.db.read() as conn:
            return get(conn, uuid=ident)
    if req.context.at_least(1, 5):
        with state.db.read() as conn:
            return get(conn, name=ident)
    return None


def traits_of(state: BaremetalState, node_ids: list[int]) -> dict[int, list[str]]:
    with state.db.read() as conn:
        return node_db.traits_of(conn, node_ids)


def conductor_call(state: BaremetalState, node: dict[str, Any], method: str, **params: Any) -> Any:
    return state.rpc.call(node, method, node_id=node["id"], **params)


def accepted(resp: falcon.Response, location: str) -> None:
    resp.status = 202
    resp.data = b""
    resp.set_header("Location", location)
    # Upstream's 202 carries no body and no content type (clients decode JSON otherwise).
    resp.content_type = None  # type: ignore[assignment]


def not_found_unless(condition: bool, message: str) -> None:
    if not condition:
        raise NotFound(message)


def client_error(message: str, status: int = 400) -> ApiError:
    return ApiError(message, status=status)


def paging(
    state: BaremetalState,
    req: falcon.Request,
    *,
    sort_keys: Collection[str],
    find_marker: Callable[[Any, str], dict[str, Any] | None],
    kind: str,
) -> tuple[int, str, str, dict[str, Any] | None]:
    """``limit``, ``sort_key``, ``sort_dir`` and the ``marker`` row of a collection request."""
    max_limit = state.conf.api.max_limit
    limit = max_limit
    raw_limit = req.get_param("limit")
    if raw_limit is not None:
        try:
            limit = int(raw_limit)
        except ValueError:
            raise BadRequest(f"Invalid limit: {raw_limit!r} is not an integer.") from None
        if limit <= 0:
            raise BadRequest("Limit must be positive")
        limit = min(limit, max_limit)
    sort_key = req.get_param("sort_key") or "id"
    if sort_key not in sort_keys:
        raise BadRequest(f'The sort_key value "{sort_key}" is an invalid field for sorting')
    sort_dir = (req.get_param("sort_dir") or "asc").lower()
    if sort_dir not in ("asc", "desc"):
        raise BadRequest(f"Invalid sort direction: {sort_dir}. Acceptable values are 'asc' or 'desc'")
    marker = None
    marker_uuid = req.get_param("marker")
    if marker_uuid is not None:
        if uuidutils.is_uuid_like(marker_uuid):
            with state.db.read() as conn:
                marker = find_marker(conn, marker_uuid)
        if marker is None:
            raise NotFound(f"{kind} {marker_uuid} could not be found.")
    return limit, sort_key, sort_dir, marker
