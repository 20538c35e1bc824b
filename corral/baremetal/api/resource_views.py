"""Bodies of ports, port groups, chassis, volume connectors and targets per microversion.

Each resource is described once (:class:`ResourceView`): its fields in
upstream's wire order, the microversion each appeared in and the fields a
plain list shows.  Lists, ``fields=`` selection and the ``next`` link work
the same way for all of them.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import falcon
from oslo_utils import strutils

from corral.baremetal.api import links
from corral.core.errors import BadRequest, NotAcceptable

Version = tuple[int, int]

# The keys of local_link_connection for OVN VTEP switches, shown from 1.90.
OVN_VTEP_KEYS = ("vtep-logical-switch", "vtep-physical-switch")


def request_not_acceptable() -> NotAcceptable:
    """Upstream's bare 406 for a field or filter newer than the request."""
    return NotAcceptable("Request not acceptable.")


@dataclass(frozen=True)
class ResourceView:
    collection: str            # path segment under /v1 ("ports", "volume/connectors")
    fields: tuple[str, ...]    # wire order, links included
    list_fields: tuple[str, ...]
    versions: Mapping[str, Version] = field(default_factory=dict)
    # Fields whose request (fields=, sort_key=) below their version is a 406;
    # the others are silently hidden, as upstream does.
    strict: frozenset[str] = frozenset()
    # Link lists to sub-collections ("ports" of a port group, "nodes" of a chassis).
    sublinks: tuple[str, ...] = ()

    def visible(self, name: str, req: falcon.Request) -> bool:
        version = self.versions.get(name)
        return version is None or req.context.at_least(*version)

    def check_requested(self, names: Iterable[str], req: falcon.Request) -> None:
        for name in names:
            if name in self.strict and not self.visible(name, req):
                raise request_not_acceptable()

    def body(self, req: falcon.Request, row: Mapping[str, Any], fields: Iterable[str] | None = None) -> dict[str, Any]:
        wanted = None if fields is None else {*fields, "links"}
        body: dict[str, Any] = {}
        for name in self.fields:
            if (wanted is not None and name not in wanted) or not self.visible(name, req):
                continue
            body[name] = self._value(req, row, name)
        return body

    def _value(self, req: falcon.Request, row: Mapping[str, Any], name: str) -> Any:
        if name == "links":
            return links.resource(req, self.collection, row["uuid"])
        if name in self.sublinks:
            return links.resource(req, self.collection, row["uuid"], f"/{name}")
        value = row.get(name)
        if isinstance(value, datetime.datetime):
            return value.replace(tzinfo=datetime.UTC).isoformat()
        if name == "local_link_connection" and not req.context.at_least(1, 90):
            # Older clients do not know the OVN VTEP keys: upstream shows {} then.
            if any(key in (value or {}) for key in OVN_VTEP_KEYS):
                return {}
        return value


PORT = ResourceView(
    collection="ports",
    fields=("uuid", "created_at", "updated_at", "address", "extra", "internal_info", "is_smartnic",
            "local_link_connection", "physical_network", "pxe_enabled", "node_uuid", "name", "description",
            "vendor", "category", "available_for_dynamic_portgroup", "links", "portgroup_uuid"),
    list_fields=("uuid", "address"),
    versions={
        "internal_info": (1, 18),
        "pxe_enabled": (1, 19),
        "local_link_connection": (1, 19),
        "portgroup_uuid": (1, 24),
        "physical_network": (1, 34),
        "is_smartnic": (1, 53),
        "name": (1, 88),
        "description": (1, 97),
        "vendor": (1, 100),
        "category": (1, 101),
        "available_for_dynamic_portgroup": (1, 111),
    },
    strict=frozenset({"pxe_enabled", "local_link_connection", "portgroup_uuid", "physical_network",
                      "is_smartnic", "name", "description", "vendor", "category",
                      "available_for_dynamic_portgroup"}),
)

