"""The topology snapshot's own costs, in one process, for large clouds.

Where ``placement_churn.py`` builds its cloud through the API and times
HTTP requests, this writes N flat compute nodes (VCPU 32 at ratio 4,
MEMORY_MB 65536, DISK_GB 1000) straight into a fresh SQLite database and
measures inside one Python process, with Placement's WSGI application
called directly (no HTTP, no other process competing for the CPU):

* the whole read of the topology (what every search paid after any
  topology write before the change log);
* one catch-up after a single inventory or trait write;
* ``GET /allocation_candidates`` (plain and ``limit=1000``) with no write
  in between, and with one topology write (alternately ``reserved`` and
  traits, each recorded as the API records it) before every request;
* the process's resident memory.

Usage::

    python benchmarks/placement_snapshot_inprocess.py --n 100000 [--repeat 20] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import random
import resource
import sys
import tempfile
import time
import uuid as uuidlib
from collections.abc import Callable
from pathlib import Path

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import common  # noqa: E402

BASE = "resources=VCPU:1,MEMORY_MB:1024,DISK_GB:10"
SHAPES = {"plain": BASE, "limit=1000": BASE + "&limit=1000"}
HEADERS = {"X-Auth-Token": "admin", "OpenStack-API-Version": "placement 1.39"}


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def build(url: str, n: int, uuid_of: Callable[[int], str] = lambda i: str(uuidlib.UUID(int=i)),
          name_of: Callable[[int], str] = lambda i: f"cn{i}") -> None:
    """N flat compute nodes (ids 1 to N) written straight into the database at ``url``."""
    from corral.core import migrations
    from corral.core.db import create_engine
    from corral.placement.db import tables as t
    from corral.placement.db import topology
    from corral.placement.db.schema import TREE

    engine = create_engine(url)
    migrations.upgrade(engine, TREE)
    with engine.begin() as conn:
        classes = {}
        for name in ("VCPU", "MEMORY_MB", "DISK_GB"):
            found = conn.execute(sa.select(t.resource_classes.c.id).where(t.resource_classes.c.name == name)).scalar()
            if found is None:
                found = conn.execute(t.resource_classes.insert().values(name=name)).inserted_primary_key[0]
            classes[name] = found
        for trait in ("HW_CPU_X86_AVX2",):
            if conn.execute(sa.select(t.traits.c.id).where(t.traits.c.name == trait)).scalar() is None:
                conn.execute(t.traits.insert().values(name=trait))
        for start in range(1, n + 1, 5000):
            ids = range(start, min(n, start + 4999) + 1)
            conn.execute(t.resource_providers.insert(), [
                {"id": i, "uuid": uuid_of(i), "name": name_of(i), "generation": 1, "root_provider_id": i}
                for i in ids
            ])
            rows = []
            for i in ids:
                for name, total, ratio in (("VCPU", 32, 4.0), ("MEMORY_MB", 65536, 1.0), ("DISK_GB", 1000, 1.0)):
                    rows.append({
                        "resource_provider_id": i, "resource_class_id": classes[name], "total": total, "reserved": 0,
                        "min_unit": 1, "max_unit": total, "step_size": 1, "allocation_ratio": ratio,
                    })
            conn.execute(t.inventories.insert(), rows)
        topology.changed(conn)
    engine.dispose()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=100000)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--workdir")
    args = parser.parse_args(argv)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="bench-snapshot-"))
    path = workdir / f"snapshot-{args.n}.sqlite"
    url = f"sqlite:///{path}"
    if not path.exists():
        began = time.monotonic()
        build(url, args.n)
        print(f"built {args.n} providers (straight into the database) in {time.monotonic() - began:.0f} s",
              file=sys.stderr)

    import falcon.testing

    from corral.core import config
    from corral.placement.api.app import build_state, make_app
    from corral.placement.db import tables as t
    from corral.placement.db import topology
    from corral.placement.db.topology_cache import catch_up

    conf = config.make_conf(state_path=str(workdir), overrides={
        "placement_database": {"connection": url}, "api": {"auth_strategy": "noauth2"},
    })
    state = build_state(conf)
    client = falcon.testing.TestClient(make_app(conf, state))
    rss_before = rss_mb()
    with state.db.read() as conn:
        classes = dict(conn.execute(sa.select(t.resource_classes.c.name, t.resource_classes.c.id)).all())
        trait = conn.execute(sa.select(t.traits.c.id).where(t.traits.c.name == "HW_CPU_X86_AVX2")).scalar_one()
        label = topology.current_label(conn)
        assert label is not None
        loads = []
        for _ in range(3):
            began = time.perf_counter()
            topology.load(conn, *label)
            loads.append(time.perf_counter() - began)
    rng = random.Random(1)

    def one_write(k: int) -> None:
        rp = rng.randrange(1, args.n + 1)
        with state.db.transaction() as conn:
            if k % 2:
                # UPDATE inventories SET reserved = :r WHERE resource_provider_id = :rp AND resource_class_id = :vcpu
                conn.execute(t.inventories.update().where(
                    t.inventories.c.resource_provider_id == rp, t.inventories.c.resource_class_id == classes["VCPU"]
                ).values(reserved=rng.randrange(4)))
            else:
                conn.execute(t.resource_provider_traits.delete().where(t.resource_provider_traits.c.resource_provider_id == rp))
                if rng.random() < 0.5:
                    conn.execute(t.resource_provider_traits.insert().values(resource_provider_id=rp, trait_id=trait))
            topology.changed(conn, [rp])

    def get(qs: str) -> float:
        began = time.perf_counter()
        response = client.simulate_get("/allocation_candidates?" + qs, headers=HEADERS)
        assert response.status_code == 200, response.text
        return time.perf_counter() - began

    first = get(BASE)
    timings: dict[str, dict[str, list[float]]] = {"quiet": {s: [] for s in SHAPES}, "churn": {s: [] for s in SHAPES}}
    catch_ups = []
    for k in range(args.repeat):
        for shape, qs in SHAPES.items():
            timings["quiet"][shape].append(get(qs))
            one_write(k)
            timings["churn"][shape].append(get(qs))
        one_write(k + 1)
        with state.db.read() as conn:
            current = state.topology.current
            label = topology.current_label(conn)
            assert label is not None and current is not None
            began = time.perf_counter()
            fresh = catch_up(conn, current, label[1], 2000)
            catch_ups.append(time.perf_counter() - began)
            assert fresh is not None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\nN = {args.n}, SQLite, in one process (WSGI application called directly), {args.repeat} requests per shape\n")
    print("| measure | p50 | p95 |")
    print("| --- | ---: | ---: |")
    print(f"| whole topology read | {common.percentile(loads, 0.5) * 1000:.0f} ms | {max(loads) * 1000:.0f} ms |")
    print(f"| catch-up after one write | {common.percentile(catch_ups, 0.5) * 1000:.1f} ms | "
          f"{common.percentile(catch_ups, 0.95) * 1000:.1f} ms |")
    for shape in SHAPES:
        quiet, busy = timings["quiet"][shape], timings["churn"][shape]
        print(f"| {shape}, no write between requests | {common.percentile(quiet, 0.5) * 1000:.1f} ms | "
              f"{common.percentile(quiet, 0.95) * 1000:.1f} ms |")
        print(f"| {shape}, one topology write before each request | {common.percentile(busy, 0.5) * 1000:.1f} ms | "
              f"{common.percentile(busy, 0.95) * 1000:.1f} ms |")
    print(f"\nfirst answer (whole read included): {first * 1000:.0f} ms; RSS {rss_before:.0f} MB before the first "
          f"search, {rss_mb():.0f} MB after, peak {peak:.0f} MB; whole reads {state.topology.loads}, "
          f"catch-ups {state.topology.updates}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
