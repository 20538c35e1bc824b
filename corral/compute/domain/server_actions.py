"""What the API does for server actions, metadata and tags, before the compute service takes over.

Each action checks what upstream's ``nova.compute.api`` checks, in its
order (the lock, the host, the vm_state and task_state, then whether the
server was ever launched), and answers the same 409 texts. An action the
compute service carries out is then recorded in one transaction of the
server's cell: the new task state (compare-and-set on the state that was
checked), the instance action, and the task for the host's compute
service (what upstream casts over RPC). Lock and unlock are done here,
with their ``api_*`` event, as upstream does them in its API.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from corral.core import errors
from corral.core.context import RequestContext
from corral.core.db import Database
from corral.compute.cells import CellMapping
from corral.compute.db import cell_queries as cq
from corral.compute.db import server_records as records
from corral.compute.domain import states
from corral.compute.domain.exceptions import CellDown
from corral.compute.domain.servers import Found

T = TypeVar("T")

ANY = object()


def invalid_state(instance_uuid: str, action: str, attr: str, state: Any) -> errors.Conflict:
    """Upstream's raise_http_conflict_for_instance_invalid_state."""
    return errors.Conflict(f"Cannot '{action}' instance {instance_uuid} while it is in {attr} {state}")


def locked(instance_uuid: str) -> errors.Conflict:
    return errors.Conflict(f"Instance {instance_uuid} is locked")


def instance_of(found: Found) -> dict[str, Any]:
    assert found.instance is not None
    return found.instance


def check_lock(context: RequestContext, found: Found) -> None:
    """Upstream's check_instance_lock: admins act on locked servers, nobody else."""
    if instance_of(found).get("locked") and not context.is_admin:
        raise locked(found.mapping.instance_uuid)


def check_host(found: Found) -> None:
    """Upstream's check_instance_host."""
    if not instance_of(found).get("host"):
        raise errors.Conflict(f"Instance {found.mapping.instance_uuid} is not ready")


def check_state(found: Found, action: str, vm_states: Sequence[str] | None,
                task_states: Sequence[str | None] | None = (None,), must_have_launched: bool = True) -> None:
    """Upstream's check_instance_state."""
    instance = instance_of(found)
    uuid = found.mapping.instance_uuid
    if vm_states is not None and instance["vm_state"] not in vm_states:
        raise invalid_state(uuid, action, "vm_state", instance["vm_state"])
    if task_states is not None and instance["task_state"] not in task_states:
        raise invalid_state(uuid, action, "task_state", instance["task_state"])
    if must_have_launched and not instance.get("launched_at"):
        raise invalid_state(uuid, action, "launched_at", None)


def in_cell(state: Any, found: Found, work: Callable[[Any], T]) -> T:
    """``work(conn)`` in one write transaction of the server's cell; API errors pass through."""
    if found.cell is None:
        raise invalid_state(found.mapping.instance_uuid, "update", "vm_state", states.BUILDING)
    failure: list[errors.ApiError] = []

    def run(_cell: CellMapping, database: Database) -> Any:
        def guarded(conn: Any) -> Any:
            try:
                return work(conn)
            except errors.ApiError as error:
                failure.append(error)
                raise
        return database.write(guarded)

    try:
        return state.cells.run_in_cell(found.cell, run)  # type: ignore[no-any-return]
    except errors.ApiError:
        raise
    except Exception as error:
        if failure:
            raise failure[0] from error
        raise CellDown(f"Cell {found.cell.uuid} did not accept the change: {error}") from error


def _expected(instance: dict[str, Any]) -> dict[str, Any]:
    return {"vm_state": instance["vm_state"], "task_state": instance["task_state"], "deleted": False}


def _moved_on(conn: Any, found: Found, action: str) -> errors.ApiError:
    """The 409 for a server that changed between the check and the write (or 404 when it is gone)."""
    uuid = found.mapping.instance_uuid
    now = cq.get_instance(conn, uuid)
    if now is None:
        return errors.NotFound(f"Instance {uuid} could not be found.")
    if now["task_state"] is not None:
        return invalid_state(uuid, action, "task_state", now["task_state"])
    return invalid_state(uuid, action, "vm_state", now["vm_state"])


