"""The allocation process, run by conductors in worker threads.

``create_allocation`` stores the allocation with this conductor's id as
``conductor_affinity`` and state ``allocating``, then hands it to a worker:
the worker lists the nodes that could serve it, shuffles them, and tries
them one at a time: lock the node, check it again, reserve it (node and
allocation written in one transaction), release the lock.

Every write to the allocation carries ``AND conductor_affinity = <this
conductor>``.  A conductor that starts resumes its own unfinished
allocations; a periodic task on every conductor takes over those of
conductors that stopped heartbeating, with ``UPDATE ... WHERE
conductor_affinity = <dead conductor>``, which exactly one conductor wins.

The methods below are mixed into :class:`corral.baremetal.conductor.manager.Conductor`;
``create_allocation`` and ``destroy_allocation`` are RPC methods.
"""

from __future__ import annotations

import datetime
import logging
import random
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from corral.baremetal.conductor import locks
from corral.baremetal.db import allocations as allocation_db
from corral.baremetal.db import nodes as node_db
from corral.baremetal.db import ports as port_db
from corral.baremetal.db import volumes as volume_db
from corral.baremetal.domain import allocations as domain
from corral.core.db import is_duplicate
from corral.core.errors import BadRequest, Conflict, NotFound, ServiceUnavailable
from corral.core.workers import PoolFull

if TYPE_CHECKING:
    from corral.baremetal.conductor.core import ConductorCore

LOG = logging.getLogger(__name__)

RPC_METHODS = frozenset({"create_allocation", "destroy_allocation", "backfill_allocation"})

# Rounds over the locked candidates before giving up (upstream retries
# NodeLocked the same way), and the pause between rounds.
LOCKED_ROUNDS = 5
LOCKED_PAUSE = 0.1


class AllocationLost(Exception):
    """Another conductor took the allocation over, or it was deleted: stop quietly."""


class AllocationWork:
    """Allocation methods of a conductor (see the module docstring)."""

    # ------------------------------------------------------------ RPC

    def create_allocation(self: ConductorCore, values: dict[str, Any], traits: list[str]) -> dict[str, Any]:
        """Store the allocation (state allocating, affinity here) and start processing it.

        Returns its id and creation time (ISO 8601): the caller answers with
        the allocation as stored, whatever the worker has done since.
        """
        now = node_db.utcnow()
        row = {**values, "state": domain.ALLOCATING, "conductor_affinity": self.conductor_id, "created_at": now}
        try:
            allocation_id = self.db.write(lambda conn: allocation_db.insert(conn, row, traits))
        except Exception as error:
            if is_duplicate(error):
                raise duplicate_allocation(self, values) from None
            raise
        try:
            self.pool.submit(process_allocation, self, allocation_id)
        except PoolFull:
            # Nothing was started: take the row back so the client sees nothing changed.
            self.db.write(lambda conn: allocation_db.delete(conn, allocation_id, unreserved_only=True))
            raise ServiceUnavailable(
                "Requested action cannot be performed due to lack of free conductor workers."
            ) from None
        return {"id": allocation_id, "created_at": now.replace(tzinfo=datetime.UTC).isoformat()}

    def backfill_allocation(self: ConductorCore, node_id: int, values: dict[str, Any], traits: list[str]) -> int:
        """Record an allocation for a node already deployed (1.58); returns its id.

        Checked and written under the node's lock in one transaction: a node
        that does not fit is refused (400) and nothing is stored.
        """
        with self._locked(node_id) as task:
            if task.node.get("allocation_id"):
                raise Conflict(f"An allocation with UUID {values['uuid']} already exists.")
            reasons = domain.backfill_refusals({**values, "traits": traits}, task.node,
                                               node_db_traits(self, node_id))
            if reasons:
                raise BadRequest(f"Cannot backfill an allocation for node {task.node['uuid']}: "
                                 f"{'; '.join(reasons)}.")
            row = {**values, "resource_class": values.get("resource_class") or task.node["resource_class"],
                   "state": domain.ACTIVE, "conductor_affinity": self.conductor_id, "node_id": node_id}
            try:
                return self.db.write(_backfill, row, traits, task.node, self.host, task.generation)
            except Exception as error:
                if is_duplicate(error):
                    raise duplicate_allocation(self, values) from None
                raise

    def destroy_allocation(self: ConductorCore, allocation_id: int) -> None:
        """Remove the allocation and free its node (under the node's lock)."""
        with self.db.read() as conn:
            allocation = allocation_db.get(conn, allocation_id=allocation_id)
        if allocation is None:
            raise NotFound(f"Allocation {allocation_id} could not be found.")
        if allocation["node_id"] is None:
            if self.db.write(lambda conn: allocation_db.delete(conn, allocation_id, unreserved_only=True)):
                return
            with self.db.read() as conn:  # it got a node meanwhile
                allocation = allocation_db.get(conn, allocation_id=allocation_id)
            if allocation is None or allocation["node_id"] is None:
                return
        node_id = allocation["node_id"]
        conf = self.conf.conductor
        generation = locks.reserve(self.db, node_id, allocation["node_uuid"], self.host,
                                   attempts=conf.node_locked_retry_attempts, interval=conf.node_locked_retry_interval)
        try:
            self.db.write(_delete_checked, allocation_id, node_id, self.host, generation)
        finally:
            locks.release(self.db, node_id, self.host, generation)

    # ------------------------------------------------------- recovery

    def resume_allocations(self: ConductorCore) -> int:
        """Process again this conductor's allocations that were in progress when it stopped."""
        with self.db.read() as conn:
            pending = allocation_db.in_state(conn, domain.ALLOCATING, affinity=self.conductor_id)
        started = 0
        for allocation in pending:
            try:
                self.pool.submit(process_allocation, self, allocation["id"])
            except PoolFull:
                LOG.warning("no free worker to resume allocation %s; the next check retries", allocation["uuid"])
                break
            started += 1
        return started

    def check_orphan_allocations(self: ConductorCore) -> int:
        """Take over the allocations in progress on conductors that stopped heartbeating."""
        live_ids = [conductor["id"] for conductor in self.live_conductors()]
        if self.conductor_id not in live_ids:
            return 0  # this conductor is not (yet) considered alive itself
        with self.db.read() as conn:
            orphans = allocation_db.orphaned(conn, live_ids)
            hosts = allocation_db.conductor_hosts(conn, [dead for _, dead in orphans if dead is not None])
        taken = 0
        for allocation_id, dead in orphans:
            won = self.db.write(lambda conn, a=allocation_id, d=dead: allocation_db.take_over(
                conn, a, d, self.conductor_id))
            if not won:
                continue  # another conductor was faster
            LOG.info("allocation %s taken over from dead conductor %s", allocation_id, hosts.get(dead, dead))
            try:
                self.pool.submit(process_allocation, self, allocation_id)
            except PoolFull:
                LOG.warning("no free worker for allocation %s; resumed at the next check", allocation_id)
                break
            taken += 1
        return taken


