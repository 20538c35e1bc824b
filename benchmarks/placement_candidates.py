"""GET /allocation_candidates: Corral against upstream openstack-placement.

Builds the same cloud through each service's HTTP API, then times a set of
query shapes and prints p50/p95 latencies, the number of candidates each
service returned (a cross-check) and the peak memory of the server.

The cloud for N compute nodes:

* 70 % flat compute nodes (VCPU 32 at ratio 4, MEMORY_MB 65536, DISK_GB
  1000), 30 % with two NUMA children holding VCPU 16 and MEMORY_MB 32768;
* 10 % of the compute nodes without local disk, sharing DISK_GB from one of
  N/500 sharing providers (MISC_SHARES_VIA_AGGREGATE) through an aggregate;
* half with HW_CPU_X86_AVX2; 5 % in a "reserved" aggregate and 5 % in a
  "windows" aggregate (the forbidden ones);
* one consumer using 2 VCPU and 2048 MEMORY_MB on 20 % of them.

Usage::

    python benchmarks/placement_candidates.py --n 1000 --n 10000 \\
        [--db sqlite|postgresql] [--upstream /work/venvs/placement] [--repeat 20] [--workdir DIR]

Corral runs as ``corral serve`` (one worker process); upstream runs under
gunicorn from the given virtualenv (one sync worker).  Both on the same
kind of database, both clouds built at the same time, and the timed
requests alternate between the two servers so that both see the same
machine load.  The timed requests use Python's http.client over a kept-alive
connection (requests itself spends about 2 ms reading a 1 MB answer).  With ``--workdir`` the databases are kept and a cloud built
by an earlier run is reused.  Results go to stdout as a Markdown table (and
to ``--json`` if given).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid as uuidlib
from dataclasses import dataclass, field
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import common  # noqa: E402

VERSION = "placement 1.39"
ROOT = Path(__file__).resolve().parent.parent
PG_URL = os.environ.get("CORRAL_BENCH_POSTGRESQL_URL", "postgresql://postgres@127.0.0.1:5432/postgres")


def agg(name: str) -> str:
    return str(uuidlib.uuid5(uuidlib.NAMESPACE_DNS, f"bench-agg-{name}"))


RESERVED, WINDOWS = agg("reserved"), agg("windows")
BASE = "resources=VCPU:1,MEMORY_MB:1024,DISK_GB:10"
SHAPES = {
    "plain": BASE,
    "required trait": BASE + "&required=HW_CPU_X86_AVX2",
    "forbidden !agg": BASE + f"&member_of=!{RESERVED}",
    "forbidden !in:a,b": BASE + f"&member_of=!in:{RESERVED},{WINDOWS}",
    "limit=10": BASE + "&limit=10",
    "granular (nested)": "resources=DISK_GB:10&resources_NUMA=VCPU:2,MEMORY_MB:512&group_policy=none",
    "granular isolate": "resources1=VCPU:1&resources2=VCPU:1&group_policy=isolate",
}


# ------------------------------------------------------------------ servers


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Server:
    name: str
    url: str
    process: subprocess.Popen
    workdir: Path

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)

    def peak_rss_mb(self) -> float:
        """Largest peak RSS among the server's processes (the worker)."""
        pids = _process_tree(self.process.pid)
        peak = 0
        for pid in pids:
            try:
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith("VmHWM:"):
                        peak = max(peak, int(line.split()[1]))
            except OSError:
                continue
        return peak / 1024


