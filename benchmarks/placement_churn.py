"""GET /allocation_candidates while other clients keep changing the topology.

A cloud of N flat compute nodes (VCPU 32 at ratio 4, MEMORY_MB 65536,
DISK_GB 1000 each) is built through the API (concurrent clients), then
the candidates of two query shapes are timed on one ``corral serve``
process (one worker), first with nothing else happening, then while two
other clients write through a second ``corral serve`` process on the same
database: one sets a random provider's VCPU ``reserved`` 20 times a
second, the other sets or clears a random provider's traits 20 times a
second (each kind spread over four clients, so that the rate holds
when writes are slow).  Failed writes (none expected) are counted and
reported.  A control phase makes as many writes that leave the topology
alone (provider renames), to tell the cost of the writes' load on the
machine from the cost of following the topology.  Every such write is a topology change the searching process must
take into account before its next answer.

Usage::

    python benchmarks/placement_churn.py --n 10000 [--db sqlite|postgresql] [--workdir DIR]
        [--repeat 40] [--tree PATH] [--json FILE]

``--workdir`` keeps the cloud (an SQLite file, or the name of the
PostgreSQL database in it) for later runs; ``--tree`` runs the servers
from another checkout of Corral (to compare versions on the same cloud:
build it with the older one, the newer one upgrades the schema).
Results go to stdout as Markdown tables.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import multiprocessing
import os
import random
import sys
import time
import uuid as uuidlib
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import common  # noqa: E402

VERSION = "placement 1.39"
BASE = "resources=VCPU:1,MEMORY_MB:1024,DISK_GB:10"
SHAPES = {"plain": BASE, "limit=1000": BASE + "&limit=1000"}
WRITES_PER_SECOND = 20
# Each kind of write is spread over this many clients (processes), so that
# the rate holds even when one write takes longer than 1/20 s.
CLIENTS_PER_KIND = 4


def provider_uuid(index: int) -> str:
    return str(uuidlib.uuid5(uuidlib.NAMESPACE_DNS, f"churn-cn-{index}"))


# ----------------------------------------------------------------- servers


def start_server(workdir: Path, name: str, db_url: str, tree: Path, *, migrate: bool) -> common.ServerProcess:
    conf = common.write_config(workdir / f"{name}.conf", {
        "placement_database": {"connection": db_url}, "api": {"auth_strategy": "noauth2"},
    })
    port = common.free_port()
    args = [
        sys.executable, "-m", "corral", "serve", "--role", "api", "--port", str(port), "--workers", "1",
        "--threads", "8", "--migrate" if migrate else "--no-migrate", "--config-file", str(conf),
        "--data-dir", str(workdir / f"{name}-data"),
    ]
    env = {"PYTHONPATH": str(tree)}
    server = common.ServerProcess(name, args, f"http://127.0.0.1:{port}", workdir / f"{name}.log", env=env, cwd=tree)
    return server.wait_ready("/placement/")


def server_pids(server: common.ServerProcess) -> list[int]:
    """The server's process and its children (the worker)."""
    pids = [server.process.pid]
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if int(fields[1]) in pids:
                pids.append(int(entry.name))
    return pids


def cpu_seconds(pids: list[int]) -> float:
    """User and system CPU time used so far by ``pids``: unlike latency, not
    inflated by waiting for a CPU that other processes hold."""
    ticks = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def rss_mb(server: common.ServerProcess) -> tuple[float, float]:
    """(current, peak) resident memory of the server's largest process, in MB."""
    pids = server_pids(server)
    current = peak = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    current = max(current, int(line.split()[1]))
                elif line.startswith("VmHWM:"):
                    peak = max(peak, int(line.split()[1]))
        except OSError:
            continue
    return current / 1024, peak / 1024


# ------------------------------------------------------------------- cloud


def session() -> requests.Session:
    http = requests.Session()
    http.headers.update({"X-Auth-Token": "admin", "OpenStack-API-Version": VERSION})
    return http


