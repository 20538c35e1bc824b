"""The multi-host lab (tools/multihost-lab) as the tests drive it.

Every fault helper calls the lab script, which acts inside the lab's own
namespaces only; the answers are timed with ``time.monotonic()`` in this
process so that the tests can measure recoveries.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import requests
from prometheus_client.parser import text_string_to_metric_families

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "tools" / "multihost-lab"

T = TypeVar("T")


def run_lab(*args: str, timeout: float = 900) -> str:
    result = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout,
                            check=False)
    if result.returncode != 0:
        raise RuntimeError(f"tools/multihost-lab {' '.join(args)} failed ({result.returncode}):\n"
                           f"{result.stdout}{result.stderr}")
    return result.stdout


def wait_for(what: str, probe: Callable[[], T | None], timeout: float = 60, interval: float = 0.1) -> T:
    deadline = time.monotonic() + timeout
    while True:
        try:
            result = probe()
        except (requests.RequestException, OSError):
            result = None
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


class Lab:
    """A running lab: addresses, credentials, faults and logs."""

    def __init__(self) -> None:
        self.info: dict[str, Any] = json.loads(run_lab("describe"))
        self.dir = Path(self.info["lab_dir"])
        self.hosts: dict[str, str] = self.info["hosts"]
        self.url = self.info["api_url"]
        self.admin_password = Path(self.info["admin_password_file"]).read_text().strip()

    # -- where things are

    def api_url(self, host: str) -> str:
        """An API host's own address, bypassing the load balancer."""
        return f"http://{self.hosts[host]}:{self.info['api_port']}"

    def state(self) -> dict[str, Any]:
        return json.loads((self.dir / "lab.json").read_text())

    def log(self, host: str, process: str = "corral") -> str:
        """A lab process's log (``corral``, ``haproxy``, ``postgres``, ``mariadb``, ``mariadb-error``...)."""
        path = Path(self.info["logs"]) / f"{host}.{process}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def log_size(self, host: str, process: str = "corral") -> int:
        path = Path(self.info["logs"]) / f"{host}.{process}.log"
        return path.stat().st_size if path.exists() else 0

    def log_since(self, host: str, offset: int, process: str = "corral") -> str:
        path = Path(self.info["logs"]) / f"{host}.{process}.log"
        with open(path, "rb") as handle:
            handle.seek(offset)
            return handle.read().decode(errors="replace")

    # -- faults

    def cut(self, host: str, mode: str = "link") -> float:
        """Cut ``host`` off; returns the moment it was cut."""
        run_lab("cut", host, "--mode", mode)
        return time.monotonic()

    def restore(self, host: str) -> float:
        run_lab("restore", host)
        return time.monotonic()

    def promote(self) -> dict[str, Any]:
        """Fence the PostgreSQL primary, promote the replica and move pg-primary to it."""
        return json.loads(run_lab("promote"))

    def rejoin(self) -> None:
        """The fenced former primary becomes the new primary's replica."""
        run_lab("rejoin")

    def delay(self, src: str, dst: str, port: int, ms: float) -> None:
        run_lab("delay", src, dst, str(port), str(ms))

    def round_trips(self, src: str, dst: str, port: int) -> int:
        """Round trips so far through the delay from ``src`` to ``dst``:``port``."""
        path = self.dir / "run" / f"{src}-delay-{dst}-{port}.round-trips"
        return int(path.read_text()) if path.exists() else 0

    def loss(self, src: str, dst: str, percent: float) -> None:
        run_lab("loss", src, dst, str(percent))

    def clear(self, src: str) -> None:
        run_lab("clear", src)

    def restart(self, host: str, *config_files: str) -> None:
        self.restart_all([host], *config_files)

    def restart_all(self, hosts: list[str], *config_files: str) -> None:
        """Restart the hosts' Corral processes together (stopped at once, then started)."""
        args = [arg for name in config_files for arg in ("--config-file", name)]
        run_lab("restart", *hosts, *args)

    def rotate_keys(self, host: str) -> None:
        run_lab("rotate-keys", host)

    @property
    def key_repository(self) -> Path:
        return self.dir / "shared" / "fernet-keys"

    # -- metrics

    def metrics(self, host: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        """An API host's Prometheus metrics: (name, sorted labels) -> value."""
        password = Path(self.info["metrics_password_file"]).read_text().strip()
        answer = requests.get(f"http://{self.hosts[host]}:{self.info['metrics_port']}/metrics", timeout=10,
                              auth=(self.info["metrics_user"], password))
        answer.raise_for_status()
        samples = {}
        for family in text_string_to_metric_families(answer.text):
            for sample in family.samples:
                samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
        return samples

    def metric(self, host: str, name: str, **labels: str) -> float:
        """The sum of a metric's samples on a host whose labels include ``labels``."""
        wanted = set(labels.items())
        return sum(value for (sample, sample_labels), value in self.metrics(host).items()
                   if sample == name and wanted <= set(sample_labels))

    # -- HAProxy

    def haproxy(self, command: str) -> str:
        with socket.socket(socket.AF_UNIX) as sock:
            sock.settimeout(5)
            sock.connect(self.info["haproxy_socket"])
            sock.sendall(command.encode() + b"\n")
            chunks = []
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        return b"".join(chunks).decode()

    def server_stats(self) -> dict[str, dict[str, str]]:
        """``backend/server`` -> HAProxy's statistics of it (``status``, ``chkfail``, ``chkdown``...)."""
        lines = self.haproxy("show stat").splitlines()
        header = lines[0].lstrip("# ").split(",")
        result = {}
        for line in lines[1:]:
            if line:
                row = dict(zip(header, line.split(","), strict=False))
                if row["svname"] not in ("FRONTEND", "BACKEND"):
                    result[f"{row['pxname']}/{row['svname']}"] = row
        return result

    def servers(self) -> dict[str, str]:
        """``backend/server`` -> HAProxy's status (UP, DOWN, ``UP 1/2``...)."""
        return {server: row["status"] for server, row in self.server_stats().items()}

    def wait_server(self, server: str, status: str, timeout: float = 60) -> float:
        """Wait until HAProxy reports ``server`` as ``status``; returns when it was seen."""
        wait_for(f"HAProxy to report {server} {status}", lambda: self.servers().get(server) == status,
                 timeout=timeout, interval=0.05)
        return time.monotonic()

    # -- tokens

    def token(self, base_url: str | None = None, *, project: str = "admin") -> str:
        body = {"auth": {"identity": {"methods": ["password"], "password": {"user": {
            "name": "admin", "domain": {"id": "default"}, "password": self.admin_password}}},
            "scope": {"project": {"name": project, "domain": {"id": "default"}}}}}
        answer = requests.post(f"{base_url or self.url}/identity/v3/auth/tokens", json=body, timeout=30)
        answer.raise_for_status()
        return answer.headers["X-Subject-Token"]


def wait_healthy(lab: Lab, timeout: float = 120) -> None:
    """Every API host up behind the load balancer (the state each test starts from and leaves)."""
    for host in ("api1", "api2"):
        lab.wait_server(f"corral_api/{host}", "UP", timeout=timeout)