# ------------------------------------------------------------ process


def process_allocation(conductor: ConductorCore, allocation_id: int) -> None:
    """Find and reserve a node; record the outcome on the allocation, never raise."""
    with conductor.db.read() as conn:
        allocation = allocation_db.get(conn, allocation_id=allocation_id)
    if (allocation is None or allocation["state"] != domain.ALLOCATING
            or allocation["conductor_affinity"] != conductor.conductor_id):
        return
    try:
        node = _allocate(conductor, allocation)
        LOG.info("allocation %s reserved node %s", allocation["uuid"], node["uuid"])
    except domain.AllocationFailed as failure:
        _record_failure(conductor, allocation, domain.failure_message(allocation["uuid"], failure.reason))
    except AllocationLost:
        LOG.info("allocation %s is no longer processed by %s", allocation["uuid"], conductor.host)
    except Exception as error:  # noqa: BLE001 - recorded on the allocation
        LOG.exception("allocation %s failed unexpectedly", allocation["uuid"])
        _record_failure(conductor, allocation, f"Unexpected exception during allocation: {error}")


def _record_failure(conductor: ConductorCore, allocation: Mapping[str, Any], message: str) -> None:
    try:
        conductor.db.write(lambda conn: allocation_db.update(
            conn, allocation["id"], {"state": domain.ERROR, "last_error": message},
            affinity=conductor.conductor_id, state=domain.ALLOCATING))
    except Exception:  # noqa: BLE001 - the periodic check finds it again
        LOG.exception("could not record the failure of allocation %s", allocation["uuid"])


def _allocate(conductor: ConductorCore, allocation: Mapping[str, Any]) -> Mapping[str, Any]:
    with conductor.db.read() as conn:
        found = allocation_db.candidate_nodes(
            conn, allocation["resource_class"], uuids=allocation["candidate_nodes"] or None,
            owner=allocation["owner"],
        )
    candidates = domain.choose_candidates(allocation, found)
    suitable = len(candidates)
    for round_number in range(LOCKED_ROUNDS):
        locked: list[Mapping[str, Any]] = []
        for node in candidates:
            outcome = _try_node(conductor, allocation, node)
            if outcome == "reserved":
                return node
            if outcome == "locked":
                locked.append(node)
        if not locked:
            raise domain.AllocationFailed("all nodes were filtered out during reservation")
        candidates = locked
        time.sleep(LOCKED_PAUSE * (round_number + 1) * random.uniform(0.5, 1.5))
    raise domain.AllocationFailed(f"could not reserve any of {suitable} suitable nodes")


