"""Placement claims per second: concurrent writers until every provider is full.

Each writer is a thread with its own HTTP session.  It repeatedly picks a
provider at random among those not yet known to be full and claims one
unit of work on it for a brand-new consumer::

    PUT /allocations/{new uuid}          (OpenStack-API-Version: placement 1.39)
    {"allocations": {rp: {"resources": {"VCPU": 1, "MEMORY_MB": 256}}},
     "consumer_generation": null, "consumer_type": "INSTANCE",
     "project_id": ..., "user_id": ...}

A 409 ``placement.concurrent_update`` (another writer changed the provider
or consumer first) is counted and the writer goes on; any other 409 means
the provider is out of capacity and is taken off the shared list.  The run
ends when no provider has room left.  Afterwards the benchmark reads every
provider's usages and allocations back and checks that none is over
capacity, that every provider is exactly full, and that every 204 is
there (no lost or phantom claims).

The same workload runs against Corral (``corral serve``) and upstream
openstack-placement (its WSGI application under gunicorn, from a venv),
each on a fresh database of the same type, with the same gunicorn worker
and thread counts, and the two are printed side by side::

    python benchmarks/placement_claims.py                       # SQLite
    python benchmarks/placement_claims.py --backend postgresql  # fresh databases on a local server
    python benchmarks/placement_claims.py --target corral --url http://127.0.0.1:6385/placement
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import threading
import time
import uuid
from collections import Counter
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import common  # noqa: E402

VERSION = "placement 1.39"
CONCURRENT_UPDATE = "placement.concurrent_update"
UPSTREAM_VENV = Path("/work/venvs/placement")
# Unexpected answers (5xx) are counted and the writer tries again, up to this
# many in all, or this many in a row (a server that fails every claim).
MAX_ERRORS_PER_WRITER = 2000
MAX_ERRORS_IN_A_ROW = 100


@dataclass
class Workload:
    writers: int
    providers: int
    vcpus: int
    memory_mb: int
    claim_vcpus: int = 1
    claim_memory_mb: int = 256

    @property
    def claims_per_provider(self) -> int:
        return min(self.vcpus // self.claim_vcpus, self.memory_mb // self.claim_memory_mb)


@dataclass
class Result:
    label: str
    backend: str
    writers: int
    claims: int = 0
    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)
    capacity_409: int = 0
    conflict_409: int = 0
    other_errors: Counter[str] = field(default_factory=Counter)
    problems: list[str] = field(default_factory=list)
    server_log: str = ""

    @property
    def rate(self) -> float:
        return self.claims / self.seconds if self.seconds else 0.0


def session(base_url: str) -> requests.Session:
    http = requests.Session()
    http.headers.update({"X-Auth-Token": "admin", "OpenStack-API-Version": VERSION})
    http.base_url = base_url.rstrip("/")  # type: ignore[attr-defined]
    return http


def call(http: requests.Session, method: str, path: str, **kwargs: Any) -> requests.Response:
    return http.request(method, http.base_url + path, timeout=120, **kwargs)  # type: ignore[attr-defined]


def create_providers(base_url: str, workload: Workload, run: str) -> list[str]:
    http = session(base_url)
    uuids = []
    for index in range(workload.providers):
        rp = str(uuid.uuid4())
        response = call(http, "POST", "/resource_providers", json={"name": f"bench-{run}-{index}", "uuid": rp})
        response.raise_for_status()
        inventories = {
            "VCPU": {"total": workload.vcpus},
            "MEMORY_MB": {"total": workload.memory_mb},
        }
        body = {"resource_provider_generation": 0, "inventories": inventories}
        call(http, "PUT", f"/resource_providers/{rp}/inventories", json=body).raise_for_status()
        uuids.append(rp)
    http.close()
    return uuids


class OpenProviders:
    """Providers that may still have room, shared by all writers."""

    def __init__(self, uuids: list[str]) -> None:
        self._open = list(uuids)
        self._lock = threading.Lock()

    def pick(self, rng: random.Random) -> str | None:
        with self._lock:
            return rng.choice(self._open) if self._open else None

    def close(self, rp: str) -> None:
        with self._lock:
            if rp in self._open:
                self._open.remove(rp)


def writer(base_url: str, workload: Workload, providers: OpenProviders, seed: int, out: Result,
           claimed: list[str], lock: threading.Lock, start: threading.Barrier) -> None:
    http = common.KeptAliveClient(base_url, {
        "X-Auth-Token": "admin", "OpenStack-API-Version": VERSION, "Content-Type": "application/json",
    }, timeout=120)
    rng = random.Random(seed)
    resources = {"VCPU": workload.claim_vcpus, "MEMORY_MB": workload.claim_memory_mb}
    latencies: list[float] = []
    mine: list[str] = []
    capacity = conflicts = in_a_row = 0
    errors: Counter[str] = Counter()
    http.connection.connect()  # before the clock starts
    start.wait()
    while (rp := providers.pick(rng)) is not None:
        consumer = str(uuid.uuid4())
        body = {
            "allocations": {rp: {"resources": resources}},
            "project_id": f"project-{seed % 4}",
            "user_id": f"user-{seed}",
            "consumer_generation": None,
            "consumer_type": "INSTANCE",
        }
        status, answer, elapsed = http.request("PUT", f"/allocations/{consumer}", json.dumps(body).encode())
        in_a_row = in_a_row + 1 if status >= 500 else 0
        if status == 204:
            latencies.append(elapsed)
            mine.append(consumer)
        elif status == 409 and _error_code(answer) == CONCURRENT_UPDATE:
            conflicts += 1
        elif status == 409:
            capacity += 1
            providers.close(rp)
        else:
            errors[f"{status} {answer[:120]!r}"] += 1
            if sum(errors.values()) > MAX_ERRORS_PER_WRITER or in_a_row > MAX_ERRORS_IN_A_ROW:
                break
    http.close()
    with lock:
        out.latencies.extend(latencies)
        out.claims += len(mine)
        out.capacity_409 += capacity
        out.conflict_409 += conflicts
        out.other_errors.update(errors)
        claimed.extend(mine)


def _error_code(answer: bytes) -> str | None:
    try:
        return json.loads(answer)["errors"][0].get("code")
    except (ValueError, KeyError, IndexError, TypeError):
        return None


def run_claims(label: str, backend: str, base_url: str, workload: Workload, seed: int = 1) -> Result:
    run = uuid.uuid4().hex[:8]
    uuids = create_providers(base_url, workload, run)
    result = Result(label, backend, workload.writers)
    providers = OpenProviders(uuids)
    claimed: list[str] = []
    lock = threading.Lock()
    start = threading.Barrier(workload.writers + 1)
    threads = [
        threading.Thread(target=writer, args=(base_url, workload, providers, seed * 1000 + n, result,
                                              claimed, lock, start), name=f"writer-{n}")
        for n in range(workload.writers)
    ]
    for thread in threads:
        thread.start()
    start.wait()
    began = time.perf_counter()
    for thread in threads:
        thread.join()
    result.seconds = time.perf_counter() - began
    result.problems = verify(base_url, workload, uuids, claimed)
    return result


def verify(base_url: str, workload: Workload, uuids: list[str], claimed: list[str]) -> list[str]:
    """What is wrong with the providers' final state (empty when all is well)."""
    http = session(base_url)
    problems: list[str] = []
    per_provider = workload.claims_per_provider
    stored: set[str] = set()
    for rp in uuids:
        usages = call(http, "GET", f"/resource_providers/{rp}/usages").json()["usages"]
        allocations = call(http, "GET", f"/resource_providers/{rp}/allocations").json()["allocations"]
        stored.update(allocations)
        limits = {"VCPU": workload.vcpus, "MEMORY_MB": workload.memory_mb}
        for rc, limit in limits.items():
            if usages.get(rc, 0) > limit:
                problems.append(f"{rp} over capacity: {rc} {usages[rc]} > {limit}")
        if usages.get("VCPU", 0) != per_provider * workload.claim_vcpus:
            problems.append(f"{rp} not full: VCPU {usages.get('VCPU', 0)} of {per_provider * workload.claim_vcpus}")
        if len(allocations) != per_provider:
            problems.append(f"{rp} holds {len(allocations)} consumers, expected {per_provider}")
    lost = set(claimed) - stored
    phantom = stored - set(claimed)
    if lost:
        problems.append(f"{len(lost)} claims answered 204 but are not stored")
    if phantom:
        problems.append(f"{len(phantom)} stored claims were never answered 204")
    for consumer in random.Random(0).sample(claimed, min(20, len(claimed))):
        body = call(http, "GET", f"/allocations/{consumer}").json()
        if body.get("consumer_generation") != 1:
            problems.append(f"consumer {consumer} has generation {body.get('consumer_generation')}, expected 1")
    http.close()
    return problems


