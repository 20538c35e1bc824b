"""Upstream Nova from a virtual environment, for benchmarks beside Corral.

``UpstreamNova`` writes a ``nova.conf`` into a scratch directory and runs
upstream's own processes from ``venv`` (``pip install 'nova>=34,<35'
psycopg2-binary gunicorn``): the API (``nova.wsgi.osapi_compute`` under
gunicorn), ``nova-conductor``, ``nova-scheduler`` and one ``nova-compute``
with upstream's fake driver, all on PostgreSQL and on RabbitMQ (their own
``control_exchange``, so they meet no other Nova on the same broker).

Nova needs an Identity service (keystonemiddleware checks every token),
Placement and an Image service: a ``corral serve`` without Compute
provides the three, and Nova reaches them through its catalog with the
admin's password, as a deployment with Keystone, Placement and Glance does.
Nova's API also asks the Networking service for every server it shows
(the ports' security groups), even of servers with no network:
``StubNetwork`` answers those questions with "no ports" at once, the
cheapest Neutron there could be.
"""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import threading
import time
import urllib.parse
import uuid
from pathlib import Path
from typing import Any

from benchmarks.common import ServerProcess, free_port, write_config

DEFAULT_TRANSPORT_URL = "rabbit://guest:guest@127.0.0.1:5672/"
# The WSGI application reads its options from the files in OS_NOVA_CONFIG_DIR,
# and parses sys.argv as its command line: gunicorn's own arguments must go.
APP_MODULE = '''import sys
sys.argv = sys.argv[:1]
from nova.wsgi.osapi_compute import application  # noqa: E402,F401
'''


