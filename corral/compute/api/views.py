"""Server representations, by microversion and policy.

Full records follow upstream's shape at each version.  Minimal records
(cell down, 2.69+) have exactly the keys upstream sends: 3 in ``GET
/servers``, 5 in ``/servers/detail`` and 10 in ``GET /servers/{id}``.

Show of a down-cell server with an image: upstream fails with 500 from
2.98 on (it reads image properties from the unreachable cell); Corral
serves at most 2.73, and its minimal image never carries ``properties``.
"""

from __future__ import annotations

import datetime
import hashlib
from typing import Any

import falcon

from corral.compute.api import links, policies, util
from corral.compute.api.state import ComputeState
from corral.compute.domain import states

EMBEDDED_FLAVOR = (2, 47)
EXTENDED_ATTRIBUTES_MORE = (2, 3)
LOCKED = (2, 9)
HOST_STATUS = (2, 16)
DESCRIPTION = (2, 19)
TAGS = (2, 26)
TRUSTED_CERTS = (2, 63)
SERVER_GROUPS = (2, 71)
LOCKED_REASON = (2, 73)


def _when(value: Any) -> Any:
    if isinstance(value, str):
        return datetime.datetime.fromisoformat(value.replace("Z", ""))
    return value


def image_view(state: ComputeState, req: falcon.Request, image_id: str | None) -> Any:
    if not image_id:
        return ""
    bookmark = links.resource_links(state, req, "images", image_id)[1]
    return {"id": image_id, "links": [bookmark]}


def flavor_view(state: ComputeState, req: falcon.Request, flavor: dict[str, Any],
                extra_specs: bool | None = None) -> dict[str, Any]:
    """The server's flavor; ``extra_specs`` is the policy decision when the caller already has it."""
    if not req.context.at_least(*EMBEDDED_FLAVOR):
        bookmark = links.resource_links(state, req, "flavors", flavor["flavorid"])[1]
        return {"id": flavor["flavorid"], "links": [bookmark]}
    view: dict[str, Any] = {
        "vcpus": flavor["vcpus"],
        "ram": flavor["memory_mb"],
        "disk": flavor["root_gb"],
        "ephemeral": flavor["ephemeral_gb"],
        "swap": flavor["swap"],
        "original_name": flavor["name"],
    }
    if extra_specs is None:
        extra_specs = util.allows(state, req, policies.SERVERS_SHOW_FLAVOR_EXTRA_SPECS)
    if extra_specs:
        view["extra_specs"] = flavor.get("extra_specs") or {}
    return view


def host_id(project_id: str, host: str | None) -> str:
    if not host:
        return ""
    return hashlib.sha224((project_id + host).encode()).hexdigest()


def index_entry(state: ComputeState, req: falcon.Request, instance: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": instance["uuid"],
        "name": instance["display_name"],
        "links": links.resource_links(state, req, "servers", instance["uuid"]),
    }


def full_view(
    state: ComputeState,
    req: falcon.Request,
    instance: dict[str, Any],
    metadata: dict[str, str],
    *,
    extended: bool,
    host_status: str | None,
    extra_specs: bool,
    single: bool = False,
    server_groups: list[str] | None = None,
) -> dict[str, Any]:
    """One server as ``/servers/detail`` and (``single``) ``GET /servers/{id}`` show it."""
    context = req.context
    status = states.status_of(instance["vm_state"], instance["task_state"])
    launched = _when(instance.get("launched_at"))
    terminated = _when(instance.get("terminated_at"))
    view: dict[str, Any] = {
        "id": instance["uuid"],
        "name": instance["display_name"],
        "status": status,
        "tenant_id": instance["project_id"],
        "user_id": instance["user_id"],
        "metadata": metadata,
        "hostId": host_id(instance["project_id"], instance.get("host")),
        "image": image_view(state, req, instance.get("image_ref")),
        "flavor": flavor_view(state, req, instance["flavor"], extra_specs),
        "created": util.iso(_when(instance["created_at"])),
        "updated": util.iso(_when(instance.get("updated_at") or instance["created_at"])),
        "addresses": {},
        "accessIPv4": instance.get("access_ip_v4") or "",
        "accessIPv6": instance.get("access_ip_v6") or "",
        "links": links.resource_links(state, req, "servers", instance["uuid"]),
        "OS-DCF:diskConfig": "MANUAL",
        "key_name": instance.get("key_name"),
        "config_drive": instance.get("config_drive"),
        "OS-EXT-AZ:availability_zone": instance.get("availability_zone") or "",
        "OS-EXT-STS:power_state": instance.get("power_state") or 0,
        "OS-EXT-STS:task_state": instance.get("task_state"),
        "OS-EXT-STS:vm_state": instance.get("vm_state"),
        "OS-SRV-USG:launched_at": launched.strftime("%Y-%m-%dT%H:%M:%S.%f") if launched else None,
        "OS-SRV-USG:terminated_at": terminated.strftime("%Y-%m-%dT%H:%M:%S.%f") if terminated else None,
        "os-extended-volumes:volumes_attached": [],
    }
    if status in states.PROGRESS_STATUSES:
        view["progress"] = instance.get("progress")
    fault = instance.get("_fault")
    if status in states.FAULT_STATUSES and fault is not None:
        # Upstream's _get_fault: details for admins, or for faults that are not 500s.
        view["fault"] = {"code": fault["code"], "created": util.iso(_when(fault["created_at"])),
                         "message": fault["message"]}
        if fault.get("details") and (context.is_admin or fault["code"] != 500):
            view["fault"]["details"] = fault["details"]
    elif instance.get("vm_state") == states.ERROR and fault is None:
        # Servers buried in cell0 before faults were recorded.
        view["fault"] = {
            "code": 500,
            "created": util.iso(_when(instance.get("updated_at") or instance["created_at"])),
            "message": "No valid host was found. There are not enough hosts available.",
        }
    if extended:
        view["OS-EXT-SRV-ATTR:host"] = instance.get("host")
        view["OS-EXT-SRV-ATTR:hypervisor_hostname"] = instance.get("node")
        view["OS-EXT-SRV-ATTR:instance_name"] = f"instance-{int(instance.get('id') or 0):08x}"
        if context.at_least(*EXTENDED_ATTRIBUTES_MORE):
            view.update({
                "OS-EXT-SRV-ATTR:reservation_id": instance.get("reservation_id"),
                "OS-EXT-SRV-ATTR:launch_index": instance.get("launch_index"),
                "OS-EXT-SRV-ATTR:hostname": instance.get("hostname"),
                "OS-EXT-SRV-ATTR:kernel_id": None,
                "OS-EXT-SRV-ATTR:ramdisk_id": None,
                "OS-EXT-SRV-ATTR:root_device_name": None,
                "OS-EXT-SRV-ATTR:user_data": instance.get("user_data"),
            })
    if context.at_least(*LOCKED):
        view["locked"] = bool(instance.get("locked"))
    if host_status is not None and context.at_least(*HOST_STATUS):
        view["host_status"] = host_status
    if context.at_least(*DESCRIPTION):
        view["description"] = instance.get("display_description")
    if context.at_least(*TAGS):
        view["tags"] = list(instance.get("_tags") or [])
    if context.at_least(*TRUSTED_CERTS):
        view["trusted_image_certificates"] = None
    if context.at_least(*LOCKED_REASON):
        view["locked_reason"] = instance.get("locked_reason")
    if single and context.at_least(*SERVER_GROUPS):
        # The uuids of the server groups the server is a member of.
        view["server_groups"] = list(server_groups or [])
    return view


