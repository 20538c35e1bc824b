"""Servers: boot, look up, delete, soft delete, restore, force delete.

A boot records the instance mapping (``queued_for_delete`` False), the
request spec and a build request in the API database, has the scheduler
pick a host and claim resources in Placement, then creates the instance
in the host's cell in ``building`` state, where that host's compute
service spawns it.  A server no host can take is created in cell0 in
``error`` state, as upstream does.

``queued_for_delete`` on the mapping follows every delete, soft delete,
force delete (True) and restore (False) as soon as the API acts.
"""

from __future__ import annotations

import json
import logging
import secrets
import string
import uuid as uuidlib
from dataclasses import dataclass, field
from typing import Any

from corral.core import errors
from corral.core.context import RequestContext
from corral.core.db import Database
from corral.compute.api import policies
from corral.compute.domain.exceptions import CellDown
from corral.compute.cells import CellMapping, CellRegistry
from corral.compute.db import api_queries as q
from corral.compute.db import cell_queries as cq
from corral.compute.db import server_records as records
from corral.compute.db import server_groups as group_db
from corral.compute.domain import quota, server_groups, states
from corral.compute.domain.scheduling import (
    COMPUTE_BINARY,
    BootPlan,
    build_resource_request,
    eligible_nodes,
    service_is_up,
)
from corral.compute.scheduler import NoValidHost, SchedulerUnavailable, Selection
from corral.compute.virt.driver import destroys_before_delete

LOG = logging.getLogger(__name__)

NO_VALID_HOST_FAULT = "No valid host was found. There are not enough hosts available."

# Keys added to a server's instance dict: its tags and its newest fault.
TAGS_KEY = "_tags"
FAULT_KEY = "_fault"


def not_found(instance_uuid: str) -> errors.NotFound:
    return errors.NotFound(f"Instance {instance_uuid} could not be found.")


@dataclass
class BootRequest:
    name: str
    flavor: dict[str, Any]
    image_id: str | None
    availability_zone: str | None
    forced_host: str | None
    metadata: dict[str, str]
    tags: list[str] = field(default_factory=list)
    key_name: str | None = None
    # The key pair's public key (what a config drive would carry).
    key_data: str | None = None
    description: str | None = None
    user_data: str | None = None
    config_drive: str | None = None
    access_ip_v4: str | None = None
    access_ip_v6: str | None = None
    min_count: int = 1
    max_count: int = 1
    scheduler_hints: dict[str, Any] = field(default_factory=dict)
    # The server group of the 'group' hint, and the servers of the
    # 'same_host' and 'different_host' hints.
    group: dict[str, Any] | None = None
    same_host: list[str] = field(default_factory=list)
    different_host: list[str] = field(default_factory=list)


@dataclass
class BootResult:
    reservation_id: str
    servers: list[tuple[str, str]]  # (uuid, admin password)


def _password(length: int = 12) -> str:
    alphabet = string.ascii_letters + string.digits
    return "".join(secrets.choice(alphabet) for _ in range(length))


def _embedded_flavor(flavor: dict[str, Any]) -> dict[str, Any]:
    keys = ("flavorid", "name", "memory_mb", "vcpus", "root_gb", "ephemeral_gb", "swap", "rxtx_factor", "extra_specs")
    return {key: flavor[key] for key in keys}


# ------------------------------------------------------------------ boot


def _check_quota(state: Any, context: RequestContext, boot: BootRequest) -> int:
    """How many servers to boot (between min_count and max_count); raises 403."""
    project_id = context.project_id
    assert project_id is not None
    usage = quota.count_usage(state.api_db, state.cells, project_id)
    if usage.down_cells and quota.project_has_servers_in(state.api_db, project_id, usage.down_cells):
        if not state.policy.allows(context, policies.SERVERS_CREATE_CELL_DOWN):
            names = ", ".join(cell.name or cell.uuid for cell in usage.down_cells)
            raise errors.Forbidden(
                f"Project {project_id} has servers in cells that cannot be reached ({names}), so its "
                "usage cannot be counted; new servers are refused until those cells answer again."
            )
    limits = quota.project_limits(state.conf, state.api_db, project_id)
    if limits["metadata_items"] >= 0 and len(boot.metadata) > limits["metadata_items"]:
        raise quota.OverQuota("Quota exceeded for metadata_items: too many metadata items on this server.")
    per_instance = {"instances": 1, "cores": boot.flavor["vcpus"], "ram": boot.flavor["memory_mb"]}
    count = quota.max_fitting(limits, usage, per_instance, boot.max_count)
    if count < boot.min_count:
        quota.check_room(limits, usage, {name: amount * boot.min_count for name, amount in per_instance.items()})
    return count


