"""The conductor: registers itself, owns nodes through the hash ring, does the work.

The public methods below are the conductor's RPC interface: the API calls
them in-process (all-in-one server) or over JSON-RPC.  Arguments and
results are plain JSON values.  Each method locks the node it changes;
long work runs in the bounded worker pool and the call answers as soon as
the node entered its transient state (a full pool is a 503).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from oslo_config import cfg

from corral.baremetal import conf as baremetal_conf
from corral.baremetal.conductor import (
    agent,
    allocations,
    cleaning,
    inspection,
    locks,
    node_extras,
    ports,
    power,
    provisioning,
    steps,
)
from corral.baremetal.conductor.hash_ring import ring_for
from corral.baremetal.conductor.task import Task, invalid_action
from corral.baremetal.db import conductors as conductor_db
from corral.baremetal.db import history
from corral.baremetal.db import nodes as node_db
from corral.baremetal.domain import rules, states
from corral.baremetal.drivers.base import DriverError, StepsNotAvailable
from corral.baremetal.drivers.registry import DriverRegistry
from corral.core import metrics
from corral.core.db import Database, database_from_conf, is_duplicate
from corral.core.errors import ApiError, BadRequest, Conflict, ServiceUnavailable
from corral.core.workers import PoolFull, WorkerPool

LOG = logging.getLogger(__name__)

# Methods callable over RPC.
RPC_METHODS = frozenset(
    {
        "update_node",
        "destroy_node",
        "change_power_state",
        "do_provisioning_action",
        "get_clean_steps",
        "set_traits",
        "add_trait",
        "remove_trait",
        "set_maintenance",
        "set_boot_device",
        "get_boot_device",
        "get_supported_boot_devices",
        "inject_nmi",
        "validate_driver_interfaces",
        "set_target_raid_config",
        "set_console_mode",
        "get_console_information",
        "ping",
    }
) | allocations.RPC_METHODS | node_extras.RPC_METHODS | ports.RPC_METHODS | agent.RPC_METHODS | inspection.RPC_METHODS


@dataclass(frozen=True)
class _Request:
    """What a provisioning verb was asked to do."""

    action: str
    clean_steps: list[dict[str, Any]] | None
    configdrive: Any
    rescue_password: str | None
    deploy_steps: list[dict[str, Any]] | None
    service_steps: list[dict[str, Any]] | None
    disable_ramdisk: bool


class NoFreeConductorWorker(ServiceUnavailable):
    def __init__(self) -> None:
        super().__init__("Requested action cannot be performed due to lack of free conductor workers.")


class StepsPending(ApiError):
    """Clean steps are not known yet: the API answers 202 with Retry-Request-After."""

    status = 202

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message, retry_after=retry_after)


class Conductor(allocations.AllocationWork, node_extras.NodeExtras, ports.PortWork, agent.AgentWork,
                inspection.InspectionWork):
    def __init__(self, conf: cfg.ConfigOpts, db: Database | None = None) -> None:
        self.conf = conf
        self.host: str = conf.host
        self.db = db or database_from_conf(conf, baremetal_conf.database_url(conf), "baremetal_database")
        self._owns_db = db is None
        self.drivers = DriverRegistry(conf)
        self.pool = WorkerPool(
            conf.conductor.workers_pool_size, backlog=conf.conductor.workers_backlog, name=f"conductor {self.host}",
            meter=metrics.conductor_pool(self.host),
        )
        self.conductor_id: int | None = None
        self.rpc_address: str | None = None
        # Base URL of this conductor's file server (boot images for BMCs), when it runs one.
        self.file_server_url: str | None = None
        self._stopped = threading.Event()

    # ------------------------------------------------------- lifecycle

    def register(self) -> None:
        self.conductor_id = self.db.write(
            lambda conn: conductor_db.register(
                conn,
                self.host,
                drivers=self.drivers.hardware_types,
                group=self.conf.conductor.conductor_group,
                rpc_address=self.rpc_address,
                interfaces=self.drivers.interface_rows(),
            )
        )

    def recover_after_restart(self) -> None:
        """Nodes this host had locked when it stopped: release them, fail interrupted work."""
        self.recover_nodes_of([self.host])

    def recover_nodes_of(self, hosts: Sequence[str]) -> int:
        """Take over locks left by ``hosts``; work they were doing fails with a clear last_error."""
        if not hosts:
            return 0
        with self.db.read() as conn:
            stuck = [
                node for node in node_db.list_nodes(conn, {}) if node["reservation"] in set(hosts)
            ]
        recovered = 0
        for node in stuck:
            holder = node["reservation"]
            # Compare-and-set from the dead holder to this host; the new lock
            # generation fences the holder should it come back.
            generation = locks.take_over(self.db, node["id"], holder, self.host)
            if generation is None:
                continue
            task = Task(self, node["id"])
            try:
                task.adopt_lock(generation)
                state = task.node["provision_state"]
                provisioning.fail_interrupted(task, holder)
                history.record(task, _takeover_event(self.host, holder, state, task.node["provision_state"]),
                               history.event_type(state), error=state != task.node["provision_state"])
                recovered += 1
            except Exception:  # noqa: BLE001 - keep recovering the others
                LOG.exception("recovering node %s failed", node["uuid"])
            finally:
                task.release()
        if recovered:
            metrics.BAREMETAL_NODES_RECOVERED.labels(self.host).inc(recovered)
        return recovered

    def heartbeat(self) -> None:
        if not self.db.write(lambda conn: conductor_db.heartbeat(conn, self.host)):
            self.register()

    def stop(self) -> None:
        self._stopped.set()
        self.pool.stop(wait=True)
        try:
            self.db.write(lambda conn: conductor_db.unregister(conn, self.host))
        finally:
            if self._owns_db:
                self.db.dispose()

    # ---------------------------------------------------- ownership

    def live_conductors(self) -> list[dict[str, Any]]:
        with self.db.read() as conn:
            return conductor_db.alive(conn, self.conf.conductor.heartbeat_timeout)

    def owns(self, node: Mapping[str, Any], live: list[dict[str, Any]]) -> bool:
        return owner_of(node, live) == self.host

    # --------------------------------------------------------- spawn

    def spawn(self, task: Task, work: Callable[..., None], *args: Any, event: str | None = None,
              action: str | None = None, prepare: Callable[[], None] | None = None, **event_values: Any) -> None:
        """Run ``work(task, *args)`` in the pool after moving the node with ``event``.

        ``prepare`` (node changes that announce the work) runs once a worker
        is reserved.  The node's lock passes to the worker, which releases
        it.  A full pool leaves the node unchanged (503).
        """
        go = threading.Event()
        cancelled = threading.Event()

        def run() -> None:
            go.wait()
            if cancelled.is_set():
                return
            try:
                work(task, *args)
            except locks.LockLost:
                # Presumed dead and taken over meanwhile: the node is another conductor's now.
                LOG.warning("work on node %s abandoned: conductor %s lost its lock", task.node["uuid"], self.host)
            except Exception:  # noqa: BLE001 - work records its failures; this is a last resort
                LOG.exception("work on node %s failed", task.node["uuid"])
                _record_unexpected(task)
            finally:
                task.release()

        try:
            self.pool.submit(run)
        except PoolFull:
            raise NoFreeConductorWorker() from None
        try:
            if event is not None:
                task.process_event(event, action=action, **event_values)
            if prepare is not None:
                prepare()
        except BaseException:
            cancelled.set()
            go.set()
            raise
        go.set()

    def _locked(self, node_id: int) -> Task:
        return Task(self, node_id).acquire()

    # ------------------------------------------------------------ RPC

    def ping(self) -> str:
        return self.host

    def update_node(self, node_id: int, values: dict[str, Any]) -> str:
        """Write ``values`` under the node's lock; returns this conductor's host, the lock's holder."""
        with self._locked(node_id) as task:
            rules.check_update(task.node, values)
            values = rules.implied_changes(task.node, values)
            if rules.DRIVER_FIELDS & set(values):
                merged = {**task.node, **values}
                requested = {key: merged.get(key) for key in rules.DRIVER_FIELDS if key != "driver"}
                values = {**values, **self.drivers.resolve_interfaces(merged["driver"], requested)}
            try:
                allocations.release_for_update(task, values)
                if values:
                    task.update(**values)
            except Exception as error:
                if is_duplicate(error):
                    raise _duplicate(values) from None
                raise
        return self.host

    def destroy_node(self, node_id: int) -> None:
        with self._locked(node_id) as task:
            rules.check_delete(allocations.deletable_node(task.node))
            task.write(allocations.delete_node, node_id)

    def change_power_state(self, node_id: int, target: str, timeout: int | None = None) -> None:
        power.check_target(target)
        task = self._locked(node_id)
        try:
            task.driver.power.validate(task)
        except Exception as error:
            task.release()
            raise BadRequest(f"Failed to validate power interface for node {task.node['uuid']}: {error}") from None
        try:
            self.spawn(task, power.power_action, target, timeout, prepare=lambda: task.update(
                target_power_state=power.FINAL_STATES[target], last_error=None))
        except BaseException:
            task.release()
            raise

    def do_provisioning_action(self, node_id: int, action: str, clean_steps: list[dict[str, Any]] | None = None,
                               configdrive: Any = None, rescue_password: str | None = None,
                               deploy_steps: list[dict[str, Any]] | None = None,
                               service_steps: list[dict[str, Any]] | None = None,
                               disable_ramdisk: bool = False) -> None:
        event = states.VERB_EVENTS.get(action)
        task = self._locked(node_id)
        handed_off = False
        try:
            node = task.node
            if event is None or states.next_state(node["provision_state"], event) is None:
                raise invalid_action(action, node)
            request = _Request(action, clean_steps, configdrive, rescue_password, deploy_steps, service_steps,
                               bool(disable_ramdisk))
            handed_off = self._dispatch(task, event, request)
        finally:
            if not handed_off:
                task.release()

    def _dispatch(self, task: Task, event: str, request: _Request) -> bool:
        """Start the verb's work; True when a worker now owns the task."""
        state = task.node["provision_state"]
        action = request.action
        fresh = {"last_error": None}
        if event == "manage" and state != states.ENROLL:
            task.process_event("manage", action=action)
            return False
        if event == "unhold":
            task.process_event("unhold", action=action)
            return False
        if event == "abort":
            return self._abort(task, action)
        if event in ("rebuild", "delete") and task.node["protected"]:
            raise rules.NodeProtected(
                f"Node {task.node['uuid']} is protected and cannot be undeployed, rebuilt or deleted"
            )
        work: dict[str, tuple[Callable[..., None], tuple[Any, ...]]] = {
            "manage": (provisioning.verify, ()),
            "provide": (cleaning.start_automated, ()),
            "clean": (cleaning.start_manual, (request.clean_steps or [], request.disable_ramdisk)),
            "deploy": (provisioning.deploy, (request.configdrive, request.deploy_steps)),
            "rebuild": (provisioning.deploy, (request.configdrive, request.deploy_steps)),
            "delete": (provisioning.tear_down, (state,)),
            "inspect": (provisioning.inspect, ()),
            "adopt": (provisioning.adopt, ()),
            "rescue": (provisioning.rescue, (request.rescue_password,)),
            "unrescue": (provisioning.unrescue, ()),
            "service": (steps.service, (request.service_steps or [], request.disable_ramdisk)),
        }
        if event in ("deploy", "rebuild"):
            # As upstream, bad instance_info is the request's error (400), not a failed deployment.
            try:
                task.driver.deploy.validate(task)
            except DriverError as error:
                raise BadRequest(f"RPC do_node_deploy failed to validate deploy or power info for node "
                                 f"{task.node['uuid']}. Error: {error}") from None
        if event == "rescue":
            _validate_rescue(task, request.rescue_password or "")
        function, args = work[event]
        self.spawn(task, function, *args, event=event, action=action, **fresh)
        return True

    def _abort(self, task: Task, action: str) -> bool:
        state = task.node["provision_state"]
        if state in (states.CLEANWAIT, states.CLEANHOLD):
            cleaning.request_abort(task)
            return False
        if state in (states.SERVICEWAIT, states.SERVICEHOLD, states.SERVICEFAIL):
            steps.abort_service(task)
            return False
        if state == states.RESCUEWAIT:
            provisioning.abort_rescue(task)
            return False
        if state in (states.INSPECTWAIT, states.DEPLOYWAIT, states.DEPLOYHOLD):
            task.process_event("abort", action=action, last_error=f"By request, the {state} operation was aborted")
            if state in (states.DEPLOYWAIT, states.DEPLOYHOLD):
                provisioning.stop_ramdisk(task)
            elif state == states.INSPECTWAIT:
                inspection.clean_up(task)
            return False
        raise invalid_action(action, task.node)

    def get_clean_steps(self, node_id: int, min_priority: int = 0) -> list[dict[str, Any]]:
        task = Task(self, node_id, shared=True).acquire()
        try:
            steps = cleaning.driver_steps(task)
        except StepsNotAvailable as error:
            raise StepsPending(str(error), error.retry_after) from None
        return [step for step in steps if step["priority"] >= min_priority]

    def set_traits(self, node_id: int, traits: list[str]) -> None:
        with self._locked(node_id) as task:
            task.write(node_db.set_traits, node_id, traits)

    def add_trait(self, node_id: int, trait: str) -> None:
        with self._locked(node_id) as task:
            task.write(node_db.add_trait, node_id, trait)

    def remove_trait(self, node_id: int, trait: str) -> bool:
        with self._locked(node_id) as task:
            return bool(task.write(node_db.remove_trait, node_id, trait))

    def set_maintenance(self, node_id: int, maintenance: bool, reason: str | None = None) -> None:
        with self._locked(node_id) as task:
            values: dict[str, Any] = {"maintenance": maintenance, "maintenance_reason": reason if maintenance else None}
            if not maintenance:
                values["fault"] = None
            task.update(**values)

    def get_boot_device(self, node_id: int) -> dict[str, Any]:
        with self._locked(node_id) as task:
            return dict(task.driver.management.get_boot_device(task))

    def get_supported_boot_devices(self, node_id: int) -> list[str]:
        task = Task(self, node_id, shared=True).acquire()
        return list(task.driver.management.get_supported_boot_devices(task))

    def set_boot_device(self, node_id: int, device: str, persistent: bool = False) -> None:
        with self._locked(node_id) as task:
            management = task.driver.management
            supported = management.get_supported_boot_devices(task)
            if device not in supported:
                raise BadRequest(
                    f"Invalid boot device {device} specified. Supported devices: {', '.join(supported)}"
                )
            management.set_boot_device(task, device, persistent=persistent)

    def inject_nmi(self, node_id: int) -> None:
        with self._locked(node_id) as task:
            task.driver.management.inject_nmi(task)

    def validate_driver_interfaces(self, node_id: int) -> dict[str, Any]:
        task = Task(self, node_id, shared=True).acquire()
        result: dict[str, Any] = {}
        for interface_type, interface in sorted(task.driver.interfaces.items()):
            try:
                interface.validate(task)
                result[interface_type] = {"result": True}
            except Exception as error:  # noqa: BLE001 - reported per interface
                result[interface_type] = {"result": False, "reason": str(error)}
        return result

    def set_console_mode(self, node_id: int, enabled: bool) -> None:
        with self._locked(node_id) as task:
            console = task.driver.console
            if not hasattr(console, "start_console"):
                raise BadRequest(
                    f"Driver {task.node['driver']} does not support console (disabled or not implemented)."
                )
            (console.start_console if enabled else console.stop_console)(task)
            task.update(console_enabled=enabled)

    def get_console_information(self, node_id: int) -> dict[str, Any]:
        task = Task(self, node_id, shared=True).acquire()
        console = task.driver.console
        if not hasattr(console, "get_console"):
            raise BadRequest(
                f"Driver {task.node['driver']} does not support console (disabled or not implemented)."
            )
        info = console.get_console(task) if task.node["console_enabled"] else None
        return {"console_enabled": bool(task.node["console_enabled"]), "console_info": info}

    def set_target_raid_config(self, node_id: int, config: dict[str, Any]) -> None:
        with self._locked(node_id) as task:
            task.update(target_raid_config=config)

    # ------------------------------------------------------ periodic

    def poll_waiting_cleaning(self) -> int:
        """Nodes of this conductor in ``clean wait``: resume those whose step finished."""
        live = self.live_conductors()
        with self.db.read() as conn:
            waiting = node_db.list_nodes(conn, {"provision_state": states.CLEANWAIT})
        moved = 0
        for node in waiting:
            if not self.owns(node, live) or node["reservation"]:
                continue
            if not self._clean_wait_over(node["id"]):
                continue  # nothing to do yet: the lock stays free for an abort
            try:
                task = self._locked(node["id"])
            except (Conflict, ApiError):
                continue  # someone else is working on it; next round
            if task.node["provision_state"] != states.CLEANWAIT:
                task.release()
                continue
            if _timed_out(task, self.conf.conductor.clean_callback_timeout):
                step = task.node["clean_step"] or {}
                cleaning.fail(
                    task,
                    "Timeout reached while cleaning the node. Please check if the ramdisk responsible for "
                    f"the cleaning is running on the node. Failed on step {step}.",
                )
                task.release()
                moved += 1
                continue
            try:
                self.spawn(task, _poll_one)
            except NoFreeConductorWorker:
                task.release()
                break
            moved += 1
        return moved

    def _clean_wait_over(self, node_id: int) -> bool:
        """Whether a node in ``clean wait`` timed out or its step finished, seen without its lock."""
        try:
            task = Task(self, node_id, shared=True).acquire()
        except (Conflict, ApiError):
            return False
        except Exception:  # noqa: BLE001 - the locked poll records what is wrong
            return True
        if task.node["provision_state"] != states.CLEANWAIT:
            return False
        if _timed_out(task, self.conf.conductor.clean_callback_timeout):
            return True
        step = task.node["clean_step"] or {}
        if not step:
            return True
        try:
            return bool(getattr(task.driver, step["interface"]).poll_step(task, step))
        except Exception:  # noqa: BLE001 - the locked poll records the failure
            return True

    def sync_power_states(self) -> int:
        """Record the hardware's power state for this conductor's idle nodes."""
        live = self.live_conductors()
        with self.db.read() as conn:
            candidates = node_db.list_nodes(conn, {"reservation": None, "maintenance": False})
        changed = 0
        for node in candidates:
            if not self.owns(node, live) or node["provision_state"] in states.WORKING_STATES:
                continue
            try:
                with self._locked(node["id"]) as task:
                    actual = task.driver.power.get_power_state(task)
                    if actual is not None and actual != task.node["power_state"]:
                        LOG.info("node %s power state is %s, recorded %s", node["uuid"], actual,
                                 task.node["power_state"])
                        task.update(power_state=actual)
                        changed += 1
            except Exception as error:  # noqa: BLE001 - next node, next round
                LOG.debug("power sync of node %s skipped: %s", node["uuid"], error)
        return changed

    def report_metrics(self) -> None:
        """Count the nodes by provision state, and the live conductors, for the metrics."""
        with self.db.read() as conn:
            by_state = node_db.count_by_provision_state(conn)
            alive = conductor_db.alive(conn, self.conf.conductor.heartbeat_timeout)
        metrics.report_nodes(by_state, states.STABLE_STATES, len(alive))

    def recover_orphans(self) -> int:
        """Locks held by conductors that stopped heartbeating: take over this conductor's share."""
        live = self.live_conductors()
        live_hosts = {conductor["hostname"] for conductor in live}
        with self.db.read() as conn:
            held = {
                node["reservation"]
                for node in node_db.list_nodes(conn, {})
                if node["reservation"] and node["reservation"] not in live_hosts and self.owns(node, live)
            }
        return self.recover_nodes_of(sorted(held))


