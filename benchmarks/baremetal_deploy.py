"""Direct deploys with the real agent: Corral's own time per deployment, N nodes at once.

One Bare Metal server (API and conductor in this process) on a fresh
PostgreSQL database deploys N nodes at the same time; each node's
machine is a real ironic-python-agent process with a loop device as its
disk (the test machines of tests/baremetal/agent_support.py, so this
needs root for ``losetup``).  The image is a 4 MiB raw whole-disk image
served over http with its sha256.

Corral's own time is measured inside the process:

* API: the deploy requests and every lookup and heartbeat the agents send
  (the benchmark's own state polling is not counted);
* conductor: every worker run (deploy steps, heartbeat handling), minus
  the time spent waiting for the agent's HTTP answers;
* CPU: the CPU time of Corral's threads in both (no lock waits, database
  round trips or time the shared machine's other processes took).

What the agent and the machine do (booting, downloading, checksumming,
writing the disk) and the agent's heartbeat interval are not Corral's
time; the wall time from the deploy requests to the last ``active`` is
shown beside it.

Usage::

    python benchmarks/baremetal_deploy.py [--nodes 4] [--rounds 3] [--db postgresql|sqlite] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from common import DEFAULT_POSTGRESQL_SERVER, postgresql_database, scratch_dir  # noqa: E402

from corral.baremetal.api.app import build_state, make_app  # noqa: E402
from corral.baremetal.conductor.manager import Conductor  # noqa: E402
from corral.baremetal.conductor.service import ConductorService  # noqa: E402
from corral.baremetal.db.schema import TREE  # noqa: E402
from corral.baremetal.drivers.agent_client import AgentClient  # noqa: E402
from corral.core import config, migrations  # noqa: E402
from corral.core.db import create_engine  # noqa: E402
from corral.core.server import ThreadedServer  # noqa: E402
from tests.baremetal.agent_support import ImageServer, TestMachine, raw_image  # noqa: E402
from tests.support.http import ApiClient  # noqa: E402

AGENT_PATHS = ("/v1/lookup", "/v1/heartbeat/")


class Clock:
    """Seconds spent in Corral's code, summed over threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.api = 0.0
        self.worker = 0.0
        self.agent_wait = 0.0
        self.cpu = 0.0
        self.api_requests = 0

    def add(self, field: str, seconds: float) -> None:
        with self._lock:
            setattr(self, field, getattr(self, field) + seconds)

    def reset(self) -> None:
        with self._lock:
            self.api = self.worker = self.agent_wait = self.cpu = 0.0
            self.api_requests = 0

    @property
    def corral(self) -> float:
        return self.api + self.worker - self.agent_wait