def build_one(http: requests.Session, base: str, index: int) -> None:
    rp = provider_uuid(index)
    response = http.post(base + "/resource_providers", json={"name": f"churn-cn-{index}", "uuid": rp}, timeout=300)
    if response.status_code == 409:
        return  # built by an earlier, interrupted run
    response.raise_for_status()
    inventories = {
        "VCPU": {"total": 32, "allocation_ratio": 4.0},
        "MEMORY_MB": {"total": 65536},
        "DISK_GB": {"total": 1000},
    }
    body = {"resource_provider_generation": response.json()["generation"], "inventories": inventories}
    http.put(f"{base}/resource_providers/{rp}/inventories", json=body, timeout=300).raise_for_status()


def build(base: str, first: int, n: int, clients: int) -> None:
    """Providers ``first`` to ``n - 1``, by ``clients`` concurrent clients."""

    def work(start: int) -> None:
        http = session()
        for index in range(start, n, clients):
            if index >= first:
                build_one(http, base, index)
        http.close()

    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        for future in [pool.submit(work, start) for start in range(clients)]:
            future.result()


# ------------------------------------------------------------------- churn


def churn(base: str, kind: str, n: int, stop: Any, seed: int, out: Any, epoch: float) -> None:
    """One client's share of ``WRITES_PER_SECOND`` writes of ``kind`` on
    random providers (its own: ``seed`` picks which).

    Every client writes once per period, at its own phase of it (``seed``
    of ``2 * CLIENTS_PER_KIND`` slots, from the shared ``epoch``, a
    ``time.monotonic()`` value): the writes of all clients arrive evenly
    spread in time, not in bursts of one from each client at once."""
    rng = random.Random(seed)
    http = session()
    generations: dict[str, int] = {}
    done = failed = 0
    period = CLIENTS_PER_KIND / WRITES_PER_SECOND
    started = epoch + period * seed / (2 * CLIENTS_PER_KIND)
    while True:
        due = started + done * period
        now = time.monotonic()
        if stop.is_set():
            break
        if due > now:
            time.sleep(due - now)
        # (each client writes its own providers: no two race for one
        # provider's generation)
        rp = provider_uuid(rng.randrange(seed, n, 2 * CLIENTS_PER_KIND))
        if rp not in generations:
            generations[rp] = http.get(f"{base}/resource_providers/{rp}", timeout=60).json()["generation"]
        if kind == "inventory":
            inventories = {
                "VCPU": {"total": 32, "allocation_ratio": 4.0, "reserved": rng.randrange(4)},
                "MEMORY_MB": {"total": 65536},
                "DISK_GB": {"total": 1000},
            }
            body = {"resource_provider_generation": generations[rp], "inventories": inventories}
            response = http.put(f"{base}/resource_providers/{rp}/inventories", json=body, timeout=60)
        elif kind == "traits":
            body = {"resource_provider_generation": generations[rp], "traits": rng.choice([[], ["HW_CPU_X86_AVX2"]])}
            response = http.put(f"{base}/resource_providers/{rp}/traits", json=body, timeout=60)
        else:
            # A write that leaves the topology alone (names are not part of it).
            name = f"renamed-{rp}" if rng.random() < 0.5 else f"other-name-{rp}"
            response = http.put(f"{base}/resource_providers/{rp}", json={"name": name}, timeout=60)
        if response.status_code == 200:
            generations[rp] = response.json().get("resource_provider_generation", response.json().get("generation"))
        else:
            failed += 1
            generations.pop(rp, None)
        done += 1
    out.put((kind, done, failed, time.monotonic() - started))


# ----------------------------------------------------------------- timing


def time_shapes(client: common.KeptAliveClient, repeat: int, pause: float, pids: list[int]) -> dict[str, dict[str, float]]:
    """p50/p95 (ms), candidate count and the server's CPU time per request
    (ms) per shape, the shapes taking turns."""
    latencies: dict[str, list[float]] = {shape: [] for shape in SHAPES}
    cpu: dict[str, float] = dict.fromkeys(SHAPES, 0.0)
    counts: dict[str, int] = {}
    for _round in range(repeat):
        for shape, qs in SHAPES.items():
            used = cpu_seconds(pids)
            status, body, seconds = client.get("/allocation_candidates?" + qs)
            cpu[shape] += cpu_seconds(pids) - used
            if status != 200:
                raise RuntimeError(f"{shape}: {status} {body[:300]!r}")
            latencies[shape].append(seconds)
            counts[shape] = len(json.loads(body)["allocation_requests"])
            # Leave the writers time between searches, as a scheduler does.
            time.sleep(pause)
    return {
        shape: {
            "p50": common.percentile(found, 0.5) * 1000,
            "p95": common.percentile(found, 0.95) * 1000,
            "candidates": counts[shape],
            "cpu": cpu[shape] / len(found) * 1000,
        }
        for shape, found in latencies.items()
    }


