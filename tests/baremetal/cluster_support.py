"""Several conductor processes on one database, and an API served in the test process."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from corral.baremetal.api.app import build_state, make_app
from corral.baremetal.db.schema import TREE
from corral.core import config, migrations
from corral.core.db import create_engine
from corral.core.server import ThreadedServer
from tests.baremetal.support import wait_for
from tests.support.http import ApiClient
from tests.support.process import CorralProcess, write_config

Sections = dict[str, dict[str, Any]]


class ConductorCluster:
    """A migrated database, one ``corral serve --role conductor`` process
    per host (its configuration from ``sections_of(host)``), and an API in
    this process (configured by ``sections_of("api-host")`` unless
    ``api_sections`` is given), ready once every conductor is alive."""

    def __init__(
        self,
        url: str,
        tmp: Path,
        hosts: Sequence[str],
        sections_of: Callable[[str], Sections],
        *,
        api_sections: Sections | None = None,
        api_version: str = "latest",
    ) -> None:
        engine = create_engine(url)
        migrations.upgrade(engine, TREE)
        engine.dispose()
        self.processes: dict[str, CorralProcess] = {}
        self.server: ThreadedServer | None = None
        try:
            for host in hosts:
                config_file = write_config(tmp / f"{host}.conf", sections_of(host))
                data_dir = tmp / host
                data_dir.mkdir()
                self.processes[host] = CorralProcess(config_file, data_dir, role="conductor",
                                                     extra_args=["--no-migrate"]).start()
            self.conf = config.make_conf(state_path=str(tmp), overrides=api_sections or sections_of("api-host"))
            self.state = build_state(self.conf)
            self.server = ThreadedServer(make_app(self.conf, self.state)).start()
            self.url = self.server.url
            self.client = ApiClient(self.url, {"X-Auth-Token": "admin", "X-OpenStack-Ironic-API-Version": api_version})
            wait_for(lambda: self.alive() == set(hosts), timeout=60)
        except BaseException:
            # A failed start leaves no process behind.
            self._stop_processes()
            raise

    def alive(self) -> set[str]:
        """The hosts of the conductors the API reports alive."""
        conductors = self.client.get("/v1/conductors").json()["conductors"]
        return {conductor["hostname"] for conductor in conductors if conductor["alive"]}

    def stop(self) -> None:
        self._stop_processes()
        self.state.rpc.close()
        self.state.db.dispose()

    def _stop_processes(self) -> None:
        if self.server is not None:
            self.server.stop()
        with concurrent.futures.ThreadPoolExecutor(max_workers=len(self.processes) or 1) as pool:
            list(pool.map(CorralProcess.stop, self.processes.values()))