def _validate_rescue(task: Task, rescue_password: str) -> None:
    """The power and rescue interfaces must be able to rescue the node with this password: else 400, nothing
    changed (the password is only seen by the validation, not stored)."""
    node = task.node
    if task.driver.rescue.name == "no-rescue":
        reason = f"Driver {node['driver']} does not support rescue (disabled or not implemented)."
    else:
        reason = None
        task.node = {**node, "instance_info": {**(node["instance_info"] or {}), "rescue_password": rescue_password}}
        try:
            task.driver.power.validate(task)
            task.driver.rescue.validate(task)
        except DriverError as error:
            reason = str(error)
        finally:
            task.node = node
    if reason is not None:
        raise BadRequest(f"Failed to rescue instance {node['instance_uuid']} for node {node['uuid']}: {reason}")


def _poll_one(task: Task) -> None:
    if task.node["provision_state"] == states.CLEANWAIT:
        cleaning.poll_waiting(task)


def _timed_out(task: Task, timeout: int) -> bool:
    if timeout <= 0 or task.node["provision_updated_at"] is None:
        return False
    elapsed = (node_db.utcnow() - task.node["provision_updated_at"]).total_seconds()
    return elapsed > timeout


def _takeover_event(host: str, holder: str, state: str, now: str) -> str:
    """The history entry of a node taken over from a conductor presumed dead."""
    if holder == host:
        event = f"Conductor {host} restarted while it held the node's lock and took the node back"
    else:
        event = f"Conductor {host} took over the node from conductor {holder}, which stopped heartbeating"
    if now != state:
        return f"{event}; its {state} operation was interrupted and the node moved to {now}."
    return f"{event}; the node stays in {state}."


def _record_unexpected(task: Task) -> None:
    if task.lost:
        return  # nothing of this conductor's is to be written on the node any more
    try:
        state = task.node["provision_state"]
        failed = states.INTERRUPTED.get(state)
        if failed is not None:
            provisioning.fail_interrupted(task, task.conductor.host)
    except Exception:  # noqa: BLE001 - nothing more to do
        LOG.exception("could not record the failure on node %s", task.node["uuid"])


def _duplicate(values: Mapping[str, Any]) -> Conflict:
    if values.get("name"):
        return Conflict(f"A node with name {values['name']} already exists.")
    if values.get("instance_uuid"):
        return Conflict(f"Instance {values['instance_uuid']} is already associated with a node.")
    return Conflict("A node with the same identity already exists.")


def owner_of(node: Mapping[str, Any], live: Sequence[Mapping[str, Any]]) -> str | None:
    """The live conductor a node maps to: same group, supports its driver, by hash ring."""
    group = node.get("conductor_group") or ""
    hosts = [
        conductor["hostname"]
        for conductor in live
        if (conductor["conductor_group"] or "") == group and node["driver"] in conductor["drivers"]
    ]
    return ring_for(hosts).owner(node["uuid"])
