"""Servers and databases for benchmarks: Corral and upstream OpenStack services.

Each benchmark starts the servers it compares in child processes (their
own ports, their own temporary state), so the numbers include the real
HTTP stack, WSGI server and database driver, and both sides run under the
same conditions: same machine, same database server, same gunicorn worker
and thread counts.
"""

from __future__ import annotations

import configparser
import http.client
import math
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import requests
import sqlalchemy as sa

REPO = Path(__file__).resolve().parent.parent
DEFAULT_POSTGRESQL_SERVER = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def write_config(path: Path, sections: dict[str, dict[str, Any]]) -> Path:
    parser = configparser.ConfigParser(interpolation=None)
    for section, values in sections.items():
        parser[section] = {key: str(value) for key, value in values.items()}
    with open(path, "w", encoding="utf-8") as handle:
        parser.write(handle)
    return path


class ServerProcess:
    """A server in a child process (its own process group), logging to a file."""

    def __init__(self, name: str, args: list[str], url: str, log_path: Path,
                 env: dict[str, str] | None = None, cwd: Path | None = None) -> None:
        self.name = name
        self.url = url
        self.log_path = log_path
        log = open(log_path, "ab")
        self.process = subprocess.Popen(
            args, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})},
            cwd=cwd, start_new_session=True,
        )
        log.close()

    def wait_ready(self, path: str = "/", timeout: float = 90) -> ServerProcess:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.process.returncode}:\n{self.log()}")
            try:
                requests.get(self.url + path, timeout=10)
                return self
            except (requests.ConnectionError, requests.Timeout):
                time.sleep(0.2)
        raise TimeoutError(f"{self.name} did not answer on {self.url}{path}:\n{self.log()}")

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-5000:]
        except OSError:
            return ""

    def error_lines(self, limit: int = 20) -> list[str]:
        """The first ``limit`` lines of the log that report an error."""
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return []
        return [line for line in lines if "Error:" in line or "Exception:" in line][:limit]

    def stop(self) -> None:
        if self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)


@contextmanager
def scratch_dir(prefix: str) -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix=prefix) as name:
        yield Path(name)


@contextmanager
def postgresql_database(server_url: str, label: str) -> Iterator[str]:
    """A fresh database on the PostgreSQL server at ``server_url``; dropped afterwards."""
    name = f"bench_{label}_{uuid.uuid4().hex[:8]}"
    admin = sa.create_engine(server_url, isolation_level="AUTOCOMMIT", poolclass=sa.pool.NullPool)
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    try:
        yield str(sa.engine.make_url(server_url).set(database=name).render_as_string(hide_password=False))
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def start_corral(workdir: Path, sections: dict[str, dict[str, Any]], *, workers: int, threads: int,
                 ready_path: str) -> ServerProcess:
    """``corral serve`` with ``sections`` as its configuration, databases migrated first."""
    config_file = write_config(workdir / "corral.conf", sections)
    port = free_port()
    args = [
        sys.executable, "-m", "corral", "serve", "--port", str(port), "--migrate",
        "--workers", str(workers), "--threads", str(threads),
        "--config-file", str(config_file), "--data-dir", str(workdir / "data"),
    ]
    server = ServerProcess("corral", args, f"http://127.0.0.1:{port}", workdir / "corral.log", cwd=REPO)
    return server.wait_ready(ready_path)


def start_upstream_placement(workdir: Path, venv: Path, db_url: str, *, workers: int,
                             threads: int) -> ServerProcess:
    """Upstream openstack-placement from ``venv`` under gunicorn, database synced first."""
    write_config(workdir / "placement.conf", {
        "placement_database": {"connection": db_url},
        "api": {"auth_strategy": "noauth2"},
    })
    env = {"OS_PLACEMENT_CONFIG_DIR": str(workdir)}
    subprocess.run(
        [str(venv / "bin" / "placement-manage"), "--config-file", str(workdir / "placement.conf"), "db", "sync"],
        check=True, env={**os.environ, **env}, capture_output=True,
    )
    port = free_port()
    args = [
        str(venv / "bin" / "gunicorn"), "--bind", f"127.0.0.1:{port}", "--worker-class", "gthread",
        "--workers", str(workers), "--threads", str(threads), "--log-level", "warning",
        "placement.wsgi.api:application",
    ]
    server = ServerProcess("upstream", args, f"http://127.0.0.1:{port}", workdir / "upstream.log",
                           env=env, cwd=workdir)
    return server.wait_ready("/")


def percentile(values: list[float], fraction: float) -> float:
    """Nearest-rank percentile of ``values`` (0 when empty)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = min(len(ordered), max(1, math.ceil(fraction * len(ordered))))
    return ordered[rank - 1]


class KeptAliveClient:
    """Requests over one kept-alive connection with Python's http.client.

    Benchmarks share the machine's cores with the servers they measure:
    ``requests`` costs several times more CPU per call (about 0.7 ms per
    claim, 2 ms to read a 1 MB answer), which would be counted against the
    server.
    """

    def __init__(self, url: str, headers: dict[str, str], timeout: float = 900) -> None:
        parts = urllib.parse.urlsplit(url)
        self.prefix = parts.path.rstrip("/")
        self.connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
        self.headers = headers

    def request(self, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes, float]:
        """Status, body and seconds taken (a connection the server closed
        while idle is opened again, untimed)."""
        for attempt in (1, 2):
            started = time.perf_counter()
            try:
                self.connection.request(method, self.prefix + path, body=body, headers=self.headers)
                response = self.connection.getresponse()
                answer = response.read()
            except (http.client.RemoteDisconnected, ConnectionError):
                self.connection.close()
                if attempt == 2:
                    raise
                continue
            return response.status, answer, time.perf_counter() - started
        raise AssertionError("unreachable")

    def get(self, path: str) -> tuple[int, bytes, float]:
        return self.request("GET", path)

    def close(self) -> None:
        self.connection.close()


def process_tree(root: int) -> list[int]:
    """``root`` and all its descendants now running."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    tree = [root]
    for pid in tree:
        tree.extend(child for child, parent in parents.items() if parent == pid)
    return tree


def tree_cpu_seconds(roots: list[int]) -> float:
    """User and system CPU time used so far by the processes under ``roots``
    (their children's included once reaped): unlike latency, not inflated by
    waiting for a CPU other work on the machine holds."""
    ticks = 0
    for root in roots:
        for pid in process_tree(root):
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            ticks += sum(int(field) for field in fields[11:15])  # utime, stime, cutime, cstime
    return ticks / os.sysconf("SC_CLK_TCK")