def _try_node(conductor: ConductorCore, allocation: Mapping[str, Any], node: Mapping[str, Any]) -> str:
    """'reserved', 'locked' (try again later) or 'unfit' (next node)."""
    try:
        generation = locks.reserve(conductor.db, node["id"], node["uuid"], conductor.host, attempts=0)
    except locks.NodeLocked:
        return "locked"
    except NotFound:
        return "unfit"
    try:
        with conductor.db.read() as conn:
            fresh = allocation_db.candidate_node(conn, node["id"])
        if fresh is None or domain.unfit_reason(allocation, fresh) is not None:
            return "unfit"
        info = domain.instance_info_for(allocation, fresh)
        conductor.db.write(lambda conn: allocation_db.reserve_node(
            conn, allocation["id"], allocation["uuid"], node["id"], info,
            host=conductor.host, affinity=conductor.conductor_id, generation=generation))
        return "reserved"
    except allocation_db.ReservationFailed as failure:
        if failure.what == "allocation":
            raise AllocationLost() from None
        return "unfit"
    except Exception as error:
        if is_duplicate(error):  # the allocation's UUID is some other node's instance
            raise domain.AllocationFailed(
                f"its UUID is already the instance UUID of another node ({error.__class__.__name__})"
            ) from None
        raise
    finally:
        locks.release(conductor.db, node["id"], conductor.host, generation)


# ------------------------------------------------------------ backfill


def node_db_traits(conductor: ConductorCore, node_id: int) -> list[str]:
    with conductor.db.read() as conn:
        return node_db.traits_of(conn, [node_id])[node_id]


def _backfill(conn: Any, row: dict[str, Any], traits: list[str], node: Mapping[str, Any], host: str,
              generation: int | None) -> int:
    allocation_id = allocation_db.insert(conn, row, traits)
    # Upstream stores the allocation, then records it active: updated_at is set.
    allocation_db.update(conn, allocation_id, {})
    # The node records the requested traits as an allocated node does.
    values = {"instance_uuid": row["uuid"], "allocation_id": allocation_id,
              "instance_info": domain.instance_info_for({"traits": traits}, node)}
    # UPDATE nodes SET instance_uuid = :uuid, allocation_id = :id, instance_info = :info
    #   WHERE id = :node_id AND reservation = :host AND lock_generation = :generation
    if not node_db.update(conn, node["id"], values, reservation=host, generation=generation):
        raise locks.LockLost(node["uuid"], host)  # rolls the allocation back
    return allocation_id


# ------------------------------------------------------------- delete


def _delete_checked(conn: Any, allocation_id: int, node_id: int, host: str, generation: int) -> None:
    if not locks.check(conn, node_id, host, generation):
        raise locks.LockLost(str(node_id), host)
    allocation = allocation_db.get(conn, allocation_id=allocation_id)
    if allocation is None:
        raise NotFound(f"Allocation {allocation_id} could not be found.")
    node = node_db.get(conn, node_id=node_id)
    refusal = domain.delete_refusal(allocation, node)
    if refusal is not None:
        raise Conflict(refusal)
    allocation_db.delete(conn, allocation_id)


def duplicate_allocation(conductor: ConductorCore, values: Mapping[str, Any]) -> Conflict:
    with conductor.db.read() as conn:
        if values.get("name") and allocation_db.get(conn, name=values["name"]) is not None:
            return Conflict(f"An allocation with name {values['name']} already exists.")
    return Conflict(f"An allocation with UUID {values['uuid']} already exists.")


def deletable_node(node: Mapping[str, Any]) -> Mapping[str, Any]:
    """The node as the delete rules see it: in maintenance, its allocation's instance does not block."""
    if node.get("maintenance") and node.get("allocation_id"):
        return {**node, "instance_uuid": None}
    return node


def delete_node(conn: Any, node_id: int) -> None:
    """Delete the node with its allocation, ports, port groups and volume records (one transaction)."""
    allocation_db.delete_for_node(conn, node_id)
    port_db.delete_for_node(conn, node_id)
    volume_db.delete_for_node(conn, node_id)
    node_db.delete(conn, node_id)


def release_for_update(task: Any, changes: Mapping[str, Any]) -> None:
    """A node PATCH removing instance_uuid from an allocated node: 409 or the allocation goes.

    Called by the conductor with the node locked, before it writes ``changes``.
    """
    node = task.node
    if "instance_uuid" not in changes or changes["instance_uuid"] or not node.get("allocation_id"):
        return
    with task.conductor.db.read() as conn:
        allocation = allocation_db.get(conn, allocation_id=node["allocation_id"])
    if allocation is None:
        return
    refusal = domain.delete_refusal(allocation, {**node, "maintenance": changes.get("maintenance",
                                                                                    node.get("maintenance"))})
    if refusal is not None:
        raise Conflict(refusal)
    task.write(lambda conn: allocation_db.delete(conn, allocation["id"]))


def release_on_tear_down(task: Any) -> None:
    """Tear-down ends the node's allocation (called with the node locked)."""
    allocation_id = task.node.get("allocation_id")
    if allocation_id:
        task.write(lambda conn: allocation_db.delete(conn, allocation_id))
        task.node["allocation_id"] = None


def candidate_uuids(conn: Any, idents: Sequence[str]) -> tuple[list[str], list[str]]:
    """Candidate node names or UUIDs -> (UUIDs, idents not found)."""
    found, missing = [], []
    for ident in idents:
        node = node_db.get(conn, uuid=ident) or node_db.get(conn, name=ident)
        if node is None:
            missing.append(ident)
        elif node["uuid"] not in found:
            found.append(node["uuid"])
    return found, missing
