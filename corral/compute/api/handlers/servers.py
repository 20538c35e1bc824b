"""/servers: boot, list, detail, show, delete, and the restore/forceDelete actions."""

from __future__ import annotations

import datetime
from typing import Any
from urllib.parse import urlencode

import falcon

from corral.core import errors
from corral.core.http import Route, send_empty, send_json
from corral.compute.api import links, policies, util, validation, views
from corral.compute.api.state import ComputeState
from corral.compute.db import cell_queries as cq
from corral.compute.db import flavors as flavor_db
from corral.compute.db import keypairs as keypair_db
from corral.compute.db import server_groups as group_db
from corral.compute.domain import images, instance_list, server_groups, servers, states
from corral.compute.domain import services as service_domain
from corral.compute.domain.scheduling import known_zones
from corral.compute.glance import Credentials

CELL_DOWN_SUPPORT = (2, 69)
NETWORKS_REQUIRED = (2, 37)
STRICT_STATUS = (2, 38)
DESCRIPTION = (2, 19)
BOOT_TAGS = (2, 52)
PAGING_PARAMS = ("limit", "marker", "sort_key", "sort_dir")

# Filters any caller may use, by the microversion they appeared in.
_USER_FILTERS: list[tuple[tuple[int, int], tuple[str, ...]]] = [
    ((2, 1), ("reservation_id", "name", "status", "image", "flavor", "ip", "changes-since", "all_tenants")),
    ((2, 5), ("ip6",)),
    ((2, 26), ("tags", "tags-any", "not-tags", "not-tags-any")),
    ((2, 66), ("changes-before",)),
    ((2, 73), ("locked",)),
]
# Filters that select on a column directly (admins only, unless listed above).
_EXACT_FILTERS = {
    "reservation_id": "reservation_id", "host": "host", "node": "node", "hostname": "hostname",
    "availability_zone": "availability_zone", "key_name": "key_name", "user_id": "user_id",
    "uuid": "uuid", "vm_state": "vm_state", "task_state": "task_state", "config_drive": "config_drive",
    "launch_index": "launch_index",
}

_NAME = {"type": "string", "minLength": 1, "maxLength": 255}
# Upstream's parameter_types.name (printable, no leading or trailing whitespace).
_FORMATTED_NAME = {"type": "string", "format": "name", "minLength": 1, "maxLength": 255}
_BOOLEAN = validation.BOOLEAN
_UUID = {"type": "string", "format": "uuid"}
_HINTS = {
    "type": "object",
    "properties": {
        "group": {"oneOf": [{"type": "array", "items": _UUID}, _UUID]},
        "different_host": {"oneOf": [_UUID, {"type": "array", "items": _UUID}]},
        "same_host": {"type": ["string", "array"], "items": _UUID},
        "query": {"type": ["string", "object"]},
        "target_cell": _FORMATTED_NAME,
        "different_cell": {"type": ["string", "array"], "items": {"type": "string"}},
        "build_near_host_ip": {"type": "string", "oneOf": [{"format": "ipv4"}, {"format": "ipv6"}]},
        "cidr": {"type": "string", "pattern": "^/[0-9a-f.:]+$"},
    },
    "additionalProperties": True,
}
_CREATE = util.Schema({
    "type": "object",
    "properties": {
        "server": {
            "type": "object",
            "properties": {
                "name": _NAME,
                "imageRef": {"type": "string", "maxLength": 255},
                "flavorRef": {"type": ["string", "integer"], "minLength": 1},
                "availability_zone": _FORMATTED_NAME,
                "metadata": {
                    "type": "object",
                    "patternProperties": {"^[a-zA-Z0-9-_:. ]{1,255}$": {"type": "string", "maxLength": 255}},
                    "additionalProperties": False,
                },
                "networks": {
                    "oneOf": [
                        {"type": "string", "enum": ["none", "auto"]},
                        {"type": "array", "items": {"type": "object"}},
                    ]
                },
                "key_name": _FORMATTED_NAME,
                "min_count": {"type": ["integer", "string"], "pattern": "^[0-9]+$", "minimum": 1},
                "max_count": {"type": ["integer", "string"], "pattern": "^[0-9]+$", "minimum": 1},
                "return_reservation_id": {"type": ["boolean", "string"]},
                "description": {"type": ["string", "null"], "maxLength": 255},
                "user_data": {"type": "string", "format": "base64", "maxLength": 65535},
                "config_drive": _BOOLEAN,
                "security_groups": {"type": "array", "items": {"type": "object"}},
                "block_device_mapping_v2": {"type": "array", "items": {"type": "object"}},
                "adminPass": {"type": "string"},
                "accessIPv4": {"type": "string"},
                "accessIPv6": {"type": "string"},
                "OS-DCF:diskConfig": {"type": "string", "enum": ["AUTO", "MANUAL"]},
                "tags": {"type": "array", "maxItems": 50,
                         "items": {"type": "string", "pattern": "^[^,/]*$", "minLength": 1, "maxLength": 60}},
            },
            "required": ["name", "flavorRef"],
            "additionalProperties": False,
        },
        "os:scheduler_hints": _HINTS,
        "OS-SCH-HNT:scheduler_hints": _HINTS,
    },
    "required": ["server"],
    "additionalProperties": False,
})