# ----------------------------------------------------------------- servers


def corral_sections(db_url: str, metrics: bool = False) -> dict[str, dict[str, Any]]:
    sections: dict[str, dict[str, Any]] = {"placement_database": {"connection": db_url},
                                           "api": {"auth_strategy": "noauth2"}}
    if metrics:
        # Metrics counted and served (on a port of their own), to measure what they cost.
        sections["metrics"] = {"listen": f"127.0.0.1:{common.free_port()}"}
    return sections


@dataclass
class Target:
    label: str
    base_url: str
    server: common.ServerProcess | None = None


def start_target(stack: ExitStack, target: str, backend: str, args: argparse.Namespace) -> Target:
    """Start ``target`` on a fresh database of type ``backend``; stopped when ``stack`` closes."""
    workdir = stack.enter_context(common.scratch_dir(f"bench-{target}-"))
    if args.db_url and target == "corral":
        db_url = args.db_url
    elif args.upstream_db_url and target == "upstream":
        db_url = args.upstream_db_url
    elif backend == "postgresql":
        db_url = stack.enter_context(common.postgresql_database(args.postgresql_server, target))
    else:
        db_url = f"sqlite:///{workdir / 'placement.sqlite'}"
    if target == "corral":
        server = common.start_corral(workdir, corral_sections(db_url, args.metrics), workers=args.workers,
                                     threads=args.threads, ready_path="/placement/")
        stack.callback(server.stop)
        return Target(target, server.url + "/placement", server)
    # Upstream Placement needs psycopg2: it reads cursor.lastrowid, which psycopg 3 lacks.
    db_url = db_url.replace("postgresql+psycopg://", "postgresql+psycopg2://", 1)
    server = common.start_upstream_placement(workdir, args.upstream_venv, db_url,
                                             workers=args.workers, threads=args.threads)
    stack.callback(server.stop)
    return Target(target, server.url, server)


