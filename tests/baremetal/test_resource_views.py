"""Field and filter microversions of ports and port groups above what the service declares today.

These check the version rules directly (a request context at the newest
upstream version), so they hold before the service advertises that version.
"""

from __future__ import annotations

import datetime
from types import SimpleNamespace

import pytest
from microversion_parse import Version

from corral.baremetal.api import resource_views
from corral.baremetal.api.handlers import ports as port_handlers
from corral.core.context import RequestContext
from corral.core.errors import ApiError


def request(version: str, **params: str) -> SimpleNamespace:
    major, minor = (int(part) for part in version.split("."))
    context = RequestContext(version=Version(major, minor), roles=("admin",))
    return SimpleNamespace(context=context, get_param=params.get, host="h", scheme="http", forwarded_host=None,
                           prefix="http://h", headers={}, get_header=lambda *_a, **_k: None, app="", root_path="")


ROW = {
    "uuid": "u", "created_at": datetime.datetime(2026, 1, 1), "updated_at": None, "address": "aa:bb:cc:dd:ee:01",
    "extra": {}, "internal_info": {}, "is_smartnic": False, "local_link_connection": {}, "physical_network": None,
    "pxe_enabled": True, "node_uuid": "n", "name": "eth0", "description": "d", "vendor": "v", "category": "c",
    "available_for_dynamic_portgroup": True, "portgroup_uuid": None,
}


@pytest.fixture(autouse=True)
def _links(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(resource_views.links, "base", lambda req: "http://h")


@pytest.mark.parametrize(("field", "version"), [
    ("name", "1.88"), ("description", "1.97"), ("vendor", "1.100"), ("category", "1.101"),
    ("available_for_dynamic_portgroup", "1.111"), ("is_smartnic", "1.53"),
])
def test_port_fields_appear_at_their_version(field: str, version: str) -> None:
    major, minor = version.split(".")
    before = f"{major}.{int(minor) - 1}"
    assert field in resource_views.PORT.body(request(version), ROW)
    assert field not in resource_views.PORT.body(request(before), ROW)
    with pytest.raises(ApiError) as raised:
        resource_views.parse_fields(resource_views.PORT, request(before, fields=f"uuid,{field}"))
    assert (raised.value.status, raised.value.message) == (406, "Request not acceptable.")
    assert resource_views.parse_fields(resource_views.PORT, request(version, fields=field)) == [field]


def test_port_body_at_newest_version_in_upstream_order() -> None:
    body = resource_views.PORT.body(request("1.115"), ROW)
    assert list(body) == list(resource_views.PORT.fields)
    assert body["created_at"] == "2026-01-01T00:00:00+00:00"


def test_vtep_keys_hidden_before_1_90() -> None:
    row = {**ROW, "local_link_connection": {"port_id": "p", "vtep-logical-switch": "l", "vtep-physical-switch": "p"}}
    assert resource_views.PORT.body(request("1.89"), row)["local_link_connection"] == {}
    assert resource_views.PORT.body(request("1.90"), row)["local_link_connection"] == row["local_link_connection"]


@pytest.mark.parametrize(("key", "value", "version"), [
    ("name", "eth0", "1.88"), ("node_ident", "n1", "1.94"), ("description", "d", "1.97"), ("vendor", "v", "1.100"),
    ("category", "c", "1.101"), ("available_for_dynamic_portgroup", True, "1.111"),
    ("local_link_connection", {"network_type": "unmanaged"}, "1.64"),
    ("local_link_connection", {"vtep-logical-switch": "l", "vtep-physical-switch": "p"}, "1.90"),
])
def test_port_body_keys_from_their_version(key: str, value: object, version: str) -> None:
    major, minor = version.split(".")
    port_handlers._check_versions(request(version), {key: value})  # noqa: SLF001 - the rule under test
    with pytest.raises(ApiError) as raised:
        port_handlers._check_versions(request(f"{major}.{int(minor) - 1}"), {key: value})  # noqa: SLF001
    assert raised.value.status == 406


@pytest.mark.parametrize(("field", "version"), [("physical_network", "1.102"), ("category", "1.103"),
                                                ("dynamic_portgroup", "1.111")])
def test_portgroup_fields_appear_at_their_version(field: str, version: str) -> None:
    row = {"uuid": "g", "created_at": None, "updated_at": None, "address": None, "extra": {}, "internal_info": {},
           "mode": "active-backup", "name": None, "properties": {}, "standalone_ports_supported": True,
           "node_uuid": "n", "physical_network": "p", "category": "c", "dynamic_portgroup": False}
    major, minor = version.split(".")
    assert field in resource_views.PORTGROUP.body(request(version), row)
    assert field not in resource_views.PORTGROUP.body(request(f"{major}.{int(minor) - 1}"), row)


@pytest.mark.parametrize(("params", "version"), [
    ({"description_contains": "x"}, "1.97"), ({"conductor_groups": "g"}, "1.99"), ({"shard": "s"}, "1.82"),
])
def test_port_filters_from_their_version(params: dict[str, str], version: str) -> None:
    major, minor = version.split(".")
    state = SimpleNamespace()
    with pytest.raises(ApiError) as raised:
        port_handlers._filters(state, request(f"{major}.{int(minor) - 1}", **params),  # noqa: SLF001
                               node_ident=None, portgroup_ident=None)
    assert raised.value.status == 406
    filters = port_handlers._filters(state, request(version, **params), node_ident=None,  # noqa: SLF001
                                     portgroup_ident=None)
    assert filters