# The largest min_count or max_count taken (upstream's schema has no bound).
_MAX_COUNT = 10**18

# What upstream's bool_from_string takes for true.
_TRUE = frozenset({"1", "t", "true", "on", "y", "yes"})


def _last_segment(reference: Any) -> str:
    return str(reference).rstrip("/").rsplit("/", 1)[-1]


# ------------------------------------------------------------------ list


def _parse_time(value: str, name: str) -> datetime.datetime:
    try:
        parsed = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
        if parsed.tzinfo is not None:
            # 0001-01-01T00:00:00+23:59 is a valid date-time before year 1 in UTC.
            parsed = parsed.astimezone(datetime.timezone.utc).replace(tzinfo=None)
    except (ValueError, OverflowError):
        raise errors.BadRequest(f"Invalid input for query parameters {name}. Value: {value}.") from None
    return parsed


def _allowed_user_filters(req: falcon.Request) -> set[str]:
    allowed: set[str] = set()
    for version, names in _USER_FILTERS:
        if req.context.at_least(*version):
            allowed.update(names)
    return allowed


def _search_options(state: ComputeState, req: falcon.Request) -> dict[str, list[str]]:
    options = {k: v for k, v in util.query_values(req).items() if k not in PAGING_PARAMS}
    if not util.allows(state, req, policies.SERVERS_ALLOW_ALL_FILTERS):
        # Upstream silently drops what a non-admin may not filter on.
        allowed = _allowed_user_filters(req)
        options = {k: v for k, v in options.items() if k in allowed}
    return options


def _is_all_tenants(options: dict[str, list[str]]) -> bool:
    if "all_tenants" not in options:
        return False
    value = options["all_tenants"][-1]
    if value == "":
        return True
    return util.parse_bool(value, "all_tenants")


def _sort(req: falcon.Request) -> list[tuple[str, bool]]:
    keys = util.query_values(req).get("sort_key", [])
    dirs = util.query_values(req).get("sort_dir", [])
    if not keys:
        direction = dirs[0] if dirs else "desc"
        if direction not in ("asc", "desc"):
            raise errors.BadRequest(f"Invalid sort direction: {direction}")
        return [("created_at", direction == "asc")]
    sort = []
    for index, key in enumerate(keys):
        if key not in cq.SORT_COLUMNS:
            raise errors.BadRequest(f"Invalid input for query parameters sort_key. Value: {key}.")
        direction = dirs[index] if index < len(dirs) else (dirs[-1] if dirs else "desc")
        if direction not in ("asc", "desc"):
            raise errors.BadRequest(f"Invalid input for query parameters sort_dir. Value: {direction}.")
        sort.append((cq.SORT_COLUMNS[key], direction == "asc"))
    return sort