# ------------------------------------------------------- minimal records


def minimal_index(state: ComputeState, req: falcon.Request, mapping: Any) -> dict[str, Any]:
    return {
        "id": mapping.instance_uuid,
        "status": states.UNKNOWN_STATUS,
        "links": links.resource_links(state, req, "servers", mapping.instance_uuid),
    }


def minimal_detail(state: ComputeState, req: falcon.Request, mapping: Any) -> dict[str, Any]:
    return {
        "id": mapping.instance_uuid,
        "status": states.UNKNOWN_STATUS,
        "tenant_id": mapping.project_id,
        "created": util.iso(mapping.created_at),
        "links": links.resource_links(state, req, "servers", mapping.instance_uuid),
    }


def minimal_show(state: ComputeState, req: falcon.Request, mapping: Any, spec: dict[str, Any],
                 server_groups: list[str] | None = None) -> dict[str, Any]:
    image = spec.get("image") or {}
    flavor = dict(spec["flavor"])
    if not req.context.at_least(*EMBEDDED_FLAVOR):
        # Minimal records only exist from 2.69 on, where the flavor is embedded.
        raise AssertionError("minimal show below 2.69")
    view = {
        "id": mapping.instance_uuid,
        "status": states.UNKNOWN_STATUS,
        "tenant_id": mapping.project_id,
        "created": util.iso(mapping.created_at),
        "links": links.resource_links(state, req, "servers", mapping.instance_uuid),
        "user_id": spec.get("user_id") or states.UNKNOWN_STATUS,
        "flavor": flavor_view(state, req, flavor),
        "image": image_view(state, req, image.get("id")),
        "OS-EXT-AZ:availability_zone": spec.get("availability_zone") or states.UNKNOWN_STATUS,
        "OS-EXT-STS:power_state": states.NOSTATE,
    }
    if req.context.at_least(*SERVER_GROUPS):
        view["server_groups"] = list(server_groups or [])
    return view


# What a rebuild's answer leaves out of the full record before 2.75 (upstream's
# show_AZ, show_config_drive, show_extended_*, show_srv_usg... all False).
_NOT_IN_REBUILD = (
    "OS-EXT-AZ:availability_zone", "config_drive", "OS-EXT-STS:power_state", "OS-EXT-STS:task_state",
    "OS-EXT-STS:vm_state", "OS-SRV-USG:launched_at", "OS-SRV-USG:terminated_at",
    "os-extended-volumes:volumes_attached", "host_status",
)
KEY_NAME_IN_REBUILD = (2, 54)


def rebuild_view(state: ComputeState, req: falcon.Request, instance: dict[str, Any], metadata: dict[str, str],
                 server_groups: list[str] | None, extra_specs: bool) -> dict[str, Any]:
    view = full_view(state, req, instance, metadata, extended=False, host_status=None, extra_specs=extra_specs,
                     single=True, server_groups=server_groups)
    for key in _NOT_IN_REBUILD:
        view.pop(key, None)
    if not req.context.at_least(*KEY_NAME_IN_REBUILD):
        view.pop("key_name", None)
    return view
