"""Node representations per microversion, in upstream's key order."""

from __future__ import annotations

import datetime
import functools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import falcon

from corral.baremetal.api import links
from corral.baremetal.domain import states
from corral.core.errors import BadRequest, NotAcceptable

# Upstream's full node body, in wire order.
NODE_FIELDS = (
    "uuid", "created_at", "updated_at", "automated_clean", "bios_interface", "boot_interface", "boot_mode",
    "clean_step", "conductor_group", "console_enabled", "console_interface", "disable_power_off",
    "deploy_interface", "deploy_step", "description", "driver", "driver_info", "driver_internal_info", "extra",
    "fault", "firmware_interface", "health", "inspection_finished_at", "inspection_started_at",
    "inspect_interface", "instance_info", "instance_name", "instance_uuid", "last_error", "lessee",
    "maintenance", "maintenance_reason", "management_interface", "name", "network_data", "network_interface",
    "owner", "parent_node", "power_interface", "power_state", "properties", "protected", "protected_reason",
    "provision_state", "provision_updated_at", "raid_config", "raid_interface", "rescue_interface",
    "reservation", "resource_class", "retired", "retired_reason", "secure_boot", "service_step", "shard",
    "storage_interface", "target_power_state", "target_provision_state", "target_raid_config", "traits",
    "vendor_interface", "links", "conductor", "allocation_uuid", "chassis_uuid", "ports", "states",
    "portgroups", "volume",
)

# The microversion each field appeared in (absent: 1.1).  A field newer
# than the request is left out of answers, refused in ?fields= (406) and
# refused in request bodies (406).
FIELD_VERSIONS: dict[str, tuple[int, int]] = {
    "driver_internal_info": (1, 3),
    "name": (1, 5),
    "inspection_started_at": (1, 6),
    "inspection_finished_at": (1, 6),
    "clean_step": (1, 7),
    "raid_config": (1, 12),
    "target_raid_config": (1, 12),
    "network_interface": (1, 20),
    "resource_class": (1, 21),
    "portgroups": (1, 24),
    **{f"{name}_interface": (1, 31) for name in
       ("boot", "console", "deploy", "inspect", "management", "power", "raid", "vendor")},
    "volume": (1, 32),
    "storage_interface": (1, 33),
    "traits": (1, 37),
    "rescue_interface": (1, 38),
    "bios_interface": (1, 40),
    "fault": (1, 42),
    "deploy_step": (1, 44),
    "conductor_group": (1, 46),
    "automated_clean": (1, 47),
    "protected": (1, 48),
    "protected_reason": (1, 48),
    "conductor": (1, 49),
    "owner": (1, 50),
    "description": (1, 51),
    "allocation_uuid": (1, 52),
    "retired": (1, 61),
    "retired_reason": (1, 61),
    "lessee": (1, 65),
    "network_data": (1, 66),
    "boot_mode": (1, 75),
    "secure_boot": (1, 75),
    "shard": (1, 82),
    "parent_node": (1, 83),
    "firmware_interface": (1, 86),
    "service_step": (1, 87),
    "disable_power_off": (1, 95),
    "instance_name": (1, 104),
    "health": (1, 109),
}

LIST_FIELDS = ("uuid", "instance_uuid", "maintenance", "power_state", "provision_state", "name", "links")
LINK_FIELDS = ("ports", "states", "portgroups", "volume")


def visible(field: str, req: falcon.Request) -> bool:
    version = FIELD_VERSIONS.get(field)
    return version is None or req.context.at_least(*version)


def not_acceptable(version: tuple[int, int]) -> NotAcceptable:
    return NotAcceptable(f"Request not acceptable. The minimal required API version should be "
                         f"{version[0]}.{version[1]}")


def require_field_version(field: str, req: falcon.Request) -> None:
    version = FIELD_VERSIONS.get(field)
    if version is not None and not req.context.at_least(*version):
        raise not_acceptable(version)


def parse_fields(req: falcon.Request) -> list[str] | None:
    """The ``fields`` query parameter (1.8), checked against what the version shows."""
    raw = req.get_param("fields")
    if raw is None:
        return None
    if not req.context.at_least(1, 8):
        raise not_acceptable((1, 8))
    fields = [field.strip() for field in raw.split(",") if field.strip()]
    invalid = [field for field in fields if field not in NODE_FIELDS or field == "links"]
    if invalid:
        raise BadRequest(f'Field(s) "{", ".join(invalid)}" are not valid')
    for field in fields:
        require_field_version(field, req)
    return fields