def _filters(req: falcon.Request, options: dict[str, list[str]], all_tenants: bool) -> cq.InstanceFilters:
    context = req.context
    filters = cq.InstanceFilters(project_id=context.project_id)
    if all_tenants:
        project = options.get("project_id") or options.get("tenant_id")
        filters.project_id = project[-1] if project else None
    for name, values in options.items():
        value = values[-1]
        if name in ("launch_index", "power_state"):
            number = util.parse_int(value, name)
            filters.exact[name] = number
            if number is not None and number > util.MAX_INT:
                # No server has one that large (and the database could not compare with it).
                filters.match_nothing = True
        elif name in _EXACT_FILTERS:
            filters.exact[_EXACT_FILTERS[name]] = value
        elif name == "name":
            filters.name_contains = value
        elif name == "image":
            filters.exact["image_ref"] = _last_segment(value)
        elif name == "flavor":
            filters.exact["flavorid"] = _last_segment(value)
        elif name == "locked":
            filters.exact["locked"] = util.parse_bool(value, "locked")
        elif name == "status":
            vm_states: list[str] = []
            for status in values:
                selected = states.vm_states_for_status(status)
                if selected is None:
                    if context.at_least(*STRICT_STATUS):
                        raise errors.BadRequest(f"Invalid status value: {status}")
                    filters.match_nothing = True
                    selected = []
                vm_states += selected
            filters.one_of["vm_state"] = vm_states
            task_states = [states.task_states_for_status(status) for status in values]
            if task_states and all(tasks is not None for tasks in task_states):
                filters.one_of["task_state"] = sorted({t for tasks in task_states for t in tasks or []})
        elif name == "changes-since":
            filters.changes_since = _parse_time(value, name)
        elif name == "changes-before":
            filters.changes_before = _parse_time(value, name)
        elif name in ("tags", "tags-any", "not-tags", "not-tags-any"):
            # Comma-separated, as upstream splits them.
            setattr(filters, name.replace("-", "_"), value.split(","))
        elif name in ("ip", "ip6"):
            # No server has addresses in Corral.
            filters.match_nothing = True
    # Upstream's rules: without a ``deleted`` filter only servers that are
    # neither deleted nor soft-deleted are listed, unless changes-since or
    # changes-before ask for recent changes (deleted ones included); an
    # unrecognised ``deleted`` value means false.
    if "deleted" in options:
        filters.deleted = options["deleted"][-1].strip().lower() in _TRUE
    elif filters.changes_since is not None or filters.changes_before is not None:
        filters.deleted = "any"
    if filters.one_of.get("vm_state") == [states.DELETED]:
        if not context.is_admin:
            raise errors.Forbidden("Only administrators may list deleted instances")
        filters.deleted = True
    if filters.changes_since and filters.changes_before and filters.changes_since > filters.changes_before:
        raise errors.BadRequest("The value of changes-since must be less than or equal to changes-before.")
    return filters


def _list(state: ComputeState, req: falcon.Request, rule: str, all_tenants_rule: str, detail: bool
          ) -> tuple[instance_list.ListResult, int]:
    context = req.context
    util.authorize(state, req, rule, {"project_id": context.project_id})
    options = _search_options(state, req)
    all_tenants = _is_all_tenants(options)
    if all_tenants:
        util.authorize(state, req, all_tenants_rule, {"project_id": context.project_id})
    raw = util.query_values(req)
    max_limit = state.conf.api.max_limit
    limit = util.parse_int(util.last_value(req, "limit"), "limit")
    limit = max_limit if limit is None else min(limit, max_limit)
    plain = set(options) <= {"all_tenants"}
    request = instance_list.ListRequest(
        filters=_filters(req, options, all_tenants),
        sort=_sort(req),
        limit=limit,
        marker=util.last_value(req, "marker"),
        cell_down_support=(
            context.at_least(*CELL_DOWN_SUPPORT) and plain and not any(p in raw for p in PAGING_PARAMS)
        ),
        minimal_project_id=None if all_tenants else context.project_id,
        include_build_requests=plain and "sort_key" not in raw,
        with_metadata=detail,
    )
    result = instance_list.list_instances(
        state.api_db, state.cells, request,
        skip_down_cells=state.conf.api.list_records_by_skipping_down_cells,
    )
    return result, limit


