"""Nodes: Corral's Bare Metal service against upstream Ironic.

For each N the benchmark starts each service on a fresh database and
measures, through the HTTP API:

* create: N nodes created from C client threads, nodes per second;
* list: ``GET /v1/nodes/detail`` of all N nodes and a full walk of
  ``GET /v1/nodes?limit=100`` following ``next`` links, p50 of R repeats;
* manage: every node ``manage``d at once; seconds until all are
  ``manageable`` (conductor work and locking);
* clean: every node manually cleaned at once with ``bios.factory_reset``;
  seconds until all are back in ``manageable``.

With ``--ports-per-node P`` each node gets P ports (created like the
nodes, from C threads) before the lists are timed, so the list figures
show what ports cost a node list.  ``--lists-only`` skips manage and clean.

Usage::

    python benchmarks/baremetal_nodes.py --nodes 100 --nodes 500 [--concurrency 8] [--repeats 5]
        [--db postgresql|sqlite] [--upstream /work/venvs/ironic] [--json out.json]
        [--ports-per-node 4] [--lists-only]

Corral runs as ``corral serve`` (API and one conductor in one process);
upstream Ironic runs as its all-in-one ``ironic`` command (see
``baremetal_allocations.py`` for both set-ups, shared here).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import sys
import time
from contextlib import ExitStack
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))

from baremetal_allocations import corral_server, upstream_server  # noqa: E402
from common import DEFAULT_POSTGRESQL_SERVER, percentile, postgresql_database, scratch_dir  # noqa: E402

HEADERS = {"X-OpenStack-Ironic-API-Version": "1.51", "X-Auth-Token": "admin", "Content-Type": "application/json"}


@dataclass
class Result:
    service: str
    nodes: int
    ports_per_node: int
    create_per_second: float
    detail_list_p50_ms: float
    paged_walk_p50_ms: float
    manage_seconds: float | None
    clean_seconds: float | None


def _session() -> requests.Session:
    session = requests.Session()
    session.headers.update(HEADERS)
    return session


def _parallel(function: Any, items: list[Any], threads: int) -> list[Any]:
    with concurrent.futures.ThreadPoolExecutor(max_workers=threads) as pool:
        return list(pool.map(function, items))


def _stamps(session: requests.Session, url: str) -> dict[str, Any]:
    nodes = session.get(f"{url}/v1/nodes/detail", timeout=120).json()["nodes"]
    return {node["uuid"]: node["provision_updated_at"] for node in nodes}


def _all_in_state(session: requests.Session, url: str, state: str, count: int, since: float,
                  before: dict[str, Any], timeout: float = 900) -> float:
    """Seconds from ``since`` until ``count`` nodes moved (since ``before``) into ``state``, unlocked."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        nodes = session.get(f"{url}/v1/nodes/detail", timeout=120).json()["nodes"]
        settled = [node for node in nodes if node["provision_state"] == state and node["reservation"] is None
                   and node["provision_updated_at"] != before.get(node["uuid"])]
        failed = [node for node in nodes if node["provision_state"].endswith("failed")]
        if failed:
            raise RuntimeError(f"{len(failed)} nodes failed, e.g. {failed[0]['last_error']}")
        if len(settled) >= count:
            return time.monotonic() - since
        time.sleep(0.2)
    raise TimeoutError(f"nodes did not reach {state}")


def _put_state(session: requests.Session, url: str, uuid: str, body: dict[str, Any]) -> None:
    for _attempt in range(50):
        response = session.put(f"{url}/v1/nodes/{uuid}/states/provision", json=body, timeout=60)
        if response.status_code == 202:
            return
        if response.status_code not in (409, 503):
            raise RuntimeError(f"{response.status_code}: {response.text}")
        time.sleep(0.1)
    raise RuntimeError(f"node {uuid} stayed busy")


def _create_ports(session: requests.Session, url: str, uuids: list[str], per_node: int, threads: int) -> None:
    def create(item: tuple[int, str]) -> None:
        index, node_uuid = item
        for port in range(per_node):
            number = index * per_node + port
            address = ":".join(f"{byte:02x}" for byte in (0x52, 0x54, (number >> 24) & 0xFF, (number >> 16) & 0xFF,
                                                         (number >> 8) & 0xFF, number & 0xFF))
            response = session.post(f"{url}/v1/ports", json={"address": address, "node_uuid": node_uuid},
                                    timeout=60)
            response.raise_for_status()

    _parallel(create, list(enumerate(uuids)), threads)