def create_servers(state: Any, context: RequestContext, boot: BootRequest) -> BootResult:
    """Record, schedule and create the servers; each gets a 'create' instance action of the request."""
    count = _check_quota(state, context, boot)
    reservation_id = "r-" + secrets.token_hex(4)
    plan = build_resource_request(state, boot)
    instances = []
    for index in range(count):
        name = boot.name if count == 1 else f"{boot.name}-{index + 1}"
        instances.append(_new_instance(context, boot, str(uuidlib.uuid4()), name, reservation_id, index))
    members_limit = quota.project_limits(state.conf, state.api_db, context.project_id or "")["server_group_members"]
    # Every server of the request is recorded (and joins its group) at once, or none is.
    state.api_db.write(_record_builds, context, boot, instances, members_limit)
    created: list[tuple[str, str]] = []
    for instance in instances:
        _schedule_and_build(state, plan, instance, boot.metadata, boot.tags, context)
        created.append((instance["uuid"], _password()))
    return BootResult(reservation_id, created)


def _new_instance(context: RequestContext, boot: BootRequest, instance_uuid: str, name: str,
                  reservation_id: str, index: int) -> dict[str, Any]:
    flavor = boot.flavor
    now = q.utcnow()
    return {
        "uuid": instance_uuid,
        "project_id": context.project_id,
        "user_id": context.user_id,
        "display_name": name,
        "display_description": boot.description,
        "hostname": _hostname(name),
        "vm_state": states.BUILDING,
        "task_state": states.SCHEDULING,
        "power_state": states.NOSTATE,
        "memory_mb": flavor["memory_mb"],
        "vcpus": flavor["vcpus"],
        "root_gb": flavor["root_gb"],
        "ephemeral_gb": flavor["ephemeral_gb"],
        "flavor": _embedded_flavor(flavor),
        "flavorid": flavor["flavorid"],
        "image_ref": boot.image_id or "",
        "key_name": boot.key_name,
        "key_data": boot.key_data,
        "reservation_id": reservation_id,
        "launch_index": index,
        "config_drive": boot.config_drive or "",
        "access_ip_v4": boot.access_ip_v4,
        "access_ip_v6": boot.access_ip_v6,
        "user_data": boot.user_data,
        "availability_zone": boot.availability_zone,
        "locked": False,
        "deleted": False,
        "created_at": now,
        "updated_at": now,
    }


def _hostname(name: str) -> str:
    cleaned = "".join(ch if ch.isalnum() or ch == "-" else "-" for ch in name.lower()).strip("-.")
    return cleaned[:63] or "server"


def _record_builds(conn: Any, context: RequestContext, boot: BootRequest, instances: list[dict[str, Any]],
                   members_limit: int) -> None:
    """Mappings, request specs and build requests of the servers, and their group membership."""
    group = boot.group
    if group is not None:
        # Under the group's row lock, so that concurrent boots count each other's members.
        locked = group_db.get_group(conn, group["uuid"], lock=True)
        if locked is None:
            raise errors.BadRequest(f"Instance group {group['uuid']} could not be found.")
        members = group_db.count_live_members(conn, locked["id"], context.user_id or "")
        if members_limit >= 0 and members + len(instances) > members_limit:
            raise quota.OverQuota("Quota exceeded, too many servers in group")
        group_db.add_members(conn, locked["id"], [instance["uuid"] for instance in instances])
    for instance in instances:
        spec = {
            "instance_uuid": instance["uuid"],
            "project_id": context.project_id,
            "user_id": context.user_id,
            "flavor": _embedded_flavor(boot.flavor),
            "image": {"id": boot.image_id} if boot.image_id else {},
            "availability_zone": boot.availability_zone,
            "forced_host": boot.forced_host,
            "scheduler_hints": boot.scheduler_hints,
            "num_instances": boot.max_count,
        }
        q.create_instance_mapping(
            conn, instance_uuid=instance["uuid"], cell_id=None, project_id=instance["project_id"],
            user_id=instance["user_id"], queued_for_delete=False, created_at=instance["created_at"],
        )
        q.create_request_spec(conn, instance["uuid"], spec)
        q.create_build_request(conn, instance["uuid"], instance["project_id"],
                               {**instance, "metadata": boot.metadata, "tags": boot.tags})