def _next_link(state: ComputeState, req: falcon.Request, collection: str, returned: list[str], limit: int
               ) -> list[dict[str, str]] | None:
    if not returned or len(returned) < limit or "limit" not in req.params:
        return None
    params = [(k, v) for k, values in util.query_values(req).items() if k != "marker" for v in values]
    params.append(("marker", returned[-1]))
    return [{"rel": "next", "href": links.collection_url(state, req, collection) + "?" + urlencode(params)}]


def index(state: ComputeState, req: falcon.Request, resp: falcon.Response) -> None:
    result, limit = _list(state, req, policies.SERVERS_INDEX, policies.SERVERS_INDEX_ALL_TENANTS, detail=False)
    body: dict[str, Any] = {
        "servers": [views.minimal_index(state, req, m) for m in result.minimal]
        + [views.index_entry(state, req, i) for i in result.instances]
    }
    next_link = _next_link(state, req, "servers", [i["uuid"] for i in result.instances], limit)
    if next_link:
        body["servers_links"] = next_link
    send_json(resp, body)


def _host_statuses(state: ComputeState, req: falcon.Request, instances: list[dict[str, Any]]
                   ) -> dict[tuple[str, str], str] | None:
    if not req.context.at_least(*views.HOST_STATUS) or not util.allows(state, req, policies.SERVERS_SHOW_HOST_STATUS):
        return None
    wanted: dict[str, set[str]] = {}
    for instance in instances:
        cell_uuid = instance.get(instance_list.CELL_KEY)
        if cell_uuid and instance.get("host"):
            wanted.setdefault(cell_uuid, set()).add(instance["host"])
    return service_domain.host_statuses(state, wanted)


class _Policies:
    """Per-request policy decisions for server views (checked once, not per server)."""

    def __init__(self, state: ComputeState, req: falcon.Request) -> None:
        self.extended = util.allows(state, req, policies.EXTENDED_SERVER_ATTRIBUTES)
        self.extra_specs = util.allows(state, req, policies.SERVERS_SHOW_FLAVOR_EXTRA_SPECS)


def _full(state: ComputeState, req: falcon.Request, instance: dict[str, Any], metadata: dict[str, str],
          statuses: dict[tuple[str, str], str] | None, allowed: _Policies, single: bool = False,
          server_groups: list[str] | None = None) -> dict[str, Any]:
    host_status = None
    if statuses is not None:
        host = instance.get("host")
        host_status = statuses.get((instance.get(instance_list.CELL_KEY) or "", host), "UNKNOWN") if host else ""
    return views.full_view(state, req, instance, metadata, extended=allowed.extended, host_status=host_status,
                           extra_specs=allowed.extra_specs, single=single, server_groups=server_groups)


def detail(state: ComputeState, req: falcon.Request, resp: falcon.Response) -> None:
    result, limit = _list(state, req, policies.SERVERS_DETAIL, policies.SERVERS_DETAIL_ALL_TENANTS, detail=True)
    statuses = _host_statuses(state, req, result.instances)
    allowed = _Policies(state, req)
    body: dict[str, Any] = {
        "servers": [views.minimal_detail(state, req, m) for m in result.minimal]
        + [_full(state, req, i, i.get(instance_list.METADATA_KEY, {}), statuses, allowed) for i in result.instances]
    }
    next_link = _next_link(state, req, "servers/detail", [i["uuid"] for i in result.instances], limit)
    if next_link:
        body["servers_links"] = next_link
    send_json(resp, body)


# ------------------------------------------------------------------ show