def measure(service: str, url: str, nodes: int, concurrency: int, repeats: int, ports_per_node: int = 0,
            lists_only: bool = False) -> Result:
    session = _session()

    def create(index: int) -> str:
        response = session.post(f"{url}/v1/nodes", json={"driver": "fake-hardware", "name": f"bench-{index}"},
                                timeout=60)
        response.raise_for_status()
        return response.json()["uuid"]

    started = time.monotonic()
    uuids = _parallel(create, list(range(nodes)), concurrency)
    create_rate = nodes / (time.monotonic() - started)
    if ports_per_node:
        _create_ports(session, url, uuids, ports_per_node, concurrency)
        listed = session.get(f"{url}/v1/ports?limit=1000", timeout=120).json()["ports"]
        assert len(listed) == min(1000, nodes * ports_per_node)

    detail, walk = [], []
    for _ in range(repeats):
        began = time.monotonic()
        assert len(session.get(f"{url}/v1/nodes/detail", timeout=120).json()["nodes"]) == nodes
        detail.append((time.monotonic() - began) * 1000)
        began = time.monotonic()
        seen, link = 0, f"{url}/v1/nodes?limit=100"
        while link:
            page = session.get(link, timeout=120).json()
            seen += len(page["nodes"])
            link = page.get("next")
        assert seen == nodes
        walk.append((time.monotonic() - began) * 1000)

    if lists_only:
        return Result(service, nodes, ports_per_node, round(create_rate, 1), round(percentile(detail, 0.5), 1),
                      round(percentile(walk, 0.5), 1), None, None)
    before = _stamps(session, url)
    began = time.monotonic()
    _parallel(lambda uuid: _put_state(session, url, uuid, {"target": "manage"}), uuids, concurrency)
    manage_seconds = _all_in_state(session, url, "manageable", nodes, began, before)

    steps = {"target": "clean", "clean_steps": [{"interface": "bios", "step": "factory_reset"}]}
    before = _stamps(session, url)
    began = time.monotonic()
    _parallel(lambda uuid: _put_state(session, url, uuid, steps), uuids, concurrency)
    clean_seconds = _all_in_state(session, url, "manageable", nodes, began, before)
    return Result(service, nodes, ports_per_node, round(create_rate, 1), round(percentile(detail, 0.5), 1),
                  round(percentile(walk, 0.5), 1), round(manage_seconds, 2), round(clean_seconds, 2))


def run_one(service: str, nodes: int, args: argparse.Namespace) -> Result:
    with ExitStack() as stack:
        workdir = stack.enter_context(scratch_dir(f"bm-nodes-{service}-"))
        if args.db == "postgresql":
            db_url = stack.enter_context(postgresql_database(args.postgresql, f"bmnodes_{service}"))
            if service == "upstream":
                # Upstream's virtualenv has psycopg2, not psycopg 3.
                db_url = db_url.replace("postgresql+psycopg://", "postgresql+psycopg2://")
        else:
            db_url = f"sqlite:///{workdir / 'baremetal.sqlite'}"
        if service == "corral":
            server = corral_server(workdir, db_url)
        else:
            server = upstream_server(workdir, Path(args.upstream), db_url)
        stack.callback(server.stop)
        return measure(service, server.url, nodes, args.concurrency, args.repeats, args.ports_per_node,
                       args.lists_only)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, action="append", help="node counts (repeatable)")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--db", choices=("postgresql", "sqlite"), default="postgresql")
    parser.add_argument("--postgresql", default=DEFAULT_POSTGRESQL_SERVER)
    parser.add_argument("--upstream", help="virtualenv with upstream ironic installed")
    parser.add_argument("--json", help="write results to this file")
    parser.add_argument("--ports-per-node", type=int, default=0, help="ports created on every node")
    parser.add_argument("--lists-only", action="store_true", help="skip the manage and clean phases")
    args = parser.parse_args()
    results = []
    for count in args.nodes or [100]:
        for service in ("corral", "upstream") if args.upstream else ("corral",):
            result = run_one(service, count, args)
            results.append(result)
            print(json.dumps(asdict(result)), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(result) for result in results], indent=2))


if __name__ == "__main__":
    main()
