"""Allocations: Corral's Bare Metal service against upstream Ironic.

For each N (nodes) the benchmark builds the same cloud through each
service's HTTP API (N fake-hardware nodes of one resource class, managed
and made available without cleaning), then creates M allocations at once
from C client threads, and waits until every allocation is ``active`` or
``error``.  It prints:

* allocations per second: M divided by the time from the first POST until
  the last allocation settled;
* time to active, p50/p95: each active allocation's ``updated_at`` minus
  its ``created_at`` (the service's own timestamps);
* active and error counts (a cross-check: active must equal min(N, M));
* the ratio Corral / upstream for allocations per second.

Usage::

    python benchmarks/baremetal_allocations.py --nodes 50 --nodes 200 --allocations 300 \\
        [--concurrency 8] [--db postgresql|sqlite] [--upstream /work/venvs/ironic] [--json out.json]

Corral runs as ``corral serve`` (API and one conductor in one process);
upstream Ironic (``pip install ironic`` into a virtualenv) runs as its
all-in-one ``ironic`` command with ``rpc_transport = none``.  Both use the
same kind of database (upstream fails under concurrent writes on SQLite,
so PostgreSQL is the default).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import json
import os
import subprocess
import sys
import time
import uuid as uuidlib
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (  # noqa: E402
    DEFAULT_POSTGRESQL_SERVER,
    ServerProcess,
    free_port,
    percentile,
    postgresql_database,
    scratch_dir,
    start_corral,
    write_config,
)

HEADERS = {"X-OpenStack-Ironic-API-Version": "1.52", "X-Auth-Token": "admin", "Content-Type": "application/json"}
RESOURCE_CLASS = "bench"


@dataclass
class Result:
    service: str
    nodes: int
    allocations: int
    concurrency: int
    active: int
    error: int
    stuck: int
    create_errors: int
    seconds: float
    per_second: float
    p50_ms: float
    p95_ms: float


# ------------------------------------------------------------ servers


def corral_server(workdir: Path, db_url: str) -> ServerProcess:
    sections = {
        "baremetal_database": {"connection": db_url},
        "api": {"auth_strategy": "noauth2"},
        "DEFAULT": {"host": "bench-conductor"},
        "conductor": {
            "automated_clean": "false",
            "sync_power_state_interval": 0,
            "check_provision_state_interval": 0,
            "workers_pool_size": 100,
            "workers_backlog": 10000,
        },
    }
    server = start_corral(workdir, sections, workers=1, threads=16, ready_path="/baremetal/v1/")
    server.url += "/baremetal"  # every service under its own prefix
    return server


def upstream_server(workdir: Path, venv: Path, db_url: str) -> ServerProcess:
    port = free_port()
    fake = "fake"
    config = write_config(workdir / "ironic.conf", {
        "DEFAULT": {
            "auth_strategy": "noauth", "rpc_transport": "none", "host": "bench-ironic",
            "enabled_hardware_types": "fake-hardware",
            **{f"enabled_{kind}_interfaces": fake for kind in
               ("boot", "deploy", "inspect", "management", "power", "raid", "vendor", "bios", "rescue")},
            "enabled_console_interfaces": "no-console",
            "enabled_network_interfaces": "noop",
            "enabled_storage_interfaces": "noop",
            "default_network_interface": "noop",
            "log_dir": str(workdir),
        },
        "database": {"connection": db_url},
        "api": {"host_ip": "127.0.0.1", "port": port},
        "conductor": {"automated_clean": "false", "sync_power_state_interval": -1},
        "dhcp": {"dhcp_provider": "none"},
        "oslo_concurrency": {"lock_path": str(workdir / "locks")},
    })
    bin_dir = venv / "bin"
    subprocess.run([str(bin_dir / "ironic-dbsync"), "--config-file", str(config), "create_schema"],
                   check=True, capture_output=True)
    server = ServerProcess("upstream", [str(bin_dir / "ironic"), "--config-file", str(config)],
                           f"http://127.0.0.1:{port}", workdir / "upstream.log", cwd=workdir)
    return server.wait_ready("/v1/", timeout=180)


# ------------------------------------------------------------- cloud


def _parallel(function: Callable[[Any], Any], items: list[Any], threads: int = 8) -> list[Any]:
    with concurrent.futures.ThreadPoolExecutor(max_workers=threads) as pool:
        return list(pool.map(function, items))


def list_all(session: requests.Session, url: str, path: str, key: str) -> list[dict[str, Any]]:
    """Every item of a collection, following ``next`` links."""
    items: list[dict[str, Any]] = []
    page = f"{url}{path}"
    while page:
        body = session.get(page, timeout=120).json()
        items.extend(body[key])
        page = body.get("next")
    return items


def _wait_states(session: requests.Session, url: str, state: str, count: int, timeout: float = 600,
                 field: str = "provision_state") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        nodes = list_all(session, url, f"/v1/nodes?fields={field}", "nodes")
        if sum(1 for node in nodes if node[field] == state) >= count:
            return
        time.sleep(0.5)
    raise TimeoutError(f"fewer than {count} nodes reached {state}")


def build_cloud(url: str, count: int) -> None:
    session = requests.Session()
    session.headers.update(HEADERS)

    def create(index: int) -> str:
        body = {"driver": "fake-hardware", "name": f"bench-{index}", "resource_class": RESOURCE_CLASS}
        response = session.post(f"{url}/v1/nodes", json=body, timeout=60)
        response.raise_for_status()
        return str(response.json()["uuid"])

    def move(ident: str, target: str) -> None:
        put(ident, "provision", target)

    def put(ident: str, kind: str, target: str) -> None:
        for _ in range(100):
            response = session.put(f"{url}/v1/nodes/{ident}/states/{kind}", json={"target": target}, timeout=60)
            if response.status_code != 409:  # locked: retry
                response.raise_for_status()
                return
            time.sleep(0.1)
        raise RuntimeError(f"node {ident} stayed locked")

    uuids = _parallel(create, list(range(count)))
    _parallel(lambda ident: move(ident, "manage"), uuids)
    _wait_states(session, url, "manageable", count)
    _parallel(lambda ident: move(ident, "provide"), uuids)
    _wait_states(session, url, "available", count)
    # Fake hardware reports no power state until one is set; allocations need one.
    _parallel(lambda ident: put(ident, "power", "power off"), uuids)
    _wait_states(session, url, "power off", count, field="power_state")


# ----------------------------------------------------------- measure


def _parse(value: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(value)


def measure(service: str, url: str, nodes: int, allocations: int, concurrency: int,
            timeout: float = 600) -> Result:
    session = requests.Session()
    session.headers.update(HEADERS)

    def create(_index: int) -> bool:
        body = {"resource_class": RESOURCE_CLASS, "name": f"a-{uuidlib.uuid4().hex[:12]}"}
        return session.post(f"{url}/v1/allocations", json=body, timeout=120).status_code == 201

    started = time.monotonic()
    created = _parallel(create, list(range(allocations)), threads=concurrency)
    deadline = started + timeout
    found: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        found = list_all(session, url, "/v1/allocations?fields=uuid,state,created_at,updated_at,last_error", "allocations")
        if all(item["state"] != "allocating" for item in found):
            break
        time.sleep(0.1)
    seconds = time.monotonic() - started
    reasons = {item["last_error"] for item in found if item["state"] == "error"}
    for reason in sorted(reasons)[:3]:
        print(f"  {service}: allocation error: {reason}", file=sys.stderr)
    active = [item for item in found if item["state"] == "active"]
    latencies = sorted(
        (_parse(item["updated_at"]) - _parse(item["created_at"])).total_seconds() * 1000 for item in active
    )
    return Result(
        service=service, nodes=nodes, allocations=allocations, concurrency=concurrency, active=len(active),
        error=sum(1 for item in found if item["state"] == "error"),
        stuck=sum(1 for item in found if item["state"] == "allocating"),
        create_errors=created.count(False), seconds=round(seconds, 2),
        per_second=round(allocations / seconds, 1),
        p50_ms=round(percentile(latencies, 0.5), 1), p95_ms=round(percentile(latencies, 0.95), 1),
    )


# --------------------------------------------------------------- run


def run_one(service: str, nodes: int, args: argparse.Namespace) -> Result:
    with ExitStack() as stack:
        workdir = stack.enter_context(scratch_dir(f"bench-bm-{service}-"))
        if args.db == "postgresql":
            db_url = stack.enter_context(postgresql_database(args.postgresql, f"bm_{service}"))
            if service == "upstream":
                db_url = db_url.replace("postgresql+psycopg://", "postgresql+psycopg2://")
        else:
            db_url = f"sqlite:///{workdir / 'baremetal.sqlite'}"
        if service == "corral":
            server = corral_server(workdir, db_url)
        else:
            server = upstream_server(workdir, Path(args.upstream), db_url)
        stack.callback(server.stop)
        build_cloud(server.url, nodes)
        result = measure(service, server.url, nodes, args.allocations, args.concurrency)
        for line in server.error_lines(5):
            print(f"  {service} log: {line}", file=sys.stderr)
        return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, action="append", help="nodes in the cloud (repeatable)")
    parser.add_argument("--allocations", type=int, default=300, help="allocations created at once")
    parser.add_argument("--concurrency", type=int, default=8, help="client threads creating allocations")
    parser.add_argument("--db", choices=("postgresql", "sqlite"), default="postgresql")
    parser.add_argument("--postgresql", default=os.environ.get("CORRAL_BENCH_POSTGRESQL_URL",
                                                               DEFAULT_POSTGRESQL_SERVER))
    parser.add_argument("--upstream", help="virtualenv with upstream Ironic installed (pip install ironic)")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    results: list[Result] = []
    for nodes in args.nodes or [100]:
        corral = run_one("corral", nodes, args)
        results.append(corral)
        if args.upstream:
            results.append(run_one("upstream", nodes, args))
    print(f"| service | nodes | allocations | threads | active | error | stuck | allocs/s | "
          f"p50 ms | p95 ms | ratio |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    by_nodes = {(result.service, result.nodes): result for result in results}
    for result in results:
        ratio = ""
        upstream = by_nodes.get(("upstream", result.nodes))
        if result.service == "corral" and upstream is not None and upstream.per_second:
            ratio = f"{result.per_second / upstream.per_second:.1f}x"
        print(f"| {result.service} | {result.nodes} | {result.allocations} | {result.concurrency} | "
              f"{result.active} | {result.error} | {result.stuck} | {result.per_second} | {result.p50_ms} | "
              f"{result.p95_ms} | {ratio} |")
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(result) for result in results], indent=2))


if __name__ == "__main__":
    main()