def show(state: ComputeState, req: falcon.Request, resp: falcon.Response, server_id: str) -> None:
    context = req.context
    found = servers.find_server(state, context, server_id, cell_down_support=context.at_least(*CELL_DOWN_SUPPORT))
    util.authorize(state, req, policies.SERVERS_SHOW, {"project_id": found.mapping.project_id})
    groups = None
    if context.at_least(*views.SERVER_GROUPS):
        with state.api_db.read() as conn:
            groups = group_db.groups_of_instance(conn, server_id)
    if found.minimal:
        assert found.request_spec is not None
        send_json(resp, {"server": views.minimal_show(state, req, found.mapping, found.request_spec, groups)})
        return
    instance = dict(found.instance or {})
    instance[instance_list.CELL_KEY] = found.cell.uuid if found.cell else None
    statuses = _host_statuses(state, req, [instance])
    send_json(resp, {"server": _full(state, req, instance, found.metadata, statuses, _Policies(state, req),
                                     single=True, server_groups=groups)})


def rebuild_view(state: ComputeState, req: falcon.Request, found: servers.Found) -> dict[str, Any]:
    """The server as a rebuild answers it (upstream's show with most extensions off before 2.75)."""
    groups = None
    if req.context.at_least(*views.SERVER_GROUPS):
        with state.api_db.read() as conn:
            groups = group_db.groups_of_instance(conn, found.mapping.instance_uuid)
    return views.rebuild_view(state, req, dict(found.instance or {}), found.metadata, groups,
                              util.allows(state, req, policies.SERVERS_SHOW_FLAVOR_EXTRA_SPECS))


# ---------------------------------------------------------------- create


def _boot_request(state: ComputeState, req: falcon.Request, body: dict[str, Any]) -> servers.BootRequest:
    server = body["server"]
    context = req.context
    if "description" in server and not context.at_least(*DESCRIPTION):
        raise errors.BadRequest(
            f"Invalid input for field/attribute server. Value: {server}. "
            "Additional properties are not allowed ('description' was unexpected)"
        )
    if "tags" in server and not context.at_least(*BOOT_TAGS):
        raise errors.BadRequest(
            f"Invalid input for field/attribute server. Value: {server}. "
            "Additional properties are not allowed ('tags' was unexpected)"
        )
    if context.at_least(*NETWORKS_REQUIRED) and "networks" not in server:
        raise errors.BadRequest(
            f"Invalid input for field/attribute server. Value: {server}. 'networks' is a required property"
        )
    flavor_id = _last_segment(server["flavorRef"])
    with state.api_db.read() as conn:
        flavor = flavor_db.get_flavor(conn, flavor_id)
    if flavor is None or flavor["disabled"]:
        raise errors.BadRequest(f"Flavor {flavor_id} could not be found.")
    image_ref = server.get("imageRef") or ""
    image_id = _last_segment(image_ref) if image_ref else None
    if image_id is None and not any(
        str(bdm.get("boot_index")) == "0" for bdm in server.get("block_device_mapping_v2", [])
    ):
        raise errors.BadRequest("Block Device Mapping is Invalid: Boot sequence for the instance and "
                                "image/block device mapping combination is not valid.")
    zone, forced_host = _zone_and_host(state, req, server.get("availability_zone"))
    # Digit strings may be longer than Python converts: beyond 10**18 they are refused.
    min_count = util.bounded_int(server.get("min_count", 1), "min_count", minimum=1, maximum=_MAX_COUNT)
    max_count = util.bounded_int(server.get("max_count", min_count), "max_count", minimum=1, maximum=_MAX_COUNT)
    if min_count > max_count:
        raise errors.BadRequest("min_count must be <= max_count")
    image = None
    if image_id is not None:
        # Asked of the Image service with the caller's credentials, as Nova asks Glance.
        image = images.requested_image(state.images, forwarded_credentials(state, req), image_id)
    # Upstream's order: the image lookup, the key pair, then the image's checks.
    public_key = key_data(state, req, server.get("key_name"))
    if image is not None:
        images.check_flavor_image(image, flavor)
        image_id = image["id"]
    # 'os:scheduler_hints' wins when both are given, as upstream reads them.
    hints = body.get("os:scheduler_hints", body.get("OS-SCH-HNT:scheduler_hints", {}))
    group = server_groups.requested_group(state.api_db, hints, None if context.is_admin else context.project_id)
    config_drive = server.get("config_drive")
    return servers.BootRequest(
        name=server["name"],
        flavor=flavor,
        image_id=image_id,
        availability_zone=zone,
        forced_host=forced_host,
        metadata=dict(server.get("metadata", {})),
        tags=list(dict.fromkeys(server.get("tags", []))),
        key_name=server.get("key_name"),
        key_data=public_key,
        description=server.get("description"),
        user_data=server.get("user_data"),
        config_drive="True" if str(config_drive).lower() in validation.TRUE_STRINGS else "",
        access_ip_v4=server.get("accessIPv4"),
        access_ip_v6=server.get("accessIPv6"),
        min_count=min_count,
        max_count=max_count,
        scheduler_hints=hints,
        group=group,
        same_host=server_groups.uuid_list(hints.get("same_host")),
        different_host=server_groups.uuid_list(hints.get("different_host")),
    )