class StubNetwork:
    """A Networking API with no ports and no security groups, on a thread of this process."""

    def __init__(self) -> None:
        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # noqa: N802 (the base class's name)
                path = self.path.split("?")[0].rstrip("/")
                name = path.rsplit("/", 1)[-1].replace("-", "_")
                body = json.dumps({name: []} if name in ("ports", "security_groups", "networks") else {}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def psycopg2_url(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql+psycopg2://")


class UpstreamNova:
    def __init__(self, venv: Path, workdir: Path, *, identity_url: str, password: str, api_db: str,
                 cell_dbs: list[str], transport_url: str = DEFAULT_TRANSPORT_URL,
                 network_url: str, host: str = "bench-upstream", debug: bool = False) -> None:
        """``cell_dbs``: cell0's database first, then cell1's, then any more cells'."""
        self.venv = venv
        self.workdir = workdir
        self.host = host
        self.transport_url = transport_url
        self.cell_dbs = [psycopg2_url(url) for url in cell_dbs]
        self.processes: list[ServerProcess] = []
        self.api: ServerProcess | None = None
        auth = {"auth_type": "password", "auth_url": identity_url, "username": "admin", "password": password,
                "project_name": "admin", "user_domain_id": "default", "project_domain_id": "default"}
        state = workdir / "state"
        state.mkdir(exist_ok=True)
        self.sections: dict[str, dict[str, Any]] = {
            "DEFAULT": {
                "transport_url": transport_url, "control_exchange": f"nova-bench-{uuid.uuid4().hex[:8]}",
                "compute_driver": "fake.FakeDriver", "host": host, "my_ip": "127.0.0.1",
                "state_path": str(state), "instances_path": str(state / "instances"),
                "debug": str(debug).lower(),
            },
            "api": {"auth_strategy": "keystone"},
            "wsgi": {"api_paste_config": str(workdir / "api-paste.ini")},
            "api_database": {"connection": psycopg2_url(api_db)},
            "database": {"connection": self.cell_dbs[1]},
            "keystone_authtoken": {**auth, "www_authenticate_uri": identity_url},
            "placement": {**auth, "region_name": "RegionOne", "valid_interfaces": "public"},
            "neutron": {**auth, "endpoint_override": network_url},
            "glance": {"region_name": "RegionOne", "valid_interfaces": "public"},
            "service_user": {"send_service_user_token": "false"},
            # unlimited, as Corral's side is configured
            "quota": {"instances": -1, "cores": -1, "ram": -1},
            "scheduler": {"discover_hosts_in_cells_interval": -1},
            "oslo_concurrency": {"lock_path": str(workdir / "locks")},
            "oslo_messaging_notifications": {"driver": "noop"},
            "notifications": {"notification_format": "unversioned"},
        }
        write_config(workdir / "nova.conf", self.sections)
        (workdir / "api-paste.ini").write_text((venv / "etc" / "nova" / "api-paste.ini").read_text())
        (workdir / "nova_bench_api.py").write_text(APP_MODULE)
        self.env = {**os.environ, "OS_NOVA_CONFIG_DIR": str(workdir)}

    def manage(self, *args: str, config: Path | None = None) -> str:
        result = subprocess.run(
            [str(self.venv / "bin" / "nova-manage"), "--config-file", str(config or self.workdir / "nova.conf"),
             *args], env=self.env, capture_output=True, text=True, cwd=self.workdir,
        )
        if result.returncode not in (0,):
            raise RuntimeError(f"nova-manage {' '.join(args)} exited {result.returncode}:\n"
                               f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
        return result.stdout

    def prepare_databases(self) -> None:
        """Schemas, cell0, cell1 and the further cells (each named cellN)."""
        self.manage("api_db", "sync")
        self.manage("cell_v2", "map_cell0", "--database_connection", self.cell_dbs[0])
        self.manage("cell_v2", "create_cell", "--name", "cell1", "--database_connection", self.cell_dbs[1],
                    "--transport-url", self.transport_url)
        self.manage("db", "sync")  # cell0 and cell1
        for index, url in enumerate(self.cell_dbs[2:], start=2):
            config = self.workdir / f"nova-cell{index}.conf"
            write_config(config, {**self.sections, "database": {"connection": url}})
            self.manage("db", "sync", config=config)
            self.manage("cell_v2", "create_cell", "--name", f"cell{index}", "--database_connection", url,
                        "--transport-url", self._cell_transport_url(index))

    def _cell_transport_url(self, index: int) -> str:
        """The same broker spelt differently for each cell: nova-manage wants every cell's URL unique
        (a deployment gives each cell its own virtual host). Nothing is sent to cells with no host."""
        parts = urllib.parse.urlsplit(self.transport_url)
        spellings = ["localhost", "127.0.0.1:5672/%2F", "localhost:5672/%2F", "127.0.0.1:5672//"]
        host = spellings[(index - 2) % len(spellings)]
        return f"{parts.scheme}://{parts.username}:{parts.password}@{host}" + ("" if "/" in host else
                                                                             f":{parts.port or 5672}/")

    def _start(self, name: str, args: list[str]) -> ServerProcess:
        process = ServerProcess(name, args, "", self.workdir / f"{name}.log", env=self.env, cwd=self.workdir)
        self.processes.append(process)
        return process

    def start(self, *, workers: int, threads: int) -> str:
        """Every service; the API's URL (``.../v2.1``) once it answers."""
        conf = ["--config-file", str(self.workdir / "nova.conf")]
        bin_ = self.venv / "bin"
        self._start("nova-conductor", [str(bin_ / "nova-conductor"), *conf])
        self._start("nova-scheduler", [str(bin_ / "nova-scheduler"), *conf])
        compute = self._start("nova-compute", [str(bin_ / "nova-compute"), *conf])
        port = free_port()
        self.api = ServerProcess("nova-api", [
            str(bin_ / "gunicorn"), "--bind", f"127.0.0.1:{port}", "--worker-class", "gthread",
            "--workers", str(workers), "--threads", str(threads), "--timeout", "600", "--no-control-socket",
            "--log-level", "warning", "--chdir", str(self.workdir), "nova_bench_api:application",
        ], f"http://127.0.0.1:{port}", self.workdir / "nova-api.log", env=self.env, cwd=self.workdir)
        self.processes.append(self.api)
        self.api.wait_ready("/", timeout=180)
        self._wait_compute(compute)
        return self.api.url + "/v2.1"

    def _wait_compute(self, compute: ServerProcess, timeout: float = 180) -> None:
        """Until the compute host is mapped to cell1 (it registers itself first)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if compute.process.poll() is not None:
                raise RuntimeError(f"nova-compute exited:\n{compute.log()}")
            if self.host in self.manage("cell_v2", "discover_hosts", "--verbose"):
                return
            if self.host in self.manage("cell_v2", "list_hosts"):
                return
            time.sleep(1)
        raise TimeoutError(f"nova-compute did not register:\n{compute.log()}")

    def errors(self) -> list[str]:
        return [f"{p.name}: {line}" for p in self.processes for line in p.error_lines(5)]

    def stop(self) -> None:
        for process in reversed(self.processes):
            process.stop()