def _create_in_cell(conn: Any, instance: dict[str, Any], metadata: dict[str, str], tags: list[str],
                    context: RequestContext, failure: str | None = None) -> None:
    """The instance, its tags and its 'create' action (with the scheduling error, if any), at once."""
    cq.create_instance(conn, instance, metadata)
    records.add_tags(conn, instance["uuid"], tags)
    action_id = records.start_action(conn, instance["uuid"], "create", context.request_id, context.user_id,
                                     context.project_id)
    if failure is not None:
        records.add_fault(conn, instance["uuid"], 500, failure, None, None)
        records.record_event(conn, action_id, "conductor_schedule_and_build_instances", None, "Error",
                             f"nova.exception.NoValidHost: {failure}")


def _schedule_and_build(state: Any, plan: BootPlan, instance: dict[str, Any], metadata: dict[str, str],
                        tags: list[str], context: RequestContext) -> None:
    instance_uuid = instance["uuid"]
    try:
        nodes = eligible_nodes(state, plan, instance.get("availability_zone"))
        selection = server_groups.select_and_claim(state, plan, instance, nodes)
    except (NoValidHost, SchedulerUnavailable) as error:
        LOG.info("server %s could not be scheduled: %s", instance_uuid, error)
        _bury_in_cell0(state, instance, metadata, tags, context)
        return
    with state.api_db.read() as conn:
        host_mapping = q.host_mapping(conn, selection.host)
    try:
        if host_mapping is None:
            raise LookupError(f"host {selection.host} is not mapped to a cell")
        cell = state.cells.by_id(host_mapping.cell_id)
        built = {
            **instance,
            "host": selection.host,
            "node": selection.nodename,
            "task_state": states.SPAWNING,
            "availability_zone": plan.host_zones.get(selection.host, state.conf.compute.default_availability_zone),
            "build_alternates": _build_alternates(state, plan, selection),
        }

        def create(_cell: CellMapping, database: Database) -> None:
            database.write(_create_in_cell, built, metadata, tags, context)

        state.cells.run_in_cell(cell, create)
    except Exception as error:
        LOG.warning("server %s could not be created on %s: %s", instance_uuid, selection.host, error)
        state.scheduler.release(instance_uuid)
        server_groups.forget_host(state.api_db, instance_uuid)
        _bury_in_cell0(state, instance, metadata, tags, context)
        return
    _finish_build(state.api_db, instance_uuid, cell.id)


def _build_alternates(state: Any, plan: BootPlan, selection: Selection) -> str | None:
    """What the compute service retries a failed build on (upstream's host list), as JSON.

    None when rescheduling is off (``[scheduler] max_attempts = 1`` or a
    forced host): a failed build then ends in ERROR with its own fault.
    An empty list still reschedules, straight into "Exhausted all hosts".
    """
    if plan.request.alternates <= 0:
        return None
    cell = plan.node_cells.get(selection.provider_uuid)
    default_zone = state.conf.compute.default_availability_zone
    alternates = [
        {"host": alt.host, "node": alt.nodename, "provider": alt.provider_uuid, "allocations": alt.allocations,
         "availability_zone": plan.host_zones.get(alt.host, default_zone)}
        # Upstream's alternates come from the selected host's cell only.
        for alt in selection.alternates if plan.node_cells.get(alt.provider_uuid) == cell
    ]
    return json.dumps({"hosts": [[selection.host, selection.nodename]], "alternates": alternates})


def _finish_build(api_db: Database, instance_uuid: str, cell_id: int) -> None:
    def work(conn: Any) -> None:
        q.update_instance_mapping(conn, instance_uuid, cell_id=cell_id)
        q.delete_build_request(conn, instance_uuid)

    api_db.write(work)


def _bury_in_cell0(state: Any, instance: dict[str, Any], metadata: dict[str, str], tags: list[str],
                   context: RequestContext) -> None:
    cell0 = state.cells.cell0()
    if cell0 is None:
        raise errors.InternalError("cell0 is not mapped; run 'corral compute cell_v2 map-cell0'")
    failed = {**instance, "vm_state": states.ERROR, "task_state": None, "availability_zone": instance.get("availability_zone")}
    database = state.cells.database(cell0)
    database.write(_create_in_cell, failed, metadata, tags, context, NO_VALID_HOST_FAULT)
    _finish_build(state.api_db, instance["uuid"], cell0.id)


# ---------------------------------------------------------------- lookup


@dataclass
class Found:
    """A server: its full instance row, or (cell down) its mapping and request spec."""

    mapping: Any
    cell: CellMapping | None
    instance: dict[str, Any] | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    request_spec: dict[str, Any] | None = None

    @property
    def minimal(self) -> bool:
        return self.instance is None