def begin_task(state: Any, context: RequestContext, found: Found, *, action: str, instance_action: str,
               task: str, task_state: str, params: dict[str, Any], values: dict[str, Any] | None = None,
               metadata: dict[str, str] | None = None) -> None:
    """Move the server to ``task_state``, record the instance action and queue the task, in one transaction."""
    instance = instance_of(found)
    uuid = instance["uuid"]

    def work(conn: Any) -> None:
        if not cq.update_instance(conn, uuid, _expected(instance), task_state=task_state, **(values or {})):
            raise _moved_on(conn, found, action)
        if metadata is not None:
            records.set_metadata(conn, uuid, metadata, replace=True)
        records.start_action(conn, uuid, instance_action, context.request_id, context.user_id, context.project_id)
        records.add_task(conn, uuid, task, context.request_id, params)

    in_cell(state, found, work)


def set_lock(state: Any, context: RequestContext, found: Found, lock: bool, reason: str | None = None) -> None:
    """Lock or unlock, recorded as the action with its ``api_lock`` / ``api_unlock`` event."""
    instance = instance_of(found)
    uuid = instance["uuid"]
    is_owner = instance["project_id"] == context.project_id
    values: dict[str, Any] = (
        {"locked": True, "locked_by": "owner" if is_owner else "admin", "locked_reason": reason}
        if lock else {"locked": False, "locked_by": None, "locked_reason": None}
    )
    name = "lock" if lock else "unlock"

    def work(conn: Any) -> None:
        if not cq.update_instance(conn, uuid, {"deleted": False}, **values):
            raise errors.NotFound(f"Instance {uuid} could not be found.")
        action_id = records.start_action(conn, uuid, name, context.request_id, context.user_id, context.project_id)
        records.record_event(conn, action_id, f"api_{name}", None)

    in_cell(state, found, work)


def is_expected_locked_by(context: RequestContext, found: Found) -> bool:
    """Upstream's: may this caller unlock without the override policy?"""
    instance = instance_of(found)
    expected = "owner" if instance["project_id"] == context.project_id else "admin"
    locked_by = instance.get("locked_by")
    return not (locked_by and locked_by != expected)


# -------------------------------------------------------------- metadata


def update_metadata(state: Any, context: RequestContext, found: Found, metadata: dict[str, str], *,
                    replace: bool, action: str, limit: int) -> dict[str, str]:
    """Upstream's update_instance_metadata: lock, state, then the metadata items quota (403)."""
    check_lock(context, found)
    check_state(found, action, states.ALLOW_UPDATE, (None,))
    instance = instance_of(found)
    merged = dict(metadata) if replace else {**found.metadata, **metadata}
    if limit >= 0 and len(merged) > limit:
        raise errors.Forbidden(f"Maximum number of metadata items exceeds {limit}")

    def work(conn: Any) -> dict[str, str]:
        if not cq.update_instance(conn, instance["uuid"], _expected(instance)):
            raise _moved_on(conn, found, action)
        records.set_metadata(conn, instance["uuid"], metadata, replace=replace)
        return cq.instance_metadata(conn, [instance["uuid"]])[instance["uuid"]]

    in_cell(state, found, work)
    return merged


def delete_metadata(state: Any, context: RequestContext, found: Found, key: str) -> None:
    check_lock(context, found)
    check_state(found, "delete metadata", states.ALLOW_UPDATE, (None,))
    instance = instance_of(found)

    def work(conn: Any) -> None:
        if not cq.update_instance(conn, instance["uuid"], _expected(instance)):
            raise _moved_on(conn, found, "delete metadata")
        if not records.delete_metadata_key(conn, instance["uuid"], key):
            raise errors.NotFound("Metadata item was not found")

    in_cell(state, found, work)


# ------------------------------------------------------------------ tags

MAX_TAG_COUNT = 50


def check_tag_state(found: Found, action: str) -> None:
    """Upstream's server tags check: the vm_state alone, no lock."""
    instance = instance_of(found)
    if instance["vm_state"] not in states.ALLOW_UPDATE:
        raise invalid_state(found.mapping.instance_uuid, action, "vm_state", instance["vm_state"])


def change_tags(state: Any, found: Found, work: Callable[[Any, str], T]) -> T:
    instance = instance_of(found)

    def run(conn: Any) -> T:
        if cq.get_instance(conn, instance["uuid"]) is None:
            raise errors.NotFound(f"Instance {instance['uuid']} could not be found.")
        return work(conn, instance["uuid"])

    return in_cell(state, found, run)