def _process_tree(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def wait_ready(url: str, process: subprocess.Popen, log: Path) -> None:
    deadline = time.time() + 120
    while time.time() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited:\n{log.read_text()[-3000:]}")
        try:
            if requests.get(url + "/", timeout=2).status_code == 200:
                return
        except requests.RequestException:
            pass
        time.sleep(0.3)
    raise RuntimeError(f"server not ready:\n{log.read_text()[-3000:]}")


def new_database(kind: str, workdir: Path, label: str) -> tuple[str, str]:
    """(SQLAlchemy URL for Corral, URL for upstream) of a fresh database."""
    if kind == "sqlite":
        path = workdir / f"{label}.sqlite"
        return f"sqlite:///{path}", f"sqlite:///{path}"
    import psycopg

    name = f"corral_bench_{label}_{os.getpid()}"
    with psycopg.connect(PG_URL.replace("postgresql+psycopg://", "postgresql://"), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    base = PG_URL.rsplit("/", 1)[0].split("://", 1)[1]
    return f"postgresql+psycopg://{base}/{name}", f"postgresql+psycopg2://{base}/{name}"


def start_corral(db_url: str, workdir: Path) -> Server:
    port = free_port()
    conf = workdir / "corral.conf"
    conf.write_text(f"[api]\nauth_strategy = noauth2\n[placement_database]\nconnection = {db_url}\n")
    log = workdir / "corral.log"
    process = subprocess.Popen(
        [sys.executable, "-m", "corral", "serve", "--role", "api", "--port", str(port), "--workers", "1",
         "--threads", "8", "--migrate", "--config-file", str(conf), "--data-dir", str(workdir / "data")],
        cwd=ROOT, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}/placement"
    wait_ready(url, process, log)
    return Server("corral", url, process, workdir)


def start_upstream(venv: Path, db_url: str, workdir: Path) -> Server:
    port = free_port()
    (workdir / "placement.conf").write_text(
        f"[DEFAULT]\ndebug = False\n[api]\nauth_strategy = noauth2\n[placement_database]\nconnection = {db_url}\n"
    )
    env = dict(os.environ, OS_PLACEMENT_CONFIG_DIR=str(workdir))
    subprocess.run(
        [str(venv / "bin" / "placement-manage"), "--config-file", str(workdir / "placement.conf"), "db", "sync"],
        check=True, env=env, cwd=workdir, capture_output=True,
    )
    log = workdir / "upstream.log"
    process = subprocess.Popen(
        [str(venv / "bin" / "gunicorn"), "-w", "1", "-b", f"127.0.0.1:{port}", "--timeout", "600",
         "placement.wsgi.api:application"],
        env=env, cwd=workdir, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    wait_ready(url, process, log)
    return Server("upstream", url, process, workdir)


# ------------------------------------------------------------ the cloud


class Client:
    def __init__(self, url: str) -> None:
        self.url = url
        self.session = requests.Session()
        self.session.headers.update(
            {"X-Auth-Token": "admin", "OpenStack-API-Version": VERSION, "Content-Type": "application/json"}
        )

    def call(self, method: str, path: str, body: object = None) -> dict:
        response = self.session.request(method, self.url + path, data=None if body is None else json.dumps(body))
        if response.status_code >= 300:
            raise RuntimeError(f"{method} {path}: {response.status_code} {response.text[:500]}")
        return response.json() if response.content else {}


def _provider(client: Client, name: str, parent: str | None = None) -> tuple[str, int]:
    rp_uuid = str(uuidlib.uuid5(uuidlib.NAMESPACE_DNS, f"bench-rp-{name}"))
    body: dict[str, object] = {"name": name, "uuid": rp_uuid}
    if parent:
        body["parent_provider_uuid"] = parent
    created = client.call("POST", "/resource_providers", body)
    return rp_uuid, created["generation"]


def _inventory(client: Client, rp: str, generation: int, inventories: dict[str, dict]) -> int:
    body = {"resource_provider_generation": generation, "inventories": inventories}
    return client.call("PUT", f"/resource_providers/{rp}/inventories", body)["resource_provider_generation"]


def _traits(client: Client, rp: str, generation: int, traits: list[str]) -> int:
    body = {"resource_provider_generation": generation, "traits": traits}
    return client.call("PUT", f"/resource_providers/{rp}/traits", body)["resource_provider_generation"]


def _aggregates(client: Client, rp: str, generation: int, aggregates: list[str]) -> int:
    body = {"resource_provider_generation": generation, "aggregates": aggregates}
    return client.call("PUT", f"/resource_providers/{rp}/aggregates", body)["resource_provider_generation"]


def build_compute_node(client: Client, index: int, shares: int) -> None:
    rng = random.Random(index)
    nested = rng.random() < 0.3
    diskless = rng.random() < 0.1
    avx = rng.random() < 0.5
    roll = rng.random()
    allocate = rng.random() < 0.2
    root, gen = _provider(client, f"cn{index}")
    inventories: dict[str, dict] = {}
    if not diskless:
        inventories["DISK_GB"] = {"total": 1000}
    if not nested:
        inventories["VCPU"] = {"total": 32, "allocation_ratio": 4.0}
        inventories["MEMORY_MB"] = {"total": 65536}
    if inventories:
        gen = _inventory(client, root, gen, inventories)
    if avx:
        gen = _traits(client, root, gen, ["HW_CPU_X86_AVX2"])
    aggregates = []
    if diskless:
        aggregates.append(agg(f"storage{index % shares}"))
    if roll < 0.05:
        aggregates.append(RESERVED)
    elif roll < 0.10:
        aggregates.append(WINDOWS)
    if aggregates:
        gen = _aggregates(client, root, gen, aggregates)
    target = root
    if nested:
        for numa in range(2):
            child, child_gen = _provider(client, f"cn{index}_numa{numa}", parent=root)
            child_gen = _inventory(
                client, child, child_gen,
                {"VCPU": {"total": 16, "allocation_ratio": 4.0}, "MEMORY_MB": {"total": 32768}},
            )
            if avx:
                _traits(client, child, child_gen, ["HW_CPU_X86_AVX2"])
            if numa == 0:
                target = child
    if allocate:
        consumer = str(uuidlib.uuid5(uuidlib.NAMESPACE_DNS, f"bench-consumer-{index}"))
        body = {
            "allocations": {target: {"resources": {"VCPU": 2, "MEMORY_MB": 2048}}},
            "project_id": "bench", "user_id": "bench", "consumer_generation": None, "consumer_type": "INSTANCE",
        }
        client.call("PUT", f"/allocations/{consumer}", body)


def build_cloud(url: str, n: int, threads: int = 8) -> float:
    started = time.perf_counter()
    client = Client(url)
    shares = max(1, n // 500)
    for index in range(shares):
        rp, gen = _provider(client, f"ss{index}")
        gen = _inventory(client, rp, gen, {"DISK_GB": {"total": 100000}})
        gen = _traits(client, rp, gen, ["MISC_SHARES_VIA_AGGREGATE"])
        _aggregates(client, rp, gen, [agg(f"storage{index}")])
    clients = [Client(url) for _ in range(threads)]
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        futures = [pool.submit(build_compute_node, clients[i % threads], i, shares) for i in range(n)]
        for future in futures:
            future.result()
    return time.perf_counter() - started


# ------------------------------------------------------------ measuring


@dataclass
class Timing:
    samples: list[float] = field(default_factory=list)
    candidates: int = 0
    nbytes: int = 0

    @property
    def p50(self) -> float:
        return statistics.median(self.samples) * 1000

    @property
    def p95(self) -> float:
        ordered = sorted(self.samples)
        return ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))] * 1000


def measure(servers: dict[str, Server], repeat: int, budget: float) -> dict[str, dict[str, Timing]]:
    """Time every shape on every server, alternating between servers request by
    request so that both see the same machine load."""
    clients = {
        name: common.KeptAliveClient(server.url, {"X-Auth-Token": "admin", "OpenStack-API-Version": VERSION})
        for name, server in servers.items()
    }
    results: dict[str, dict[str, Timing]] = {name: {} for name in servers}
    for shape, qs in SHAPES.items():
        spent = dict.fromkeys(servers, 0.0)
        for name in servers:
            results[name][shape] = Timing()
        for attempt in range(repeat + 1):
            for name, client in clients.items():
                timing = results[name][shape]
                if attempt and spent[name] > budget and len(timing.samples) >= 3:
                    continue
                status, body, elapsed = client.get(f"/allocation_candidates?{qs}")
                if status != 200:
                    raise RuntimeError(f"{name} {shape}: {status} {body[:300]!r}")
                if attempt == 0:  # warm-up
                    timing.candidates = len(json.loads(body)["allocation_requests"])
                    timing.nbytes = len(body)
                else:
                    timing.samples.append(elapsed)
                spent[name] += elapsed
    return results


def start(system: str, n: int, args: argparse.Namespace, workdir: Path) -> tuple[Server, bool]:
    """A server for ``system`` and whether its cloud is already built (reused)."""
    home = workdir / f"{system}-{n}"
    built = (home / "built").exists()
    home.mkdir(parents=True, exist_ok=True)
    if built:
        corral_url, upstream_url = (home / "urls").read_text().split()
    else:
        corral_url, upstream_url = new_database(args.db, home, f"{system}{n}")
        (home / "urls").write_text(f"{corral_url} {upstream_url}")
    if system == "corral":
        return start_corral(corral_url, home), built
    return start_upstream(Path(args.upstream), upstream_url, home), built


def run(n: int, systems: list[str], args: argparse.Namespace) -> dict[str, dict[str, object]]:
    workdir = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix=f"bench-candidates-{n}-"))
    servers: dict[str, Server] = {}
    try:
        reused = {}
        for system in systems:
            servers[system], reused[system] = start(system, n, args, workdir)
        build_seconds: dict[str, float] = {}

        def build(system: str) -> None:
            marker = workdir / f"{system}-{n}" / "built"
            if reused[system]:
                build_seconds[system] = float(json.loads(marker.read_text()))
                return
            build_seconds[system] = build_cloud(servers[system].url, n)
            marker.write_text(json.dumps(build_seconds[system]))
            print(f"# {system} N={n}: cloud built through the API in {build_seconds[system]:.0f} s", file=sys.stderr)

        with concurrent.futures.ThreadPoolExecutor(len(systems)) as pool:
            for future in [pool.submit(build, system) for system in systems]:
                future.result()
        timings = measure(servers, args.repeat, args.budget)
        return {
            system: {
                "build_seconds": build_seconds[system],
                "peak_rss_mb": servers[system].peak_rss_mb(),
                "shapes": {
                    shape: {
                        "p50_ms": t.p50, "p95_ms": t.p95, "candidates": t.candidates, "bytes": t.nbytes,
                        "runs": len(t.samples),
                    }
                    for shape, t in timings[system].items()
                },
            }
            for system in systems
        }
    finally:
        for server in servers.values():
            server.stop()
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)