def find_server(state: Any, context: RequestContext, instance_uuid: str, *, cell_down_support: bool,
                action: str = "show") -> Found:
    """The server as the caller may see it; 404 for other projects' servers (up or down cell)."""
    with state.api_db.read() as conn:
        mapping = q.instance_mapping(conn, instance_uuid)
        build = q.build_request(conn, instance_uuid) if mapping is not None and mapping.cell_id is None else None
    if mapping is None or not _visible(context, mapping.project_id):
        raise not_found(instance_uuid)
    if mapping.cell_id is None:
        if build is None:
            raise not_found(instance_uuid)
        build = {**build, TAGS_KEY: build.get("tags", [])}
        return Found(mapping, None, instance=build, metadata=build.get("metadata", {}))
    cell = state.cells.by_id(mapping.cell_id)

    def read(_cell: CellMapping, database: Database) -> tuple[dict[str, Any] | None, dict[str, str]]:
        with database.read() as conn:
            instance = cq.get_instance(conn, instance_uuid)
            if instance is None:
                return None, {}
            metadata = cq.instance_metadata(conn, [instance_uuid])[instance_uuid]
            instance[TAGS_KEY] = records.tags_of(conn, [instance_uuid])[instance_uuid]
            instance[FAULT_KEY] = records.latest_faults(conn, [instance_uuid]).get(instance_uuid)
            return instance, metadata

    result = state.cells.scatter_gather([cell], read)[cell.uuid]
    if isinstance(result, tuple):
        instance, metadata = result
        if instance is None:
            raise not_found(instance_uuid)
        return Found(mapping, cell, instance=instance, metadata=metadata)
    if action != "show" or not cell_down_support:
        raise CellDown(
            f"Cell {cell.uuid} is not responding or returned an exception, hence instance info is not available."
        )
    if mapping.queued_for_delete:
        raise not_found(instance_uuid)
    with state.api_db.read() as conn:
        spec = q.request_spec(conn, instance_uuid)
    if spec is None:
        raise not_found(instance_uuid)
    return Found(mapping, cell, request_spec=spec)


def _visible(context: RequestContext, project_id: str) -> bool:
    return context.is_admin or context.project_id == project_id


# ---------------------------------------------------------------- delete


def _update_in_cell(state: Any, found: Found, expected: dict[str, Any] | None, record: tuple[str, RequestContext] | None = None,
                    **values: Any) -> bool:
    """Update the instance (compare-and-set on ``expected``) and record the instance action ``record``, at once."""
    assert found.cell is not None

    def change(conn: Any) -> int:
        changed = int(cq.update_instance(conn, found.mapping.instance_uuid, expected, **values))
        if changed and record is not None:
            action, context = record
            records.start_action(conn, found.mapping.instance_uuid, action, context.request_id, context.user_id,
                                 context.project_id)
        return changed

    def work(_cell: CellMapping, database: Database) -> int:
        return int(database.write(change))

    try:
        return bool(state.cells.run_in_cell(found.cell, work))
    except Exception as error:
        raise CellDown(f"Cell {found.cell.uuid} did not accept the change: {error}") from error


def _set_queued_for_delete(state: Any, instance_uuid: str, value: bool) -> None:
    state.api_db.write(lambda conn: q.update_instance_mapping(conn, instance_uuid, queued_for_delete=value))


def _hard_delete(state: Any, found: Found, context: RequestContext) -> None:
    instance_uuid = found.mapping.instance_uuid
    if found.cell is None:
        # Never reached a cell: drop the build request.
        state.api_db.write(lambda conn: q.delete_build_request(conn, instance_uuid))
    elif _delete_in_cell(state, found, context):
        # Its host deletes it once its guest is destroyed, and frees its claim then.
        _set_queued_for_delete(state, instance_uuid, True)
        return
    _set_queued_for_delete(state, instance_uuid, True)
    server_groups.forget_host(state.api_db, instance_uuid)
    try:
        state.scheduler.release(instance_uuid)
    except SchedulerUnavailable as error:
        # The compute service's periodic audit releases it later.
        LOG.warning("could not release the resources of %s yet: %s", instance_uuid, error)


