"""GET /servers/detail latency across cells: healthy, and with one cell hanging.

The benchmark starts ``corral serve`` with three cells (cell1, cell2,
cell3) of ``--instances`` servers each for one project, every cell on its
own database, cell3 reached through a TCP proxy in this process.  It then
times ``--requests`` sequential ``GET /servers/detail`` calls (microversion
2.69, no paging: ``[api] max_limit`` records come back):

1. healthy: all cells answer;
2. hanging: the proxy stops passing bytes for cell3 (the database neither
   answers nor refuses); the first request waits ``[cells] timeout``, the
   following ones find the cell known-down and answer without waiting
   (``[cells] down_cell_recheck_interval``); cell3's servers come back as
   minimal ``UNKNOWN`` records;
3. hanging with ``down_cell_recheck_interval = 0`` (``--no-recheck-phase``
   skips it): the cell is asked again as soon as its stuck task has
   ended, so some requests wait the timeout again; none piles a second
   task on a cell whose first one is still stuck.  (Upstream waits the
   whole timeout, 60 s, on every request.)

It prints p50/p95/max latency and the number of records (full and
UNKNOWN) per phase.

Usage::

    python benchmarks/compute_servers_detail.py [--instances 2000] [--requests 20] \\
        [--cell-timeout 2] [--db postgresql|sqlite] [--json out.json]

With ``--db sqlite`` the API database and cell1/cell2 are SQLite files and
cell3 is still a PostgreSQL database behind the proxy (a file cannot hang).
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
import uuid as uuidlib
from contextlib import ExitStack
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import requests
import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from common import (  # noqa: E402
    DEFAULT_POSTGRESQL_SERVER,
    percentile,
    postgresql_database,
    scratch_dir,
    start_corral,
)

from corral.compute.db import api_tables, cell_tables  # noqa: E402
from corral.compute.domain.cell_admin import create_cell  # noqa: E402
from corral.core.db import Database, normalize_url  # noqa: E402
from tests.support.tcp import TcpProxy  # noqa: E402

PROJECT = "bench-project"
TOKEN = f"bench-user:{PROJECT}"
FLAVOR = {"flavorid": "1", "name": "m1.tiny", "memory_mb": 512, "vcpus": 1, "root_gb": 1, "ephemeral_gb": 0,
          "swap": 0, "rxtx_factor": 1.0, "extra_specs": {}}


@dataclass
class Phase:
    name: str
    requests: int
    p50_ms: float
    p95_ms: float
    max_ms: float
    first_ms: float
    full_records: int
    unknown_records: int


def populate(api_url: str, cell_url: str, cell_uuid: str, count: int) -> None:
    """``count`` active servers of PROJECT in one cell, with their mappings and request specs."""
    api_db = Database.from_url(api_url)
    cell_db = Database.from_url(cell_url)
    base = datetime.datetime(2026, 1, 1)
    instances, mappings, specs = [], [], []
    for index in range(count):
        server = str(uuidlib.uuid4())
        created = base + datetime.timedelta(seconds=index)
        instances.append({
            "uuid": server, "project_id": PROJECT, "user_id": "bench-user", "display_name": f"vm-{index}",
            "hostname": f"vm-{index}", "host": "bench-host", "node": "bench-host", "availability_zone": "nova",
            "vm_state": "active", "task_state": None, "power_state": 1, "memory_mb": 512, "vcpus": 1,
            "root_gb": 1, "ephemeral_gb": 0, "flavor": json.dumps(FLAVOR), "flavorid": "1",
            "image_ref": "70a599e0-31e7-49b7-b260-868f441e862b", "locked": False, "deleted": False,
            "launched_at": created, "created_at": created, "updated_at": created,
        })
        mappings.append({"instance_uuid": server, "project_id": PROJECT, "user_id": "bench-user",
                         "queued_for_delete": False, "created_at": created})
        specs.append({"instance_uuid": server, "created_at": created, "spec": json.dumps(
            {"flavor": FLAVOR, "image": {"id": "70a599e0-31e7-49b7-b260-868f441e862b"},
             "user_id": "bench-user", "project_id": PROJECT})})

    def write_api(conn: Any) -> None:
        # SELECT id FROM cell_mappings WHERE uuid = :uuid
        cell_id = conn.execute(
            sa.select(api_tables.cell_mappings.c.id).where(api_tables.cell_mappings.c.uuid == cell_uuid)
        ).scalar_one()
        conn.execute(api_tables.instance_mappings.insert(), [{**m, "cell_id": cell_id} for m in mappings])
        conn.execute(api_tables.request_specs.insert(), specs)

    cell_db.write(lambda conn: conn.execute(cell_tables.instances.insert(), instances))
    api_db.write(write_api)
    api_db.dispose()
    cell_db.dispose()


def measure(url: str, name: str, count: int) -> Phase:
    session = requests.Session()
    session.headers.update({"X-Auth-Token": TOKEN, "OpenStack-API-Version": "compute 2.69"})
    latencies = []
    full = unknown = 0
    for _ in range(count):
        started = time.perf_counter()
        response = session.get(url + "/compute/v2.1/servers/detail", timeout=300)
        latencies.append((time.perf_counter() - started) * 1000)
        response.raise_for_status()
        servers = response.json()["servers"]
        unknown = sum(1 for s in servers if s["status"] == "UNKNOWN")
        full = len(servers) - unknown
    return Phase(name, count, percentile(latencies, 0.5), percentile(latencies, 0.95), max(latencies),
                 latencies[0], full, unknown)


def run(args: argparse.Namespace) -> list[Phase]:
    phases = []
    with ExitStack() as stack:
        workdir = stack.enter_context(scratch_dir("corral-bench-compute-"))
        if args.db == "postgresql":
            api_url = stack.enter_context(postgresql_database(args.postgresql, "api"))
            cell_urls = [stack.enter_context(postgresql_database(args.postgresql, f"cell{i}")) for i in (0, 1, 2)]
        else:
            api_url = f"sqlite:///{workdir}/api.sqlite"
            cell_urls = [f"sqlite:///{workdir}/cell{i}.sqlite" for i in (0, 1, 2)]
        cell3_real = sa.engine.make_url(normalize_url(stack.enter_context(postgresql_database(args.postgresql, "cell3"))))
        proxy = TcpProxy(cell3_real.host or "127.0.0.1", cell3_real.port or 5432)
        stack.callback(proxy.close)
        cell3_url = cell3_real.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)

        def serve(recheck: float) -> Any:
            return start_corral(workdir, {
                "api": {"auth_strategy": "noauth2", "max_limit": args.max_limit},
                "api_database": {"connection": api_url},
                "database": {"connection": cell_urls[1]},
                "compute": {"cell0_connection": cell_urls[0]},
                "cells": {"timeout": args.cell_timeout, "down_cell_recheck_interval": recheck,
                          "connect_timeout": args.cell_timeout},
            }, workers=1, threads=16, ready_path="/compute/")

        server = serve(10.0)
        api_db = Database.from_url(api_url)
        cell2 = create_cell(api_db, name="cell2", database_connection=cell_urls[2])
        cell3 = create_cell(api_db, name="cell3", database_connection=cell3_url)
        with api_db.read() as conn:
            cell1_uuid = conn.execute(
                sa.select(api_tables.cell_mappings.c.uuid).where(api_tables.cell_mappings.c.name == "cell1")
            ).scalar_one()
        api_db.dispose()
        for cell_uuid, url in ((cell1_uuid, cell_urls[1]), (cell2.uuid, cell_urls[2]), (cell3.uuid, cell3_url)):
            populate(api_url, url, cell_uuid, args.instances)
        time.sleep(6)  # the API re-reads cell mappings every 5 seconds
        measure(server.url, "warm-up", 3)
        phases.append(measure(server.url, "healthy", args.requests))
        proxy.hang()
        phases.append(measure(server.url, "cell3 hanging", args.requests))
        proxy.restore()
        server.stop()
        if args.recheck_phase:
            server = serve(0.0)
            measure(server.url, "warm-up", 2)
            proxy.hang()
            phases.append(measure(server.url, "cell3 hanging, recheck window 0", min(args.requests, 5)))
            proxy.restore()
            server.stop()
    return phases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--instances", type=int, default=2000, help="servers per cell")
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--cell-timeout", type=float, default=2.0)
    parser.add_argument("--max-limit", type=int, default=1000)
    parser.add_argument("--db", choices=("postgresql", "sqlite"), default="postgresql")
    parser.add_argument("--postgresql", default=DEFAULT_POSTGRESQL_SERVER)
    parser.add_argument("--no-recheck-phase", dest="recheck_phase", action="store_false")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    phases = run(args)
    print(f"GET /servers/detail, 3 cells x {args.instances} servers, [cells] timeout {args.cell_timeout}s, "
          f"db {args.db}")
    print(f"{'phase':<36} {'first ms':>9} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8} {'full':>6} {'UNKNOWN':>8}")
    for phase in phases:
        print(f"{phase.name:<36} {phase.first_ms:>9.1f} {phase.p50_ms:>8.1f} {phase.p95_ms:>8.1f} "
              f"{phase.max_ms:>8.1f} {phase.full_records:>6} {phase.unknown_records:>8}")
    if args.json:
        args.json.write_text(json.dumps([asdict(p) for p in phases], indent=2))


if __name__ == "__main__":
    main()