def table(results: dict[str, dict[int, dict]], db: str) -> str:
    lines = [
        f"Database: {db}.  Latency of GET /allocation_candidates at microversion 1.39, client side "
        "(http.client, one kept-alive connection per server), sequential requests.",
        "",
        "| N | query shape | candidates | Corral p50 | Corral p95 | upstream p50 | upstream p95 | speed-up (p50) |",
        "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for n in sorted(results.get("corral", {}) or results.get("upstream", {})):
        ours = results.get("corral", {}).get(n)
        theirs = results.get("upstream", {}).get(n)
        for shape in SHAPES:
            mine = ours["shapes"][shape] if ours else None
            other = theirs["shapes"][shape] if theirs else None
            count = str(mine["candidates"]) if mine else "-"
            if mine and other and other["candidates"] != mine["candidates"]:
                count += f" (upstream {other['candidates']})"
            ratio = f"{other['p50_ms'] / mine['p50_ms']:.1f}x" if mine and other else "-"
            lines.append(
                f"| {n} | {shape} | {count} | "
                + (f"{mine['p50_ms']:.1f} ms | {mine['p95_ms']:.1f} ms | " if mine else "- | - | ")
                + (f"{other['p50_ms']:.1f} ms | {other['p95_ms']:.1f} ms | " if other else "- | - | ")
                + f"{ratio} |"
            )
    lines.append("")
    lines.append("| N | server | peak RSS | cloud build through the API |")
    lines.append("| ---: | --- | ---: | ---: |")
    for system in ("corral", "upstream"):
        for n, found in sorted(results.get(system, {}).items()):
            lines.append(f"| {n} | {system} | {found['peak_rss_mb']:.0f} MB | {found['build_seconds']:.0f} s |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, action="append", help="compute nodes (repeatable); default 1000")
    parser.add_argument("--db", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--upstream", help="virtualenv with openstack-placement and gunicorn")
    parser.add_argument("--skip-corral", action="store_true")
    parser.add_argument("--repeat", type=int, default=20, help="timed runs per shape (after one warm-up)")
    parser.add_argument("--budget", type=float, default=60.0, help="seconds per shape before stopping early")
    parser.add_argument("--json", help="write the raw results here")
    parser.add_argument("--workdir", help="keep databases here; a cloud already built there is reused")
    parser.add_argument("--previous", help="results of an earlier run (--json) to include in the table")
    args = parser.parse_args()
    sizes = args.n or [1000]
    systems = ([] if args.skip_corral else ["corral"]) + (["upstream"] if args.upstream else [])
    results: dict[str, dict[int, dict]] = {}
    if args.previous:
        for system, by_n in json.loads(Path(args.previous).read_text()).items():
            results[system] = {int(n): found for n, found in by_n.items()}
    for n in sizes:
        for system, found in run(n, systems, args).items():
            results.setdefault(system, {})[n] = found
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=2))
    print(table(results, args.db))


if __name__ == "__main__":
    main()