# -------------------------------------------------------------------- main


def database_url(stack: ExitStack, args: argparse.Namespace, workdir: Path) -> str:
    if args.db == "sqlite":
        return f"sqlite:///{workdir / f'churn-{args.n}.sqlite'}"
    import sqlalchemy as sa

    name_file = workdir / f"churn-{args.n}.pgname"
    if args.workdir and name_file.exists():
        name = name_file.read_text().strip()
    else:
        name = f"bench_churn_{args.n}_{uuidlib.uuid4().hex[:6]}"
        admin = sa.create_engine(args.postgresql_server, isolation_level="AUTOCOMMIT", poolclass=sa.pool.NullPool)
        with admin.connect() as conn:
            conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
        admin.dispose()
        if args.workdir:
            name_file.write_text(name)
        else:
            stack.callback(_drop_database, args.postgresql_server, name)
    return str(sa.engine.make_url(args.postgresql_server).set(database=name).render_as_string(hide_password=False))


def _drop_database(server_url: str, name: str) -> None:
    import sqlalchemy as sa

    admin = sa.create_engine(server_url, isolation_level="AUTOCOMMIT", poolclass=sa.pool.NullPool)
    with admin.connect() as conn:
        conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


def with_writers(
    client: common.KeptAliveClient, writer: common.ServerProcess, args: argparse.Namespace, kinds: list[str], pids: list[int]
) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, float]]]:
    """The timings while one client per kind writes through ``writer``, and the writes' rates."""
    queue: Any = multiprocessing.Queue()
    stop = multiprocessing.Event()
    # Inventory and trait writers take turns: seeds alternate between the kinds.
    clients = [kind for _client in range(CLIENTS_PER_KIND) for kind in kinds]
    epoch = time.monotonic() + 0.5
    writers = [
        multiprocessing.Process(target=churn, args=(writer.url + "/placement", kind, args.n, stop, seed, queue, epoch))
        for seed, kind in enumerate(clients)
    ]
    for process in writers:
        process.start()
    time.sleep(1)
    timings = time_shapes(client, args.repeat, args.pause, pids)
    stop.set()
    rates: dict[str, dict[str, float]] = {}
    for _process in writers:
        kind, done, failed, spent = queue.get()
        found = rates.setdefault(kind, {"writes": 0, "failed": 0, "per_second": 0.0})
        found["writes"] += done
        found["failed"] += failed
        found["per_second"] += done / spent
    for process in writers:
        process.join()
    return timings, rates