def measure(targets: list[Target], backend: str, workloads: list[Workload], repeat: int) -> list[Result]:
    """Best of ``repeat`` runs per target and writer count, the targets taking turns.

    Taking turns spreads any load from elsewhere on the machine over both
    servers; a run that leaves a wrong final state is kept in the report
    whatever its speed.
    """
    best: dict[tuple[str, int], Result] = {}
    for round_number in range(repeat):
        for workload in workloads:
            for target in targets:
                print(f"{target.label}, {workload.writers} writers, run {round_number + 1}/{repeat} ...",
                      file=sys.stderr, flush=True)
                result = run_claims(target.label, backend, target.base_url, workload)
                if result.other_errors and target.server is not None:
                    result.server_log = "\n".join(target.server.error_lines())
                key = (target.label, workload.writers)
                kept = best.get(key)
                if kept is None or _worse(kept, result):
                    best[key] = result
    return [best[(target.label, workload.writers)] for target in targets for workload in workloads]


def _worse(kept: Result, new: Result) -> bool:
    if bool(kept.problems) != bool(new.problems):
        return not kept.problems
    return new.rate > kept.rate


def report(results: list[Result], workload: Workload, markdown: bool) -> None:
    header = ["server", "database", "writers", "claims", "seconds", "claims/s", "p50 ms", "p95 ms",
              "409 full", "409 conflict", "other errors", "final state"]
    rows = []
    for r in results:
        p50 = common.percentile(r.latencies, 0.50) * 1000
        p95 = common.percentile(r.latencies, 0.95) * 1000
        state = "ok" if not r.problems else f"{len(r.problems)} problems"
        rows.append([r.label, r.backend, str(r.writers), str(r.claims), f"{r.seconds:.2f}", f"{r.rate:.0f}", f"{p50:.1f}",
                     f"{p95:.1f}", str(r.capacity_409), str(r.conflict_409), str(sum(r.other_errors.values())),
                     state])
    print(f"\n{workload.providers} providers x {workload.claims_per_provider} claims "
          f"(VCPU={workload.vcpus}, MEMORY_MB={workload.memory_mb}; each claim VCPU={workload.claim_vcpus}, "
          f"MEMORY_MB={workload.claim_memory_mb})")
    if markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "|".join("---" for _ in header) + "|")
        for row in rows:
            print("| " + " | ".join(row) + " |")
    else:
        widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(header)]
        print("  ".join(h.rjust(w) for h, w in zip(header, widths)))
        for row in rows:
            print("  ".join(c.rjust(w) for c, w in zip(row, widths)))
    pairs: dict[tuple[str, int], dict[str, Result]] = {}
    for r in results:
        pairs.setdefault((r.backend, r.writers), {})[r.label] = r
    for (backend, writers), pair in pairs.items():
        if "corral" in pair and "upstream" in pair and pair["upstream"].rate:
            ratio = pair["corral"].rate / pair["upstream"].rate
            print(f"{backend}, {writers} writers: corral/upstream claims/s = {ratio:.2f}x")
    for r in results:
        for problem in r.problems[:10]:
            print(f"{r.label}/{r.backend}: {problem}")
        for error, count in r.other_errors.most_common(5):
            print(f"{r.label}/{r.backend}: {count} x {error}")
        if r.server_log:
            print(f"--- errors in the {r.label} server log ---\n{r.server_log}", file=sys.stderr)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", choices=["corral", "upstream", "both"], default="both")
    parser.add_argument("--backend", choices=["sqlite", "postgresql"], default="sqlite",
                        help="database type for servers this benchmark starts (fresh databases)")
    parser.add_argument("--postgresql-server", default=common.DEFAULT_POSTGRESQL_SERVER,
                        help="server on which fresh PostgreSQL databases are created and dropped")
    parser.add_argument("--db-url", help="Corral's database (instead of a fresh one)")
    parser.add_argument("--upstream-db-url", help="upstream Placement's database (instead of a fresh one)")
    parser.add_argument("--url", help="benchmark this already-running Placement endpoint (one target)")
    parser.add_argument("--upstream-venv", type=Path, default=UPSTREAM_VENV)
    parser.add_argument("--writers", default="1,8",
                        help="comma-separated writer counts; each is one run on fresh providers")
    parser.add_argument("--providers", type=int, default=10)
    parser.add_argument("--vcpus", type=int, default=100, help="VCPU inventory per provider")
    parser.add_argument("--memory-mb", type=int, default=100 * 256, help="MEMORY_MB inventory per provider")
    parser.add_argument("--workers", type=int, default=1, help="gunicorn workers for both servers")
    parser.add_argument("--threads", type=int, default=16, help="gunicorn threads per worker for both servers")
    parser.add_argument("--repeat", type=int, default=1, help="runs per target and writer count; the best is shown")
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    parser.add_argument("--metrics", action="store_true", help="Corral counts and serves Prometheus metrics")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    workloads = [Workload(int(n), args.providers, args.vcpus, args.memory_mb) for n in args.writers.split(",")]
    with ExitStack() as stack:
        if args.url:
            targets = [Target("upstream" if args.target == "upstream" else "corral", args.url)]
        else:
            names = ["corral", "upstream"] if args.target == "both" else [args.target]
            targets = [start_target(stack, name, args.backend, args) for name in names]
        results = measure(targets, args.backend, workloads, args.repeat)
    report(results, workloads[0], args.markdown)
    return 1 if any(r.problems or r.other_errors for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
