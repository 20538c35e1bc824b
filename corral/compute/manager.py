"""The compute service of one host, with a fake virt driver.

It registers its service and compute node in its cell, reports the node
to Placement (inventories of VCPU, MEMORY_MB and DISK_GB), maps its host
to the cell, and then, every ``[compute] poll_interval`` seconds:

* spawns the instances the scheduler put on this host (``building`` ->
  ``active``),
* reclaims soft-deleted instances older than ``[compute]
  reclaim_instance_interval`` (deleted, resources released, no longer
  counted on this host by their server group),
* heartbeats every ``[compute] report_interval`` seconds.

A failing pass is logged and the next one tries again; nothing here
raises into the caller.
"""

from __future__ import annotations

import datetime
import json
import logging
import threading
import time
import uuid as uuidlib
from dataclasses import dataclass, field
from typing import Any

from oslo_config import cfg

from corral.core.db import Database
from corral.compute.cells import CellMapping
from corral.compute.db import api_queries as q
from corral.compute.db import cell_queries as cq
from corral.compute.domain import states
from corral.compute.domain.cell_admin import map_host
from corral.compute.domain.scheduling import COMPUTE_BINARY
from corral.compute.domain.server_groups import forget_host
from corral.compute.scheduler import ComputeNodeReport, SchedulerClient

LOG = logging.getLogger(__name__)

# The traits every fake host reports.
FAKE_TRAITS = frozenset({"COMPUTE_NODE"})
# What upstream's fake driver reports of its hypervisor ("1.0" as an integer, and its CPU).
FAKE_HYPERVISOR_VERSION = 1000
FAKE_CPU_INFO = json.dumps({
    "arch": "x86_64", "model": "Nehalem", "vendor": "Intel", "features": ["pge", "clflush"],
    "topology": {"cores": 1, "threads": 1, "sockets": 4},
})


@dataclass
class FakeDriver:
    """Pretends to run guests: remembers which instances are 'running'."""

    vcpus: int
    memory_mb: int
    local_gb: int
    spawn_delay: float = 0.0
    running: set[str] = field(default_factory=set)

    def spawn(self, instance: dict[str, Any]) -> None:
        if self.spawn_delay:
            time.sleep(self.spawn_delay)
        self.running.add(instance["uuid"])

    def destroy(self, instance_uuid: str) -> None:
        self.running.discard(instance_uuid)


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
        traits: frozenset[str] = FAKE_TRAITS,
    ) -> None:
        self.conf = conf
        self.host = host
        self.nodename = nodename or host
        self.cell_db = cell_db
        self.scheduler = scheduler
        self.api_db = api_db
        self.cell = cell
        self.traits = traits
        fake = conf.fake_driver
        self.driver = FakeDriver(fake.vcpus, fake.memory_mb, fake.local_gb, fake.spawn_delay)
        self.service: dict[str, Any] | None = None
        self.node: dict[str, Any] | None = None
        self._reported = False
        self._last_heartbeat = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------ lifecycle

    def start(self) -> ComputeManager:
        # Placement may be served by this very process, which is not
        # answering yet: the first background pass reports the node.
        self.register(report=False)
        self._thread = threading.Thread(target=self._loop, name=f"compute-{self.host}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def register(self, report: bool = True) -> None:
        self.service = self.cell_db.write(cq.register_service, self.host, COMPUTE_BINARY, "compute")
        self._last_heartbeat = time.monotonic()
        self.node = self.cell_db.write(cq.upsert_compute_node, {
            "uuid": str(uuidlib.uuid4()),
            "host": self.host,
            "hypervisor_hostname": self.nodename,
            "hypervisor_type": "fake",
            "hypervisor_version": FAKE_HYPERVISOR_VERSION,
            "host_ip": self.conf.my_ip,
            "cpu_info": FAKE_CPU_INFO,
            "vcpus": self.driver.vcpus,
            "memory_mb": self.driver.memory_mb,
            "local_gb": self.driver.local_gb,
            "cpu_allocation_ratio": 1.0,
            "ram_allocation_ratio": 1.0,
            "disk_allocation_ratio": 1.0,
        })
        if self.api_db is not None and self.cell is not None and self.conf.compute.auto_map_hosts:
            map_host(self.api_db, self.cell, self.host)
        if report:
            self._report()

    def _report(self) -> None:
        assert self.node is not None
        inventories = {
            rc: {"total": total, "reserved": 0, "min_unit": 1, "max_unit": total, "step_size": 1,
                 "allocation_ratio": 1.0}
            for rc, total in (("VCPU", self.driver.vcpus), ("MEMORY_MB", self.driver.memory_mb),
                              ("DISK_GB", self.driver.local_gb))
        }
        try:
            self.scheduler.report_compute_node(
                ComputeNodeReport(self.host, self.nodename, self.node["uuid"], inventories, self.traits)
            )
            self._reported = True
        except Exception as error:  # retried on the next pass
            LOG.warning("compute node %s not reported to Placement yet: %s", self.nodename, error)

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
        if not self._reported:
            self._report()
        self._spawn_new()
        self._reclaim()

    def _spawn_new(self) -> None:
        with self.cell_db.read() as conn:
            instances = [i for i in cq.host_instances(conn, self.host) if i["vm_state"] == states.BUILDING]
        for instance in instances:
            self.driver.spawn(instance)
            changed = self.cell_db.write(
                cq.update_instance, instance["uuid"], {"vm_state": states.BUILDING},
                vm_state=states.ACTIVE, task_state=None, power_state=states.RUNNING, launched_at=q.utcnow(),
            )
            if not changed:
                # Deleted while it was being spawned.
                self.driver.destroy(instance["uuid"])

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
                self.driver.destroy(instance["uuid"])
                self.scheduler.release(instance["uuid"])
                if self.api_db is not None:
                    # Its server group no longer counts it on this host.
                    forget_host(self.api_db, instance["uuid"])