def run(args: argparse.Namespace) -> dict[str, Any]:
    with ExitStack() as stack:
        workdir = Path(args.workdir) if args.workdir else stack.enter_context(common.scratch_dir("bench-churn-"))
        workdir.mkdir(parents=True, exist_ok=True)
        db_url = database_url(stack, args, workdir)
        built_file = workdir / f"churn-{args.n}.{args.db}.built"
        if args.seed_directly and not built_file.exists():
            from benchmarks.placement_snapshot_inprocess import build as seed

            seed(db_url, args.n, lambda i: provider_uuid(i - 1), lambda i: f"churn-cn-{i - 1}")
            built_file.write_text(f"{args.n}\n")
        search = start_server(workdir, "search", db_url, args.tree, migrate=True)
        stack.callback(search.stop)
        base = search.url + "/placement"
        built = int(built_file.read_text()) if built_file.exists() else 0
        build_seconds = None
        if built < args.n:
            print(f"building {args.n - built} compute nodes ...", file=sys.stderr, flush=True)
            began = time.monotonic()
            build(base, built, args.n, args.build_clients)
            build_seconds = time.monotonic() - began
            built_file.write_text(str(args.n))
        writer = start_server(workdir, "writer", db_url, args.tree, migrate=False)
        stack.callback(writer.stop)
        client = common.KeptAliveClient(base, {"X-Auth-Token": "admin", "OpenStack-API-Version": VERSION})
        pids = server_pids(search)
        # The first answer reads the whole topology.
        status, _body, first = client.get("/allocation_candidates?" + BASE)
        assert status == 200
        print("timing without churn ...", file=sys.stderr, flush=True)
        quiet = time_shapes(client, args.repeat, args.pause, pids)
        print("timing while other writes happen ...", file=sys.stderr, flush=True)
        control, control_rates = with_writers(client, writer, args, ["rename", "renames"], pids)
        print("timing with churn ...", file=sys.stderr, flush=True)
        busy, rates = with_writers(client, writer, args, ["inventory", "traits"], pids)
        current, peak = rss_mb(search)
        return {
            "n": args.n, "db": args.db, "build_seconds": build_seconds, "first_answer_ms": first * 1000,
            "quiet": quiet, "control": control, "control_rates": control_rates, "churn": busy, "churn_rates": rates, "rss_mb": current, "peak_rss_mb": peak,
        }


def _rate(rates: dict[str, dict[str, float]]) -> str:
    failed = sum(int(r["failed"]) for r in rates.values())
    return ", ".join(f"{kind} {r['per_second']:.1f}/s" for kind, r in rates.items()) + f", {failed} failed"


def report(result: dict[str, Any], label: str) -> None:
    print(f"\n{label}N = {result['n']}, {result['db']}: GET /allocation_candidates (1.39), one server process. "
          f"Writes through another process: topology churn ({_rate(result['churn_rates'])}); "
          f"control, writes that leave the topology alone ({_rate(result['control_rates'])})\n")
    print("| query | candidates | no churn p50 / p95 | control p50 / p95 | churn p50 / p95 | churn/no churn (p50) |"
          " churn/control (p50) | server CPU per request: no churn / control / churn |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for shape in SHAPES:
        quiet, control, busy = result["quiet"][shape], result["control"][shape], result["churn"][shape]
        print(f"| {shape} | {quiet['candidates']} | {quiet['p50']:.1f} / {quiet['p95']:.1f} ms | "
              f"{control['p50']:.1f} / {control['p95']:.1f} ms | {busy['p50']:.1f} / {busy['p95']:.1f} ms | "
              f"{busy['p50'] / quiet['p50']:.2f}x | {busy['p50'] / control['p50']:.2f}x | "
              f"{quiet['cpu']:.1f} / {control['cpu']:.1f} / {busy['cpu']:.1f} ms |")
    build = f"{result['build_seconds']:.0f} s" if result["build_seconds"] is not None else "(not timed: reused, or written straight into the database)"
    print(f"\nbuild through the API: {build}; first answer (whole topology read): "
          f"{result['first_answer_ms']:.0f} ms; server RSS {result['rss_mb']:.0f} MB (peak {result['peak_rss_mb']:.0f} MB)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=10000)
    parser.add_argument("--db", choices=["sqlite", "postgresql"], default="sqlite")
    parser.add_argument("--postgresql-server", default=common.DEFAULT_POSTGRESQL_SERVER)
    parser.add_argument("--workdir", help="keep the cloud here and reuse it in later runs")
    parser.add_argument("--tree", type=Path, default=common.REPO, help="checkout of Corral to run the servers from")
    parser.add_argument("--repeat", type=int, default=40, help="requests per shape and phase")
    parser.add_argument("--pause", type=float, default=0.05, help="seconds between timed requests")
    parser.add_argument("--build-clients", type=int, default=8)
    parser.add_argument("--seed-directly", action="store_true",
                        help="write the cloud straight into the database instead of through the API (large N)")
    parser.add_argument("--label", default="")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args(argv)
    args.tree = args.tree.resolve()
    result = run(args)
    report(result, args.label + (": " if args.label else ""))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