def timestamp(value: datetime.datetime | None) -> str | None:
    if value is None:
        return None
    return value.replace(tzinfo=datetime.UTC).isoformat()


@functools.cache
def fields_at(major: int, minor: int) -> tuple[str, ...]:
    """The node fields shown at a microversion, in wire order (computed once per version)."""
    return tuple(field for field in NODE_FIELDS
                 if field not in FIELD_VERSIONS or (major, minor) >= FIELD_VERSIONS[field])


def node_body(req: falcon.Request, node: Mapping[str, Any], *, traits: Sequence[str] = (),
              conductor: str | None = None, fields: Iterable[str] | None = None) -> dict[str, Any]:
    version = req.context.version
    shown = fields_at(version.major, version.minor) if version is not None else NODE_FIELDS
    if fields is not None:
        wanted = {*fields, "links"}
        shown = tuple(field for field in shown if field in wanted)
    return {field: _value(req, node, field, traits, conductor) for field in shown}


_BOOLEANS = frozenset({"retired", "protected", "maintenance", "console_enabled", "disable_power_off"})
# Fields not read straight from the node row: field -> (req, node, traits, conductor) -> value.
_COMPUTED: dict[str, Any] = {
    "links": lambda req, node, traits, conductor: links.resource(req, "nodes", node["uuid"]),
    **{name: (lambda req, node, traits, conductor, name=name: links.resource(req, "nodes", node["uuid"],
                                                                            f"/{name}"))
       for name in LINK_FIELDS},
    "traits": lambda req, node, traits, conductor: list(traits),
    "conductor": lambda req, node, traits, conductor: conductor,
    "allocation_uuid": lambda req, node, traits, conductor: node.get("allocation_uuid"),
    "chassis_uuid": lambda req, node, traits, conductor: node.get("chassis_uuid"),
    "provision_state": lambda req, node, traits, conductor: shown_provision_state(req, node["provision_state"]),
    "target_provision_state": lambda req, node, traits, conductor: shown_provision_state(
        req, node["target_provision_state"]),
    "conductor_group": lambda req, node, traits, conductor: node.get("conductor_group") or "",
    # The agent token is the conductor's secret: answers show it masked, as upstream.
    "driver_internal_info": lambda req, node, traits, conductor: _masked_token(node.get("driver_internal_info")),
}


def _masked_token(info: Any) -> Any:
    if isinstance(info, dict) and info.get("agent_secret_token"):
        return {**info, "agent_secret_token": "******"}
    return info


def _value(req: falcon.Request, node: Mapping[str, Any], field: str, traits: Sequence[str],
           conductor: str | None) -> Any:
    computed = _COMPUTED.get(field)
    if computed is not None:
        return computed(req, node, traits, conductor)
    value = node.get(field)
    if isinstance(value, datetime.datetime):
        return timestamp(value)
    if field in _BOOLEANS:
        return bool(value)
    return value


def shown_provision_state(req: falcon.Request, value: str | None) -> str | None:
    # Before 1.2 the available state had no name.
    if value == states.AVAILABLE and not req.context.at_least(1, 2):
        return states.NOSTATE
    return value


def list_item(req: falcon.Request, node: Mapping[str, Any], *, fields: Iterable[str] | None = None,
              traits: Sequence[str] = (), conductor: str | None = None) -> dict[str, Any]:
    chosen = LIST_FIELDS if fields is None else fields
    return node_body(req, node, traits=traits, conductor=conductor, fields=chosen)


def states_body(req: falcon.Request, node: Mapping[str, Any]) -> dict[str, Any]:
    body: dict[str, Any] = {
        "console_enabled": bool(node["console_enabled"]),
        "last_error": node["last_error"],
        "power_state": node["power_state"],
        "provision_state": shown_provision_state(req, node["provision_state"]),
        "target_power_state": node["target_power_state"],
        "target_provision_state": shown_provision_state(req, node["target_provision_state"]),
        "provision_updated_at": timestamp(node["provision_updated_at"]),
    }
    if req.context.at_least(1, 12):
        body["raid_config"] = node["raid_config"] or {}
        body["target_raid_config"] = node["target_raid_config"] or {}
    if req.context.at_least(1, 75):
        body["boot_mode"] = node.get("boot_mode")
        body["secure_boot"] = node.get("secure_boot")
    return body
