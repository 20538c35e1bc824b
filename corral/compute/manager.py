"""The compute service of one host, driving a virt driver (corral.compute.virt).

It registers its service and one compute node per node of its driver,
reports each node to Placement (the driver's inventories and traits),
maps its host to the cell, and then, every ``[compute] poll_interval``
seconds:

* spawns the servers the scheduler put on this host (``building`` ->
  ``active``, or ``error`` with a fault when the driver fails);
* carries out the tasks the API left for this host's servers (stop,
  start, reboot, rebuild, rescue, unrescue, snapshot), recording task
  states as upstream's manager does, an instance-action event for each,
  and a fault when the driver fails;
* every ``[DEFAULT] sync_power_state_interval`` seconds compares each
  idle server's power state with the driver's and, as upstream's
  ``_sync_power_states``, stops a server whose guest went off behind
  Compute's back (and one that runs while it should be stopped);
* destroys the guests of servers deleted through the API (upstream's
  ``running_deleted_instance_action = reap``);
* reclaims soft-deleted servers older than ``[compute]
  reclaim_instance_interval``;
* heartbeats every ``[compute] report_interval`` seconds.

Work on a server may take long (a bare metal deploy): in the background
each server's work runs on a thread of its own (at most ``[DEFAULT]
max_concurrent_builds``); :meth:`ComputeManager.run_once` called directly
(tests, tools) does everything before it returns. A failing pass is
logged and the next one tries again; nothing here raises into the caller.
"""

from __future__ import annotations

import datetime
import logging
import threading
import time
import traceback
import uuid as uuidlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from oslo_config import cfg

from corral.core.context import new_request_id
from corral.core.db import Database
from corral.compute.cells import CellMapping
from corral.compute.db import api_queries as q
from corral.compute.db import cell_queries as cq
from corral.compute.db import server_records as records
from corral.compute.domain import states
from corral.compute.domain.cell_admin import map_host
from corral.compute.domain.scheduling import COMPUTE_BINARY
from corral.compute.domain.server_groups import forget_host
from corral.compute.reschedule import building_on, reschedule, retry_info
from corral.compute.scheduler import ComputeNodeReport, SchedulerClient
from corral.compute.virt.driver import BuildAbortException, ComputeDriver, InstanceNotFound, load_driver
from corral.compute.virt.fake import FAKE_CPU_INFO, FAKE_HYPERVISOR_VERSION, FAKE_TRAITS, FakeDriver

__all__ = ["FAKE_CPU_INFO", "FAKE_HYPERVISOR_VERSION", "FAKE_TRAITS", "ComputeManager"]

LOG = logging.getLogger(__name__)


def fault_message(error: BaseException) -> str:
    """What a fault says of an exception: its message when it has one to show, else its class (upstream)."""
    format_message = getattr(error, "format_message", None)
    if callable(format_message):
        return str(format_message())
    return type(error).__name__


def _details(error: BaseException) -> str:
    return "".join(traceback.format_exception(type(error), error, error.__traceback__))


