"""Starting and stopping a conductor: registration, heartbeats, periodic tasks, JSON-RPC."""

from __future__ import annotations

import logging
import os
import ssl
from collections.abc import Callable
from typing import Any

from oslo_config import cfg

from corral.baremetal.conductor import file_server
from corral.baremetal.conductor.jsonrpc import make_server_app
from corral.baremetal.conductor.local import LOCAL
from corral.baremetal.conductor.manager import RPC_METHODS, Conductor
from corral.core import metrics
from corral.core.auth import HtpasswdAuthenticator
from corral.core.db import Database
from corral.core.server import ThreadedServer
from corral.core.workers import PeriodicTask, PeriodicTasks

LOG = logging.getLogger(__name__)


def authenticator(conf: cfg.ConfigOpts) -> Callable[[str | None], str] | None:
    if conf.json_rpc.auth_strategy != "http_basic":
        return None
    return HtpasswdAuthenticator(conf.json_rpc.http_basic_auth_user_file).check


def ssl_context(conf: cfg.ConfigOpts) -> ssl.SSLContext | None:
    if not conf.json_rpc.use_ssl:
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(conf.ssl.cert_file, conf.ssl.key_file)
    return context


def advertised_address(conf: cfg.ConfigOpts, scheme: str, port: int) -> str:
    """The URL other processes call: the listening address, or the host name when listening on all."""
    host = conf.json_rpc.host_ip
    if host in ("0.0.0.0", "::", ""):
        host = conf.host
    if ":" in host:
        host = f"[{host}]"
    return f"{scheme}://{host}:{port}"


class ConductorService:
    """A running conductor; ``stop()`` ends its periodic tasks, RPC server and workers."""

    def __init__(self, conf: cfg.ConfigOpts, *, rpc_server: bool, db: Database | None = None) -> None:
        self.conductor = Conductor(conf, db)
        self._rpc: ThreadedServer | None = None
        if rpc_server:
            group = conf.json_rpc
            app = make_server_app(self.conductor, RPC_METHODS, authenticator(conf))
            self._rpc = ThreadedServer(app, host=group.host_ip, port=group.port, ssl_context=ssl_context(conf))
            self.conductor.rpc_address = advertised_address(conf, self._rpc.scheme, self._rpc.port)
        self._files: ThreadedServer | None = None
        if conf.deploy.http_server:
            os.makedirs(conf.deploy.http_root, exist_ok=True)
            self._files = ThreadedServer(
                file_server.make_app(conf.deploy.http_root),
                host=conf.deploy.http_server_host, port=conf.deploy.http_server_port,
            )
            self.conductor.file_server_url = self._files.url
        group = conf.conductor
        # Only a process that exports metrics counts nodes for them.
        report_interval = conf.metrics.refresh_interval if metrics.enabled() else 0
        self._periodic = PeriodicTasks(
            [
                PeriodicTask(self.conductor.report_metrics, report_interval, run_immediately=True,
                             name="report_metrics"),
                PeriodicTask(self.conductor.heartbeat, group.heartbeat_interval, name="heartbeat"),
                PeriodicTask(self.conductor.poll_waiting_cleaning, group.clean_step_poll_interval,
                             name="poll_waiting_cleaning"),
                PeriodicTask(self.conductor.check_deploy_timeouts, group.check_deploy_timeouts_interval,
                             name="check_deploy_timeouts"),
                PeriodicTask(self.conductor.check_rescue_timeouts, group.check_rescue_timeouts,
                             name="check_rescue_timeouts"),
                PeriodicTask(self.conductor.check_inspect_timeouts, group.check_deploy_timeouts_interval,
                             name="check_inspect_timeouts"),
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
        if self._files is not None:
            self._files.start()
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
        if self._files is not None:
            self._files.stop()
        self.conductor.stop()


def start(conf: cfg.ConfigOpts, role: str, db: Any = None) -> list[Any]:
    if role not in ("all", "background", "conductor"):
        return []
    # Separate conductor processes answer the API over JSON-RPC.
    return [ConductorService(conf, rpc_server=role != "all", db=db).start()]