def key_data(state: ComputeState, req: falcon.Request, key_name: str | None) -> str | None:
    """The public key of the caller's key pair ``key_name`` (400 when the caller has none of that name)."""
    if key_name is None:
        return None
    with state.api_db.read() as conn:
        keypair = keypair_db.get_keypair(conn, req.context.user_id or "", key_name)
    if keypair is None:
        raise errors.BadRequest("Invalid key_name provided.")
    return str(keypair["public_key"])


# Headers besides the token that make up a noauth2 caller's identity.
_NOAUTH2_IDENTITY = ("X-Project-Id", "X-Roles", "OpenStack-System-Scope")


def forwarded_credentials(state: ComputeState, req: falcon.Request) -> Credentials:
    """The caller's own credentials, for the Image service to see the images the caller may see."""
    strategy = state.conf.api.auth_strategy
    headers: dict[str, str] = {}
    if strategy == "noauth2":
        headers = {name: value for name in _NOAUTH2_IDENTITY if (value := req.get_header(name)) is not None}
    elif strategy == "http_basic":
        headers = {"Authorization": req.get_header("Authorization") or ""}
    # 'corral' and 'keystone': the token the request came with; 'noauth': the Image service asks for none.
    return Credentials(req.get_header("X-Auth-Token") or None, headers)


def _zone_and_host(state: ComputeState, req: falcon.Request, requested: str | None) -> tuple[str | None, str | None]:
    if not requested:
        return None, None
    zone, _, rest = requested.partition(":")
    host = rest.split(":", 1)[0] or None
    if host is not None:
        util.authorize(state, req, policies.SERVERS_CREATE_FORCED_HOST, {"project_id": req.context.project_id})
    if zone and zone not in known_zones(state.conf, state.api_db):
        raise errors.BadRequest("The requested availability zone is not available")
    return zone or None, host


def create(state: ComputeState, req: falcon.Request, resp: falcon.Response) -> None:
    context = req.context
    util.authorize(state, req, policies.SERVERS_CREATE, {"project_id": context.project_id})
    body = util.json_body(state, req, _CREATE)
    boot = _boot_request(state, req, body)
    result = servers.create_servers(state, context, boot)
    if str(body["server"].get("return_reservation_id", "")).lower() == "true":
        send_json(resp, {"reservation_id": result.reservation_id}, 202)
        return
    server_uuid, password = result.servers[0]
    server_links = links.resource_links(state, req, "servers", server_uuid)
    resp.set_header("Location", server_links[0]["href"])
    send_json(resp, {
        "server": {
            "id": server_uuid,
            "links": server_links,
            "OS-DCF:diskConfig": body["server"].get("OS-DCF:diskConfig", "MANUAL"),
            "security_groups": [{"name": "default"}],
            "adminPass": body["server"].get("adminPass") or password,
        }
    }, 202)


# ---------------------------------------------------------------- delete


def delete(state: ComputeState, req: falcon.Request, resp: falcon.Response, server_id: str) -> None:
    servers.delete_server(state, req.context, server_id)
    send_empty(resp, 204)


ROUTES = [
    Route("/servers", {"GET": index, "POST": create}),
    Route("/servers/detail", {"GET": detail}),
    Route("/servers/{server_id}", {"GET": show, "DELETE": delete}),
]