PORTGROUP = ResourceView(
    collection="portgroups",
    fields=("uuid", "created_at", "updated_at", "address", "extra", "internal_info", "mode", "name",
            "properties", "standalone_ports_supported", "node_uuid", "physical_network", "category",
            "dynamic_portgroup", "links", "ports"),
    list_fields=("uuid", "address", "name"),
    versions={
        "mode": (1, 26),
        "properties": (1, 26),
        "physical_network": (1, 102),
        "category": (1, 103),
        "dynamic_portgroup": (1, 111),
    },
    strict=frozenset({"mode", "properties", "dynamic_portgroup"}),
    sublinks=("ports",),
)

CHASSIS = ResourceView(
    collection="chassis",
    fields=("uuid", "created_at", "updated_at", "description", "extra", "links", "nodes"),
    list_fields=("uuid", "description"),
)

CONNECTOR = ResourceView(
    collection="volume/connectors",
    fields=("uuid", "created_at", "updated_at", "connector_id", "extra", "type", "links", "node_uuid"),
    list_fields=("uuid", "connector_id", "type", "node_uuid"),
)

TARGET = ResourceView(
    collection="volume/targets",
    fields=("uuid", "created_at", "updated_at", "boot_index", "extra", "properties", "volume_id",
            "volume_type", "links", "node_uuid"),
    list_fields=("uuid", "boot_index", "volume_id", "volume_type", "node_uuid"),
)


def chassis_body(req: falcon.Request, row: Mapping[str, Any], fields: Iterable[str] | None = None) -> dict[str, Any]:
    body = CHASSIS.body(req, row, fields)
    if "nodes" in body:
        # Upstream nests the nodes link list in a second list.
        body["nodes"] = [links.resource(req, "chassis", row["uuid"], "/nodes")]
    return body


# ------------------------------------------------------------ requests


def parse_fields(view: ResourceView, req: falcon.Request) -> list[str] | None:
    """``fields=`` (1.8): known names only, none newer than the request."""
    raw = req.get_param("fields")
    if raw is None:
        return None
    if not req.context.at_least(1, 8):
        raise request_not_acceptable()
    names = [name.strip() for name in raw.split(",") if name.strip()]
    invalid = [name for name in names if name not in view.fields]
    if invalid:
        raise BadRequest(f'Field(s) "{", ".join(invalid)}" are not valid')
    view.check_requested(names, req)
    return names


def detail_requested(req: falcon.Request, *, since: tuple[int, int] | None = (1, 43)) -> bool | None:
    """``detail=`` (1.43; volume lists: any version) on a list: None when absent."""
    raw = req.get_param("detail")
    if raw is None:
        return None
    try:
        detail = strutils.bool_from_string(raw, strict=True)
    except ValueError as error:
        raise BadRequest(f"Invalid detail: {error}") from None
    if since is not None and not req.context.at_least(*since):
        raise BadRequest(f"Invalid query parameter ?detail={detail} received.")
    return detail


def return_fields(view: ResourceView, req: falcon.Request, *, detail_path: bool,
                  detail_since: tuple[int, int] | None = (1, 43)) -> tuple[list[str] | None, bool | None]:
    """(fields to show or None for all, the detail= value) of a list request."""
    if detail_path:
        if req.get_param("fields") is not None:
            raise BadRequest("Unexpected arguments: fields")
        return None, None
    fields = parse_fields(view, req)
    detail = detail_requested(req, since=detail_since)
    if fields is not None and detail:
        raise BadRequest("Can not specify ?detail=True and fields in the same request.")
    if fields is None and not detail:
        fields = list(view.list_fields)
    return fields, detail


def collection_body(req: falcon.Request, name: str, items: Sequence[dict[str, Any]], rows: Sequence[Mapping[str, Any]],
                    *, limit: int, path: str, sort_key: str, sort_dir: str, fields: list[str] | None,
                    detail: bool | None = None) -> dict[str, Any]:
    """``{name: items}`` plus upstream's ``next`` link when the page is full."""
    body: dict[str, Any] = {name: list(items)}
    if rows and len(rows) == limit:
        query: dict[str, str] = {"sort_key": sort_key, "sort_dir": sort_dir}
        if detail is not None:
            query["detail"] = str(detail)
        if fields:
            query["fields"] = ",".join(fields)
        query["limit"] = str(limit)
        query["marker"] = rows[-1]["uuid"]
        body["next"] = f"{links.base(req)}/v1/{path}?{urlencode(query, safe=',')}"
    return body