def _delete_in_cell(state: Any, found: Found, context: RequestContext) -> bool:
    """Delete the server in its cell; True when its host is to do it (upstream's terminate_instance).

    As upstream, a server whose driver destroys before it deletes (bare
    metal) is left ``deleting`` with a ``delete`` task for its host, whose
    compute service then undeploys it, deletes it and frees its claim. A
    server on no host, or whose compute service is down, is deleted at
    once (upstream's local delete), as is every server of a driver whose
    guests go at once: its host destroys the guest when it next looks
    (upstream's reap).
    """
    assert found.cell is not None and found.instance is not None
    instance_uuid = found.mapping.instance_uuid
    host, node = found.instance.get("host"), found.instance.get("node")

    def on_host(conn: Any) -> bool:
        if not host or not destroys_before_delete(cq.hypervisor_type_of(conn, host, node)):
            return False
        service = cq.get_service(conn, host=host, binary=COMPUTE_BINARY)
        return service is not None and service_is_up(state.conf, service, q.utcnow())

    def change(conn: Any) -> bool:
        if on_host(conn):
            if not cq.update_instance(conn, instance_uuid, {"deleted": False}, task_state=states.DELETING):
                raise not_found(instance_uuid)
            records.start_action(conn, instance_uuid, "delete", context.request_id, context.user_id,
                                 context.project_id)
            records.add_task(conn, instance_uuid, "delete", context.request_id, {})
            return True
        now = q.utcnow()
        # The guest is destroyed by the host's compute service when it next looks (upstream's reap).
        if cq.update_instance(conn, instance_uuid, None, deleted=True, deleted_at=now, terminated_at=now,
                              vm_state=states.DELETED, task_state=None, power_state=states.NOSTATE):
            records.start_action(conn, instance_uuid, "delete", context.request_id, context.user_id,
                                 context.project_id)
        return False

    def work(_cell: CellMapping, database: Database) -> bool:
        return bool(database.write(change))

    try:
        return bool(state.cells.run_in_cell(found.cell, work))
    except errors.NotFound:
        raise
    except Exception as error:
        raise CellDown(f"Cell {found.cell.uuid} did not accept the change: {error}") from error


def delete_server(state: Any, context: RequestContext, instance_uuid: str) -> None:
    found = find_server(state, context, instance_uuid, cell_down_support=False, action="delete")
    state.policy.authorize(context, policies.SERVERS_DELETE, {"project_id": found.mapping.project_id})
    instance = found.instance
    assert instance is not None
    _check_lock(context, found)
    soft = (
        state.conf.compute.reclaim_instance_interval > 0
        and found.cell is not None
        and instance.get("host")
        and instance["vm_state"] not in (states.SOFT_DELETED, states.ERROR, states.BUILDING)
    )
    if soft:
        _update_in_cell(
            state, found, {"vm_state": instance["vm_state"]}, ("delete", context), vm_state=states.SOFT_DELETED,
            task_state=None, power_state=states.SHUTDOWN,
        )
        _set_queued_for_delete(state, instance_uuid, True)
        return
    _hard_delete(state, found, context)


def restore_server(state: Any, context: RequestContext, instance_uuid: str) -> None:
    found = find_server(state, context, instance_uuid, cell_down_support=False, action="restore")
    state.policy.authorize(context, policies.DEFERRED_DELETE_RESTORE, {"project_id": found.mapping.project_id})
    _check_lock(context, found)
    _require_soft_deleted(found, "restore")
    if not _update_in_cell(
        state, found, {"vm_state": states.SOFT_DELETED}, ("restore", context), vm_state=states.ACTIVE, task_state=None,
        power_state=states.RUNNING,
    ):
        raise _invalid_state(found, "restore")
    _set_queued_for_delete(state, instance_uuid, False)


def force_delete_server(state: Any, context: RequestContext, instance_uuid: str) -> None:
    found = find_server(state, context, instance_uuid, cell_down_support=False, action="forceDelete")
    state.policy.authorize(context, policies.DEFERRED_DELETE_FORCE, {"project_id": found.mapping.project_id})
    _check_lock(context, found)
    _require_soft_deleted(found, "forceDelete")
    _hard_delete(state, found, context)


def _check_lock(context: RequestContext, found: Found) -> None:
    """Upstream's check_instance_lock: only admins act on a locked server."""
    if found.instance is not None and found.instance.get("locked") and not context.is_admin:
        raise errors.Conflict(f"Instance {found.mapping.instance_uuid} is locked")


def _require_soft_deleted(found: Found, action: str) -> None:
    if found.instance is None or found.instance["vm_state"] != states.SOFT_DELETED:
        raise _invalid_state(found, action)


def _invalid_state(found: Found, action: str) -> errors.Conflict:
    vm_state = found.instance["vm_state"] if found.instance else None
    return errors.Conflict(
        f"Cannot '{action}' instance {found.mapping.instance_uuid} while it is in vm_state {vm_state}"
    )


def cells_for_listing(cells: CellRegistry) -> list[CellMapping]:
    return cells.mappings()