def timed_app(app: Callable[..., Any], clock: Clock) -> Callable[..., Any]:
    def wrapper(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        path = environ.get("PATH_INFO", "")
        counted = path.startswith(AGENT_PATHS) or path.endswith("/states/provision")
        started, cpu = time.perf_counter(), time.thread_time()
        try:
            return list(app(environ, start_response))
        finally:
            if counted:
                clock.add("api", time.perf_counter() - started)
                clock.add("cpu", time.thread_time() - cpu)
                with clock._lock:  # noqa: SLF001 - same module
                    clock.api_requests += 1

    return wrapper


@contextmanager
def instrumented(clock: Clock) -> Iterator[None]:
    """Time conductor workers and the agent's answers (class attributes, restored afterwards)."""
    original_spawn, original_request = Conductor.spawn, AgentClient._request  # noqa: SLF001

    def spawn(self: Conductor, task: Any, work: Callable[..., None], *args: Any, **kwargs: Any) -> None:
        def timed(task: Any, *inner: Any) -> None:
            started, cpu = time.perf_counter(), time.thread_time()
            try:
                work(task, *inner)
            finally:
                clock.add("worker", time.perf_counter() - started)
                clock.add("cpu", time.thread_time() - cpu)

        original_spawn(self, task, timed, *args, **kwargs)

    def request(self: AgentClient, *args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return original_request(self, *args, **kwargs)
        finally:
            clock.add("agent_wait", time.perf_counter() - started)

    Conductor.spawn = spawn  # type: ignore[method-assign]
    AgentClient._request = request  # type: ignore[method-assign]  # noqa: SLF001
    try:
        yield
    finally:
        Conductor.spawn = original_spawn  # type: ignore[method-assign]
        AgentClient._request = original_request  # type: ignore[method-assign]  # noqa: SLF001


@dataclass
class Result:
    nodes: int
    rounds: int
    corral_ms_per_deploy_p50: float
    api_ms_per_deploy_p50: float
    conductor_ms_per_deploy_p50: float
    cpu_ms_per_deploy_p50: float
    agent_requests_per_deploy: float
    wall_seconds_p50: float


def wait_all(client: ApiClient, names: list[str], state: str, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    pending = set(names)
    while pending:
        for name in list(pending):
            node = client.get(f"/v1/nodes/{name}").json()
            if node["provision_state"] == state and node["reservation"] is None:
                pending.discard(name)
            elif node["provision_state"] in ("deploy failed", "error"):
                raise RuntimeError(f"{name}: {node['last_error']}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"not {state}: {sorted(pending)}")
        time.sleep(0.2)


def run(db_url: str, workdir: Path, nodes: int, rounds: int) -> Result:
    sections = {
        "baremetal_database": {"connection": db_url},
        "api": {"auth_strategy": "noauth2", "ramdisk_heartbeat_timeout": 5},
        "DEFAULT": {"host": "bench-conductor"},
        "conductor": {"heartbeat_interval": 1, "sync_power_state_interval": 0, "clean_step_poll_interval": 1,
                      "check_provision_state_interval": 0, "check_deploy_timeouts_interval": 1,
                      "node_locked_retry_attempts": 3},
    }
    conf = config.make_conf(state_path=str(workdir), overrides=sections)
    engine = create_engine(db_url)
    migrations.upgrade(engine, TREE)
    engine.dispose()
    clock = Clock()
    with ExitStack() as stack:
        stack.enter_context(instrumented(clock))
        state = build_state(conf)
        stack.callback(state.db.dispose)
        conductor = ConductorService(conf, rpc_server=False, db=state.db).start()
        stack.callback(conductor.stop)
        server = ThreadedServer(timed_app(make_app(conf, state), clock)).start()
        stack.callback(server.stop)
        (workdir / "images").mkdir()
        images = ImageServer(workdir / "images")
        stack.callback(images.stop)
        client = ApiClient(server.url, {"X-Auth-Token": "admin", "X-OpenStack-Ironic-API-Version": "latest"})
        url, sha256 = images.publish("bench.img", raw_image(b"corral benchmark " * 1000))
        names = [f"bench{index}" for index in range(nodes)]
        machines = {}
        for index, name in enumerate(names):
            machine = TestMachine(workdir / "machines", name, f"52:54:00:00:03:{index:02x}")
            stack.callback(machine.dispose)
            machines[name] = machine
            client.post("/v1/nodes", json={"name": name, "driver": "fake-hardware", "deploy_interface": "direct",
                                           "automated_clean": False,
                                           "driver_info": {"deploy_forces_oob_reboot": True}})
            client.post("/v1/ports", json={"node_uuid": client.get(f"/v1/nodes/{name}").json()["uuid"],
                                           "address": machine.mac})
            client.put(f"/v1/nodes/{name}/states/provision", json={"target": "manage"})
        wait_all(client, names, "manageable")
        for name in names:
            client.put(f"/v1/nodes/{name}/states/provision", json={"target": "provide"})
        wait_all(client, names, "available")
        corral, api, worker, cpu, requests_per_deploy, walls = [], [], [], [], [], []
        for _ in range(rounds):
            # Tearing an instance down empties instance_info: the image is set for every round.
            for name in names:
                client.patch(f"/v1/nodes/{name}", json=[{"op": "add", "path": "/instance_info", "value": {
                    "image_source": url, "image_os_hash_algo": "sha256", "image_os_hash_value": sha256,
                    "image_disk_format": "raw"}}])
            clock.reset()
            started = time.monotonic()
            for name in names:
                client.put(f"/v1/nodes/{name}/states/provision", json={"target": "active"})
            # The ramdisk boots once the node is powered on and waits for it.
            booted: set[str] = set()
            while len(booted) < nodes:
                for name in set(names) - booted:
                    if client.get(f"/v1/nodes/{name}").json()["provision_state"] == "wait call-back":
                        machines[name].power_on(server.url)
                        booted.add(name)
                time.sleep(0.05)
            wait_all(client, names, "active")
            walls.append(time.monotonic() - started)
            for machine in machines.values():
                machine.power_off()
            corral.append(clock.corral / nodes * 1000)
            api.append(clock.api / nodes * 1000)
            worker.append((clock.worker - clock.agent_wait) / nodes * 1000)
            cpu.append(clock.cpu / nodes * 1000)
            requests_per_deploy.append(clock.api_requests / nodes)
            for name in names:
                client.put(f"/v1/nodes/{name}/states/provision", json={"target": "deleted"})
            wait_all(client, names, "available")
    return Result(nodes, rounds, round(statistics.median(corral), 1), round(statistics.median(api), 1),
                  round(statistics.median(worker), 1), round(statistics.median(cpu), 1),
                  round(statistics.median(requests_per_deploy), 1),
                  round(statistics.median(walls), 1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--db", choices=("postgresql", "sqlite"), default="postgresql")
    parser.add_argument("--postgresql-server", default=DEFAULT_POSTGRESQL_SERVER)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    with scratch_dir("bm-deploy-") as workdir, ExitStack() as stack:
        if args.db == "postgresql":
            db_url = stack.enter_context(postgresql_database(args.postgresql_server, "deploy"))
        else:
            db_url = f"sqlite:///{workdir / 'baremetal.sqlite'}"
        result = run(db_url, workdir, args.nodes, args.rounds)
    print(f"corral  nodes={result.nodes} rounds={result.rounds}  Corral's own time per deploy "
          f"p50 {result.corral_ms_per_deploy_p50} ms (API {result.api_ms_per_deploy_p50} ms, conductor "
          f"{result.conductor_ms_per_deploy_p50} ms; CPU {result.cpu_ms_per_deploy_p50} ms; "
          f"{result.agent_requests_per_deploy} requests per deploy); "
          f"wall time for all {result.nodes} {result.wall_seconds_p50} s")
    if args.json:
        args.json.write_text(json.dumps(asdict(result), indent=2))


if __name__ == "__main__":
    main()