class ComputeManager:
    def __init__(
        self,
        conf: cfg.ConfigOpts,
        host: str,
        cell_db: Database,
        scheduler: SchedulerClient,
        *,
        api_db: Database | None = None,
        cell: CellMapping | None = None,
        nodename: str | None = None,
        traits: frozenset[str] = frozenset(),
        driver: ComputeDriver | None = None,
        images: Any = None,
    ) -> None:
        self.conf = conf
        self.host = host
        self.cell_db = cell_db
        self.scheduler = scheduler
        self.api_db = api_db
        self.cell = cell
        # Added to the traits the driver reports for each node.
        self.traits = traits
        self.driver = driver if driver is not None else load_driver(conf, conf.compute_driver or "fake.FakeDriver")
        if nodename is not None and isinstance(self.driver, FakeDriver):
            self.driver.nodenames = [nodename]
        self.driver.init_host(host)
        self.driver.set_instance_filter(self._own_instances)
        # corral.compute.glance.GlanceClient, for snapshots' images (made when first needed).
        self._images = images
        self.service: dict[str, Any] | None = None
        self.nodes: dict[str, dict[str, Any]] = {}
        self._reported: set[str] = set()
        # nodename -> (inventories, traits) as last reported to Placement.
        self._report_contents: dict[str, Any] = {}
        self._last_heartbeat = 0.0
        self._last_resources = time.monotonic()
        self._last_sync = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._executor: ThreadPoolExecutor | None = None
        # Servers some work is under way for (not given a second one meanwhile).
        self._busy: set[str] = set()
        self._busy_lock = threading.Lock()

    @property
    def node(self) -> dict[str, Any] | None:
        """The first node (drivers with one node have only that one)."""
        return next(iter(self.nodes.values()), None)

    # ------------------------------------------------------------ lifecycle

    def start(self) -> ComputeManager:
        # Placement may be served by this very process, which is not
        # answering yet: the first background pass reports the nodes.
        self.register(report=False)
        self._executor = ThreadPoolExecutor(self.conf.max_concurrent_builds, thread_name_prefix=f"compute-{self.host}")
        self._thread = threading.Thread(target=self._loop, name=f"compute-{self.host}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)

    def register(self, report: bool = True) -> None:
        self.service = self.cell_db.write(cq.register_service, self.host, COMPUTE_BINARY, "compute")
        self._last_heartbeat = time.monotonic()
        try:
            nodenames = self.driver.get_available_nodes(refresh=True)
        except Exception as error:  # noqa: BLE001 - a Bare Metal API not answering yet: the first pass retries
            LOG.warning("the nodes of %s could not be listed yet: %s", self.host, error)
            nodenames = []
            self._last_resources = 0.0
        for nodename in nodenames:
            self._add_node(nodename)
        if self.api_db is not None and self.cell is not None and self.conf.compute.auto_map_hosts:
            map_host(self.api_db, self.cell, self.host)
        if report:
            self._reported.clear()
            self._report()

    def _add_node(self, nodename: str) -> None:
        """Record one of the driver's nodes as a compute node of this host.

        A node with a UUID of its own (bare metal) that another host's
        service managed moves here (the other service stopped, or came
        back): the same compute node and Placement provider, reported
        again from here. Servers keep their host, as upstream's.
        """
        resources = self.driver.node_resources(nodename)
        values = self._node_values(nodename, resources, resources.extra.get("uuid"))
        self.nodes[nodename] = self.cell_db.write(cq.upsert_compute_node, values)
        self._reported.discard(nodename)

    def _node_values(self, nodename: str, resources: Any, fixed_uuid: str | None) -> dict[str, Any]:
        return {
            # Bare metal nodes keep their own UUID as the compute node's (and provider's).
            "uuid": fixed_uuid or str(uuidlib.uuid4()),
            "host": self.host,
            "hypervisor_hostname": nodename,
            "hypervisor_type": resources.hypervisor_type,
            "hypervisor_version": resources.hypervisor_version,
            "host_ip": self.conf.my_ip,
            "cpu_info": resources.cpu_info,
            "vcpus": resources.vcpus,
            "memory_mb": resources.memory_mb,
            "local_gb": resources.local_gb,
            "cpu_allocation_ratio": 1.0,
            "ram_allocation_ratio": 1.0,
            "disk_allocation_ratio": 1.0,
        }

    def _report(self, changed_only: bool = False) -> None:
        """Report the nodes not reported yet (and, with ``changed_only``, those whose resources changed)."""
        for nodename in list(self.nodes):
            if nodename in self._reported and not changed_only:
                continue
            self._report_node(nodename)

    def _report_node(self, nodename: str, force: bool = False) -> None:
        """Report the node when its resources changed since the last report (always with ``force``)."""
        node = self.nodes.get(nodename)
        if node is None:
            return
        try:
            resources = self.driver.node_resources(nodename)
            contents = (resources.inventories, resources.traits | self.traits)
            if not force and nodename in self._reported and self._report_contents.get(nodename) == contents:
                return
            self.scheduler.report_compute_node(ComputeNodeReport(
                self.host, nodename, node["uuid"], resources.inventories, resources.traits | self.traits
            ))
            self._reported.add(nodename)
            self._report_contents[nodename] = contents
        except Exception as error:  # retried on the next pass
            LOG.warning("compute node %s not reported to Placement yet: %s", nodename, error)

    def update_available_resource(self) -> None:
        """Upstream's periodic resource update: new nodes become compute nodes; changed ones are reported."""
        try:
            self.driver.set_live_peers(self._live_compute_hosts())
            nodenames = self.driver.get_available_nodes(refresh=True)
        except Exception as error:  # noqa: BLE001 - tried again next time
            LOG.warning("the nodes of %s could not be listed: %s", self.host, error)
            return
        try:
            with self.cell_db.read() as conn:
                recorded = {node["hypervisor_hostname"] for node in cq.compute_nodes(conn, host=self.host)}
        except Exception as error:  # noqa: BLE001 - tried again next time
            LOG.warning("the compute nodes of %s could not be read: %s", self.host, error)
            return
        for nodename in nodenames:
            # A node another host took over while this one was away is recorded there: moved back.
            if nodename not in self.nodes or nodename not in recorded:
                try:
                    self._add_node(nodename)
                except Exception as error:  # noqa: BLE001 - tried again next time
                    LOG.warning("node %s not added to %s: %s", nodename, self.host, error)
        for gone in set(self.nodes) - set(nodenames):
            # Its compute node row stays (another host may take it over, or the node come back).
            LOG.info("node %s is no longer one of %s's", gone, self.host)
            self.nodes.pop(gone, None)
            self._reported.discard(gone)
            self._report_contents.pop(gone, None)
        self._report(changed_only=True)

    def _own_instances(self, uuids: list[str]) -> set[str]:
        """Those of the servers named that are this host's (deleted ones too: this host reaps them)."""
        with self.cell_db.read() as conn:
            return cq.host_instance_uuids(conn, self.host, uuids)

    def _live_compute_hosts(self) -> list[str]:
        """The hosts of this cell's compute services that are up (heartbeat within service_down_time)."""
        with self.cell_db.read() as conn:
            services = cq.list_services(conn, binary=COMPUTE_BINARY)
        now = q.utcnow()
        live = []
        for service in services:
            seen = service.get("last_seen_up") or service.get("updated_at") or service.get("created_at")
            if service.get("forced_down") or seen is None:
                continue
            if (now - seen).total_seconds() <= self.conf.compute.service_down_time:
                live.append(service["host"])
        return live

    # --------------------------------------------------------------- passes

    def _loop(self) -> None:
        while not self._stop.wait(self.conf.compute.poll_interval):
            try:
                self.run_once()
            except Exception:
                LOG.exception("compute pass on %s failed", self.host)

    def run_once(self) -> None:
        now = time.monotonic()
        if now - self._last_heartbeat >= self.conf.compute.report_interval:
            assert self.service is not None
            self.cell_db.write(cq.heartbeat, self.service["id"])
            self._last_heartbeat = now
        if now - self._last_resources >= self.conf.update_resources_interval:
            self._last_resources = now
            self.update_available_resource()
        elif len(self._reported) < len(self.nodes):
            self._report()
        self._spawn_new()
        interval = self.conf.sync_power_state_interval
        if interval >= 0 and now - self._last_sync >= interval:
            self._last_sync = now
            self.sync_power_states()
        self._run_tasks()
        self._reap_deleted()
        self._reclaim()

    def _submit(self, instance_uuid: str, work: Callable[[], None]) -> None:
        """Run ``work`` for one server: on its own thread in the background, at once otherwise."""
        with self._busy_lock:
            if instance_uuid in self._busy:
                return
            self._busy.add(instance_uuid)

        def run() -> None:
            try:
                work()
            except Exception:
                LOG.exception("work on server %s failed", instance_uuid)
            finally:
                with self._busy_lock:
                    self._busy.discard(instance_uuid)

        if self._executor is None:
            run()
        else:
            self._executor.submit(run)

    # ------------------------------------------------------------- helpers

    def _event(self, instance_uuid: str, request_id: str | None, action: str | None, event: str,
               work: Callable[[], None]) -> None:
        """Run ``work`` as the event ``event`` of the instance action (found by request id, or its latest ``action``)."""

        def start(conn: Any) -> tuple[int, int] | None:
            found = (records.get_action(conn, instance_uuid, request_id) if request_id
                     else records.latest_action(conn, instance_uuid, action or ""))
            if found is None:
                return None
            return found["id"], records.start_event(conn, found["id"], event, self.host)

        started = self.cell_db.write(start)
        try:
            work()
        except BaseException as error:
            if started is not None:
                self.cell_db.write(records.finish_event, started[0], started[1], "Error", _details(error))
            raise
        if started is not None:
            self.cell_db.write(records.finish_event, started[0], started[1], "Success", None)

    def _fault(self, instance_uuid: str, error: BaseException) -> None:
        code = getattr(error, "code", 500)
        self.cell_db.write(records.add_fault, instance_uuid, code if isinstance(code, int) else 500,
                           fault_message(error), _details(error), self.host)

    def _update(self, instance_uuid: str, expected: dict[str, Any] | None, **values: Any) -> bool:
        return bool(self.cell_db.write(cq.update_instance, instance_uuid, expected, **values))

    def _power_state(self, instance: dict[str, Any]) -> int:
        try:
            return self.driver.get_info(instance).state
        except InstanceNotFound:
            return states.NOSTATE

    # --------------------------------------------------------------- builds

    def _spawn_new(self) -> None:
        with self.cell_db.read() as conn:
            instances = [i for i in cq.host_instances(conn, self.host)
                         if i["vm_state"] == states.BUILDING and i["task_state"] == states.SPAWNING]
        for instance in instances:
            self._submit(instance["uuid"], lambda instance=instance: self._build_if_spawning(instance))

    def _build_if_spawning(self, instance: dict[str, Any]) -> None:
        """Build the server if it is still to be built here, as read now, not when the pass listed it.

        A build leaves the busy set only once its server is ACTIVE or ERROR,
        but the listing may predate that: a second build of an ACTIVE server
        would deploy its node again (upstream Ironic accepts the same
        instance_uuid twice, then refuses the deploy and the cleanup
        undeploys the running server's node).
        """
        with self.cell_db.read() as conn:
            current = cq.get_instance(conn, instance["uuid"])
        if (current is not None and current["host"] == self.host and current["vm_state"] == states.BUILDING
                and current["task_state"] == states.SPAWNING):
            self._build(current)

    def _with_metadata(self, instance: dict[str, Any]) -> dict[str, Any]:
        """The instance with its metadata (what a config drive carries as ``meta``)."""
        with self.cell_db.read() as conn:
            metadata = cq.instance_metadata(conn, [instance["uuid"]]).get(instance["uuid"], {})
        return {**instance, "metadata": metadata}

    def _build(self, instance: dict[str, Any]) -> None:
        uuid = instance["uuid"]

        def spawn() -> None:
            try:
                self.driver.spawn(
                    self._with_metadata(instance), self._image(instance.get("image_ref")), injected_files=[],
                    admin_password=None, network_info=[], block_device_info=None,
                    user_data=instance.get("user_data"), config_drive=bool(instance.get("config_drive")),
                )
            except Exception as error:
                self._build_failed(instance, error)
                # The event ends in Error with the traceback: the only record of a rescheduled attempt.
                raise
            finally:
                self._report_node(instance.get("node") or "")

        try:
            self._event(uuid, None, "create", "compute__do_build_and_run_instance", spawn)
        except Exception as error:
            LOG.warning("server %s failed to spawn: %s", uuid, error)
            return
        # Not if deleted or being deleted meanwhile (a node taken over by another host keeps its build).
        building = {"vm_state": states.BUILDING, "task_state": states.SPAWNING, "deleted": False}
        changed = self._update(
            uuid, building, vm_state=states.ACTIVE, task_state=None,
            power_state=self._power_state(instance), launched_at=q.utcnow(), build_alternates=None,
        )
        if not changed:
            with self.cell_db.read() as conn:
                current = cq.get_instance(conn, uuid, read_deleted=True)
            # Deleted while it was being spawned (a delete the host carries out destroys it itself).
            if current is None or current["deleted"]:
                self.driver.destroy(instance, [])

    def _build_failed(self, instance: dict[str, Any], error: Exception) -> None:
        """Upstream's _do_build_and_run_instance after a failure: reschedule, or ERROR when it may not."""
        uuid = instance["uuid"]
        retry = retry_info(instance)
        if retry is None or isinstance(error, BuildAbortException):
            # Not rescheduled: the server's fault is the build's own error.
            if self._update(uuid, building_on(self.host, instance), vm_state=states.ERROR, task_state=None,
                            power_state=self._power_state(instance), host=None, node=None, build_alternates=None):
                self._fault(uuid, error)
            self._release(uuid)
            if self.api_db is not None:
                forget_host(self.api_db, uuid)
            return
        try:
            # Upstream's cleanup of the failed host before the reschedule (the ironic driver
            # has undeployed and freed the node already: then this finds nothing to do).
            self.driver.destroy(instance, [])
        except Exception as cleanup_error:  # noqa: BLE001 - the build's own error is what matters
            LOG.warning("server %s: cleanup after the failed build failed: %s", uuid, cleanup_error)
        # The allocation on the failed node goes before an alternate is claimed (one left
        # behind makes every claim fail: the build then ends in ERROR).
        self._release(uuid)
        reschedule(self.scheduler, self.cell_db, self.api_db, self.host, instance, retry)

    def _image(self, image_id: str | None) -> dict[str, Any]:
        """The Image service's record of the image (for its checksums and properties), or just its id."""
        image: dict[str, Any] = {"id": image_id or ""}
        if not image_id or self.driver.hypervisor_type == "fake":
            return image
        try:
            from corral.compute.glance import Credentials

            found = self._glance().show(image_id, Credentials(token=None))
        except Exception as error:  # noqa: BLE001 - the deploy finds the image itself
            LOG.info("image %s not looked up: %s", image_id, error)
            return image
        properties = {key: value for key, value in found.items() if isinstance(value, (str, list))}
        return {**properties, "id": image_id}

    def _glance(self) -> Any:
        if self._images is None:
            from corral.compute.glance import GlanceClient

            self._images = GlanceClient(self.conf)
        return self._images

    def _release(self, instance_uuid: str) -> None:
        try:
            self.scheduler.release(instance_uuid)
        except Exception as error:  # noqa: BLE001 - the API releases it again on delete
            LOG.warning("the allocation of %s was not released: %s", instance_uuid, error)

    # ---------------------------------------------------------------- tasks

    def _run_tasks(self) -> None:
        with self.cell_db.read() as conn:
            tasks = records.host_tasks(conn, self.host)
        for task in tasks:
            self._submit(task["instance_uuid"], lambda task=task: self._run_task(task))

    def _claim(self, task: dict[str, Any], expected: str, **values: Any) -> dict[str, Any] | None:
        """Take the task off the queue and move the server on from ``expected``; None when it moved on already."""
        uuid = task["instance_uuid"]

        def work(conn: Any) -> dict[str, Any] | None:
            records.take_task(conn, uuid, task["request_id"])
            if not cq.update_instance(conn, uuid, {"task_state": expected, "deleted": False}, **values):
                return None
            return cq.get_instance(conn, uuid)

        return self.cell_db.write(work)  # type: ignore[no-any-return]

    def _run_task(self, task: dict[str, Any]) -> None:
        handler = {
            "stop": self._stop_instance, "start": self._start_instance, "reboot": self._reboot_instance,
            "rebuild": self._rebuild_instance, "rescue": self._rescue_instance,
            "unrescue": self._unrescue_instance, "snapshot": self._snapshot_instance,
            "delete": self._delete_instance,
        }.get(task["task"])
        if handler is None:
            LOG.warning("unknown task %s for server %s dropped", task["task"], task["instance_uuid"])
            self.cell_db.write(records.take_task, task["instance_uuid"], task["request_id"])
            return
        try:
            handler(task)
        except Exception as error:
            LOG.warning("%s of server %s failed: %s", task["task"], task["instance_uuid"], fault_message(error))

    def _revert_on_error(self, uuid: str, task_state: str | None, work: Callable[[], None],
                         on_error: Callable[[BaseException], dict[str, Any]] | None = None) -> None:
        """Upstream's wrap_instance_fault and reverts_task_state: a fault, and the task state back to None."""
        try:
            work()
        except Exception as error:
            self._fault(uuid, error)
            values = {"task_state": None, **(on_error(error) if on_error else {})}
            self._update(uuid, {"task_state": task_state} if task_state else None, **values)
            raise

    def _stop_instance(self, task: dict[str, Any]) -> None:
        instance = self._claim(task, states.POWERING_OFF)
        if instance is None:
            return
        uuid = instance["uuid"]
        timeout = int(task["params"].get("timeout", self.conf.shutdown_timeout))

        def work() -> None:
            self.driver.power_off(instance, timeout, 1)
            self._update(uuid, {"task_state": states.POWERING_OFF}, vm_state=states.STOPPED, task_state=None,
                         power_state=self._power_state(instance))

        self._event(uuid, task["request_id"], None, "compute_stop_instance",
                    lambda: self._revert_on_error(uuid, states.POWERING_OFF, work))

    def _start_instance(self, task: dict[str, Any]) -> None:
        instance = self._claim(task, states.POWERING_ON)
        if instance is None:
            return
        uuid = instance["uuid"]

        def work() -> None:
            self.driver.power_on(instance, [])
            self._update(uuid, {"task_state": states.POWERING_ON}, vm_state=states.ACTIVE, task_state=None,
                         power_state=self._power_state(instance))

        self._event(uuid, task["request_id"], None, "compute_start_instance",
                    lambda: self._revert_on_error(uuid, states.POWERING_ON, work))

    def _reboot_instance(self, task: dict[str, Any]) -> None:
        reboot_type = task["params"].get("type", "SOFT")
        hard = reboot_type == "HARD"
        pending, started = ((states.REBOOT_PENDING_HARD, states.REBOOT_STARTED_HARD) if hard
                            else (states.REBOOT_PENDING, states.REBOOT_STARTED))
        instance = self._claim(task, states.REBOOTING_HARD if hard else states.REBOOTING, task_state=pending)
        if instance is None:
            return
        uuid = instance["uuid"]

        def work() -> None:
            self._update(uuid, {"task_state": pending}, task_state=started)
            try:
                self.driver.reboot(instance, [], reboot_type)
            except Exception as error:
                power = self._power_state(instance)
                self._fault(uuid, error)
                if power == states.RUNNING:
                    # Upstream: a guest still running is not put in ERROR, and the error is not raised.
                    LOG.warning("reboot of %s failed but the guest is running: %s", uuid, error)
                    self._update(uuid, None, vm_state=states.ACTIVE, task_state=None, power_state=power)
                    return
                self._update(uuid, None, vm_state=states.ERROR, task_state=None, power_state=power)
                raise
            self._update(uuid, {"task_state": started}, vm_state=states.ACTIVE, task_state=None,
                         power_state=self._power_state(instance))

        self._event(uuid, task["request_id"], None, "compute_reboot_instance", work)

    def _rebuild_instance(self, task: dict[str, Any]) -> None:
        params = task["params"]
        instance = self._claim(task, states.REBUILDING, task_state=states.REBUILD_BLOCK_DEVICE_MAPPING)
        if instance is None:
            return
        uuid = instance["uuid"]
        original_vm_state = params.get("original_vm_state", states.ACTIVE)
        image = self._image(instance.get("image_ref"))
        instance = self._with_metadata(instance)

        def work() -> None:
            try:
                self._update(uuid, {"task_state": states.REBUILD_BLOCK_DEVICE_MAPPING},
                             task_state=states.REBUILD_SPAWNING)
                arguments: dict[str, Any] = {
                    "injected_files": [], "admin_password": params.get("admin_password"), "network_info": [],
                    "block_device_info": None, "user_data": instance.get("user_data"),
                    "config_drive": bool(instance.get("config_drive")),
                }
                try:
                    self.driver.rebuild(instance, image, preserve_ephemeral=bool(params.get("preserve_ephemeral")),
                                        **arguments)
                except NotImplementedError:
                    # Upstream's _rebuild_default_impl.
                    self.driver.destroy(instance, [])
                    self.driver.spawn(instance, image, **arguments)
                if original_vm_state == states.STOPPED:
                    # Upstream leaves a stopped server stopped.
                    self.driver.power_off(instance, 0, 0)
            except Exception as error:
                self._fault(uuid, error)
                self._update(uuid, None, vm_state=states.ERROR, task_state=None,
                             power_state=self._power_state(instance))
                raise
            self._update(uuid, {"task_state": states.REBUILD_SPAWNING},
                         vm_state=states.STOPPED if original_vm_state == states.STOPPED else states.ACTIVE,
                         task_state=None, power_state=self._power_state(instance), launched_at=q.utcnow())

        self._event(uuid, task["request_id"], None, "compute_rebuild_instance", work)

    def _rescue_instance(self, task: dict[str, Any]) -> None:
        params = task["params"]
        instance = self._claim(task, states.RESCUING)
        if instance is None:
            return
        uuid = instance["uuid"]
        image = {"id": params.get("rescue_image_ref") or instance.get("image_ref") or ""}

        def work() -> None:
            try:
                self.driver.rescue(instance, [], image, params.get("rescue_password"))
            except Exception as error:
                # Upstream: ERROR, and InstanceNotRescuable naming the driver's error.
                self._fault(uuid, _NotRescuable(uuid, fault_message(error)))
                self._update(uuid, None, vm_state=states.ERROR, task_state=None,
                             power_state=self._power_state(instance))
                raise
            self._update(uuid, {"task_state": states.RESCUING}, vm_state=states.RESCUED, task_state=None,
                         power_state=self._power_state(instance))

        self._event(uuid, task["request_id"], None, "compute_rescue_instance", work)

    def _unrescue_instance(self, task: dict[str, Any]) -> None:
        instance = self._claim(task, states.UNRESCUING)
        if instance is None:
            return
        uuid = instance["uuid"]

        def work() -> None:
            self.driver.unrescue(instance, [])
            self._update(uuid, {"task_state": states.UNRESCUING}, vm_state=states.ACTIVE, task_state=None,
                         power_state=self._power_state(instance))

        self._event(uuid, task["request_id"], None, "compute_unrescue_instance",
                    lambda: self._revert_on_error(uuid, states.UNRESCUING, work))

    def _snapshot_instance(self, task: dict[str, Any]) -> None:
        image_id = task["params"]["image_id"]
        instance = self._claim(task, states.IMAGE_SNAPSHOT_PENDING, task_state=states.IMAGE_SNAPSHOT)
        if instance is None:
            self._delete_image(image_id)
            return
        uuid = instance["uuid"]

        def update_task_state(task_state: str, expected_state: str | None = states.IMAGE_SNAPSHOT) -> None:
            self._update(uuid, {"task_state": expected_state}, task_state=task_state)

        def work() -> None:
            try:
                self.driver.snapshot(instance, image_id, update_task_state)
            except BaseException:
                # Upstream's delete_image_on_error.
                self._delete_image(image_id)
                raise
            self._update(uuid, None, task_state=None)

        self._event(uuid, task["request_id"], None, "compute_snapshot_instance",
                    lambda: self._revert_on_error(uuid, None, work))

    def _delete_image(self, image_id: str) -> None:
        try:
            self._glance().delete(image_id)
        except Exception as error:
            LOG.warning("could not delete the image %s of a failed snapshot: %s", image_id, error)

    # ---------------------------------------------------------- power sync

    def sync_power_states(self) -> None:
        """Upstream's _sync_power_states: the driver's power state wins; a guest off behind our back is stopped."""
        with self.cell_db.read() as conn:
            instances = [i for i in cq.host_instances(conn, self.host) if i["task_state"] is None]
        for instance in instances:
            with self._busy_lock:
                if instance["uuid"] in self._busy:
                    continue
            try:
                self._sync_one(instance)
            except Exception:
                LOG.exception("power state of %s not synchronised", instance["uuid"])

    def _sync_one(self, instance: dict[str, Any]) -> None:
        uuid = instance["uuid"]
        vm_state = instance["vm_state"]
        power = self._power_state(instance)
        if vm_state in (states.BUILDING, states.SOFT_DELETED, states.DELETED):
            return
        expected = {"vm_state": vm_state, "task_state": None}
        if power != instance["power_state"]:
            if not self._update(uuid, expected, power_state=power):
                return
        stop = (vm_state == states.ACTIVE and power in (states.SHUTDOWN, states.CRASHED)) or (
            vm_state == states.STOPPED and power not in (states.NOSTATE, states.SHUTDOWN, states.CRASHED))
        if not stop:
            return
        LOG.warning("server %s: vm_state %s but power state %s; calling the stop API", uuid, vm_state, power)
        request_id = new_request_id()

        def force_stop(conn: Any) -> None:
            # Upstream's compute_api.force_stop, with an admin context (no user or project).
            if not cq.update_instance(conn, uuid, expected, task_state=states.POWERING_OFF, progress=0):
                return
            records.start_action(conn, uuid, "stop", request_id, None, None)
            records.add_task(conn, uuid, "stop", request_id, {"timeout": 0})

        self.cell_db.write(force_stop)

    # ------------------------------------------------------ deleted servers

    def _reap_deleted(self) -> None:
        try:
            guests = self.driver.list_instance_uuids()
        except NotImplementedError:
            return
        if not guests:
            return
        with self.cell_db.read() as conn:
            deleted = records.deleted_among(conn, guests)
        for instance in deleted:
            if instance.get("host") not in (None, self.host):
                continue
            self._submit(instance["uuid"], lambda instance=instance: self._terminate(instance))

    def _delete_instance(self, task: dict[str, Any]) -> None:
        """Upstream's terminate_instance: destroy, then free the claim and delete the server; ERROR on failure."""
        instance = self._claim(task, states.DELETING)
        if instance is None:
            return
        uuid = instance["uuid"]

        def work() -> None:
            try:
                self.driver.destroy(instance, [])
                # The node is back (cleaning or available): its claim goes, then the server.
                self.scheduler.release(uuid)
            except Exception as error:
                # The claim stays with the server, which may be deleted again.
                self._fault(uuid, error)
                self._update(uuid, {"task_state": states.DELETING}, vm_state=states.ERROR, task_state=None,
                             power_state=self._power_state(instance))
                raise
            now = q.utcnow()
            self._update(uuid, {"deleted": False}, deleted=True, deleted_at=now, terminated_at=now,
                         vm_state=states.DELETED, task_state=None, power_state=states.NOSTATE)
            if self.api_db is not None:
                forget_host(self.api_db, uuid)

        try:
            self._event(uuid, task["request_id"], None, "compute_terminate_instance", work)
        finally:
            self._report_node(instance.get("node") or "")

    def _terminate(self, instance: dict[str, Any]) -> None:
        """A guest left behind by a server deleted in the API (a local delete, or a driver whose guests go at once)."""
        node = instance.get("node") or ""
        # A bare metal node still carries the server until it is undeployed: reserved at once
        # (its claim was released by the API already).
        self._report_node(node, force=True)
        try:
            self._event(instance["uuid"], None, "delete", "compute_terminate_instance",
                        lambda: self.driver.destroy(instance, []))
        finally:
            self._report_node(node)

    def _reclaim(self) -> None:
        interval = self.conf.compute.reclaim_instance_interval
        if interval <= 0:
            return
        cutoff = q.utcnow() - datetime.timedelta(seconds=interval)
        with self.cell_db.read() as conn:
            expired = cq.soft_deleted_before(conn, self.host, cutoff)
        for instance in expired:
            now = q.utcnow()
            changed = self.cell_db.write(
                cq.update_instance, instance["uuid"], {"vm_state": states.SOFT_DELETED},
                deleted=True, deleted_at=now, terminated_at=now, vm_state=states.DELETED, task_state=None,
                power_state=states.NOSTATE,
            )
            if changed:
                self.driver.destroy(instance, [])
                self.scheduler.release(instance["uuid"])
                if self.api_db is not None:
                    # Its server group no longer counts it on this host.
                    forget_host(self.api_db, instance["uuid"])


class _NotRescuable(Exception):
    """Upstream's InstanceNotRescuable, as the fault of a failed rescue."""

    def __init__(self, instance_uuid: str, reason: str) -> None:
        super().__init__(f"Instance {instance_uuid} cannot be rescued: Driver Error: {reason}")

    def format_message(self) -> str:
        return str(self)
