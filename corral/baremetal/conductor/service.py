"""Starting and stopping a conductor: registration, heartbeats, periodic tasks, JSON-RPC."""

from __future__ import annotations

import logging
from typing import Any

from oslo_config import cfg

from corral.baremetal.conductor.jsonrpc import make_server_app
from corral.baremetal.conductor.local import LOCAL
from corral.baremetal.conductor.manager import RPC_METHODS, Conductor
from corral.core.db import Database
from corral.core.server import ThreadedServer
from corral.core.workers import PeriodicTask, PeriodicTasks

LOG = logging.getLogger(__name__)


class ConductorService:
    """A running conductor; ``stop()`` ends its periodic tasks, RPC server and workers."""

    def __init__(self, conf: cfg.ConfigOpts, *, rpc_server: bool, db: Database | None = None) -> None:
        self.conductor = Conductor(conf, db)
        self._rpc: ThreadedServer | None = None
        if rpc_server:
            self._rpc = ThreadedServer(
                make_server_app(self.conductor, RPC_METHODS), host=conf.json_rpc.host_ip, port=conf.json_rpc.port
            )
            self.conductor.rpc_address = f"http://{conf.json_rpc.host_ip}:{self._rpc.port}"
        group = conf.conductor
        self._periodic = PeriodicTasks(
            [
                PeriodicTask(self.conductor.heartbeat, group.heartbeat_interval, name="heartbeat"),
                PeriodicTask(self.conductor.poll_waiting_cleaning, group.clean_step_poll_interval,
                             name="poll_waiting_cleaning"),
                PeriodicTask(self.conductor.check_deploy_timeouts, group.check_deploy_timeouts_interval,
                             name="check_deploy_timeouts"),
                PeriodicTask(self.conductor.sync_power_states, group.sync_power_state_interval,
                             name="sync_power_states"),
                PeriodicTask(self.conductor.recover_orphans, group.check_provision_state_interval,
                             name="recover_orphans"),
                PeriodicTask(self.conductor.check_orphan_allocations, group.check_allocations_interval,
                             name="check_orphan_allocations"),
            ],
            name=f"conductor-{conf.host}",
        )

    @property
    def host(self) -> str:
        return self.conductor.host

    def start(self) -> ConductorService:
        if self._rpc is not None:
            self._rpc.start()
        self.conductor.register()
        self.conductor.recover_after_restart()
        self.conductor.resume_allocations()
        LOCAL.add(self.conductor)
        self._periodic.start()
        LOG.info("conductor %s started (RPC: %s)", self.host, self.conductor.rpc_address or "in-process")
        return self

    def stop(self) -> None:
        LOCAL.remove(self.conductor)
        self._periodic.stop()
        if self._rpc is not None:
            self._rpc.stop()
        self.conductor.stop()


def start(conf: cfg.ConfigOpts, role: str, db: Any = None) -> list[Any]:
    if role not in ("all", "background", "conductor"):
        return []
    # Separate conductor processes answer the API over JSON-RPC.
    return [ConductorService(conf, rpc_server=role != "all", db=db).start()]
