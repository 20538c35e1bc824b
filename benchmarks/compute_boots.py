"""Compute against upstream Nova: boots from concurrent clients, and server lists over three cells.

Corral: ``corral serve`` (``--workers`` processes of ``--threads``
threads) with the fake compute driver, every database on PostgreSQL,
``[api] auth_strategy = corral`` (every request's token is checked).

Upstream (``--upstream VENV``, a virtual environment with ``nova`` 34,
``psycopg2-binary`` and ``gunicorn`` from PyPI): its API under gunicorn
with the same worker and thread counts, ``nova-conductor``,
``nova-scheduler`` and one ``nova-compute`` with upstream's fake driver,
on the same PostgreSQL server and on RabbitMQ (``--transport-url``).
Identity, Placement and Image for it come from a second ``corral serve``
with no compute service (see benchmarks/upstream_nova.py); tokens are
real on both sides.

Each side, one after the other (never both at once):

1. boots: ``--clients`` threads each boot a server (``POST /servers``
   from an ``imageRef``, ``networks: none``, a 1 vCPU/64 MiB flavor),
   poll ``GET /servers/{id}`` every ``--poll`` seconds until it is
   ``ACTIVE``, then boot the next, until ``--servers`` are ``ACTIVE``
   (after one boot per client to warm up, not counted). Reported: boots
   per second (``ACTIVE`` servers over the wall time from the first
   ``POST`` to the last ``ACTIVE``) and p50/p95 seconds from ``POST`` to
   ``ACTIVE`` as the client saw it. ``--runs`` repeats this on the same
   deployment.
2. lists: cells cell1, cell2 and cell3 with ``--per-cell`` servers each
   of the caller's project, then ``GET /servers/detail?limit=1000`` (the
   first page) and a walk of every page at ``limit=1000`` following the
   ``next`` links, ``--list-rounds`` times each (p50/p95). The servers
   beyond those booted are written straight into the cell databases in
   bulk: on Corral's side as in benchmarks/compute_servers_detail.py, on
   upstream's side as copies of the rows Nova wrote for a server it booted
   (``instances``, ``instance_extra``, ``instance_info_caches``,
   ``instance_system_metadata``, and ``instance_mappings`` in the API
   database), each with its own uuid, name and creation time.

    python benchmarks/compute_boots.py [--upstream /work/venvs/nova] [--servers 200] [--clients 8] \\
        [--per-cell 2000] [--runs 1] [--part boots|lists|both] [--json out.json]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import sys
import threading
import time
import urllib.parse
import uuid as uuidlib
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import requests
import sqlalchemy as sa
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchmarks import compute_servers_detail  # noqa: E402
from benchmarks.common import (  # noqa: E402
    DEFAULT_POSTGRESQL_SERVER,
    KeptAliveClient,
    percentile,
    postgresql_database,
    scratch_dir,
    start_corral,
    tree_cpu_seconds,
)
from benchmarks.upstream_nova import DEFAULT_TRANSPORT_URL, StubNetwork, UpstreamNova  # noqa: E402

MICROVERSION = "compute 2.73"
FLAVOR = {"name": "bench", "ram": 64, "vcpus": 1, "disk": 1, "id": "bench"}


# ------------------------------------------------------------------ set-up


def admin_token(identity_url: str, data_dir: Path) -> tuple[str, str, str]:
    """(token, project id, password) of the admin ``corral serve`` bootstrapped."""
    password = yaml.safe_load((data_dir / "clouds.yaml").read_text())["clouds"]["corral"]["auth"]["password"]
    response = requests.post(f"{identity_url}/v3/auth/tokens", timeout=30, json={"auth": {
        "identity": {"methods": ["password"], "password": {"user": {
            "name": "admin", "domain": {"id": "default"}, "password": password}}},
        "scope": {"project": {"name": "admin", "domain": {"id": "default"}}}}})
    response.raise_for_status()
    return response.headers["X-Subject-Token"], response.json()["token"]["project"]["id"], password


def prepare(compute_url: str, corral_url: str, token: str, host: str) -> str:
    """The flavor on the Compute side, an image in Corral's Image service, the host in Placement; the image id."""
    headers = {"X-Auth-Token": token, "OpenStack-API-Version": MICROVERSION}
    requests.post(f"{compute_url}/flavors", json={"flavor": FLAVOR}, headers=headers,
                  timeout=60).raise_for_status()
    image = requests.post(f"{corral_url}/image/v2/images", headers={"X-Auth-Token": token}, timeout=30, json={
        "name": "bench", "disk_format": "raw", "container_format": "bare"})
    image.raise_for_status()
    image_id = image.json()["id"]
    requests.put(f"{corral_url}/image/v2/images/{image_id}/file", data=b"\0" * 4096, timeout=30, headers={
        "X-Auth-Token": token, "Content-Type": "application/octet-stream"}).raise_for_status()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        providers = requests.get(f"{corral_url}/placement/resource_providers", headers={"X-Auth-Token": token},
                                 timeout=30).json()["resource_providers"]
        for provider in providers:
            if provider["name"] != host:
                continue
            inventory = requests.get(f"{corral_url}/placement/resource_providers/{provider['uuid']}/inventories",
                                     headers={"X-Auth-Token": token}, timeout=30).json()["inventories"]
            if "MEMORY_MB" in inventory:
                return image_id
        time.sleep(0.5)
    raise RuntimeError(f"the compute host {host} was not reported to Placement")


# ------------------------------------------------------------------- boots


class Boots:
    """``clients`` threads booting one server at a time each until ``target`` are ACTIVE."""

    def __init__(self, compute_url: str, token: str, image_id: str, *, target: int, clients: int,
                 poll: float, label: str, cpu_groups: dict[str, list[int]]) -> None:
        self.compute_url = compute_url
        self.headers = {"X-Auth-Token": token, "OpenStack-API-Version": MICROVERSION,
                        "Content-Type": "application/json"}
        self.image_id = image_id
        self.target = target
        self.clients = clients
        self.poll = poll
        self.label = label
        self.cpu_groups = cpu_groups
        self.lock = threading.Lock()
        self.started = 0
        self.to_active: list[float] = []
        self.post_seconds: list[float] = []
        self.errors: list[str] = []
        self.last_active = 0.0

    def _take(self) -> int | None:
        with self.lock:
            if self.started >= self.target or len(self.errors) > 10:
                return None
            self.started += 1
            return self.started

    def _client(self) -> None:
        client = KeptAliveClient(self.compute_url, self.headers)
        try:
            while (number := self._take()) is not None:
                self._boot(client, number)
        except Exception as error:  # reported with the figures
            with self.lock:
                self.errors.append(repr(error))
        finally:
            client.close()

    def _boot(self, client: KeptAliveClient, number: int) -> None:
        body = json.dumps({"server": {"name": f"{self.label}-{number}", "flavorRef": FLAVOR["id"],
                                      "imageRef": self.image_id, "networks": "none"}}).encode()
        started = time.perf_counter()
        status, answer, seconds = client.request("POST", "/servers", body)
        if status != 202:
            raise RuntimeError(f"boot answered {status}: {answer[:300]!r}")
        server_id = json.loads(answer)["server"]["id"]
        while True:
            time.sleep(self.poll)
            status, answer, _ = client.get(f"/servers/{server_id}")
            if status != 200:
                raise RuntimeError(f"show answered {status}: {answer[:300]!r}")
            server = json.loads(answer)["server"]
            if server["status"] == "ACTIVE":
                done = time.perf_counter()
                with self.lock:
                    self.to_active.append(done - started)
                    self.post_seconds.append(seconds)
                    self.last_active = max(self.last_active, done)
                return
            if server["status"] == "ERROR":
                raise RuntimeError(f"server {server_id} ERROR: {server.get('fault')}")

    def run(self) -> dict[str, Any]:
        threads = [threading.Thread(target=self._client) for _ in range(self.clients)]
        cpu_before = {name: tree_cpu_seconds(pids) for name, pids in self.cpu_groups.items()}
        load_before = os.getloadavg()[0]
        began = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        wall = (self.last_active or time.perf_counter()) - began
        active = max(len(self.to_active), 1)
        return {
            "cpu_ms_per_boot": {name: round((tree_cpu_seconds(pids) - cpu_before[name]) * 1000 / active, 1)
                                for name, pids in self.cpu_groups.items()},
            "load_1min": [round(load_before, 1), round(os.getloadavg()[0], 1)],
            "active": len(self.to_active), "wall_s": round(wall, 2),
            "boots_per_s": round(len(self.to_active) / wall, 2) if wall > 0 else 0.0,
            "to_active_p50_s": round(percentile(self.to_active, 0.5), 3),
            "to_active_p95_s": round(percentile(self.to_active, 0.95), 3),
            "post_p50_ms": round(percentile(self.post_seconds, 0.5) * 1000, 1),
            "post_p95_ms": round(percentile(self.post_seconds, 0.95) * 1000, 1),
            "errors": self.errors[:5],
        }


def boot_runs(compute_url: str, token: str, image_id: str, args: argparse.Namespace, side: str,
              cpu_groups: dict[str, list[int]]) -> list[dict]:
    warm = Boots(compute_url, token, image_id, target=args.clients, clients=args.clients, poll=args.poll,
                 label=f"{side}-warm", cpu_groups=cpu_groups).run()
    if warm["errors"]:
        raise RuntimeError(f"{side}: warm-up boots failed: {warm['errors']}")
    results = []
    for run in range(args.runs):
        result = Boots(compute_url, token, image_id, target=args.servers, clients=args.clients, poll=args.poll,
                       label=f"{side}-run{run}", cpu_groups=cpu_groups).run()
        print(f"{side} boots run {run + 1}: {result}", flush=True)
        results.append(result)
    return results


# ------------------------------------------------------------------- lists


def _relative(url: str, prefix: str) -> str:
    parts = urllib.parse.urlsplit(url)
    path = parts.path[len(prefix):] if parts.path.startswith(prefix) else parts.path
    return path + ("?" + parts.query if parts.query else "")


def measure_lists(compute_url: str, token: str, rounds: int, cpu_groups: dict[str, list[int]]) -> dict[str, Any]:
    client = KeptAliveClient(compute_url, {"X-Auth-Token": token, "OpenStack-API-Version": MICROVERSION})
    prefix = urllib.parse.urlsplit(compute_url).path.rstrip("/")
    first, walks = [], []
    walked = 0
    load_before = os.getloadavg()[0]
    status, answer, _ = client.get("/servers/detail?limit=1000")  # warms up
    if status != 200:
        raise RuntimeError(f"list answered {status}: {answer[:300]!r}")
    cpu_before = {name: tree_cpu_seconds(pids) for name, pids in cpu_groups.items()}
    for _ in range(rounds):
        status, answer, seconds = client.get("/servers/detail?limit=1000")
        if status != 200:
            raise RuntimeError(f"list answered {status}: {answer[:300]!r}")
        first.append(seconds)
        path: str | None = "/servers/detail?limit=1000"
        total, count = 0.0, 0
        while path:
            status, answer, seconds = client.get(path)
            if status != 200:
                raise RuntimeError(f"list answered {status}: {answer[:300]!r}")
            page = json.loads(answer)
            total += seconds
            count += len(page["servers"])
            links = [link["href"] for link in page.get("servers_links", []) if link["rel"] == "next"]
            path = _relative(links[0], prefix) if links and page["servers"] else None
        walks.append(total)
        walked = count
    client.close()
    cpu = {name: round((tree_cpu_seconds(pids) - cpu_before[name]) * 1000 / max(rounds, 1), 1)
           for name, pids in cpu_groups.items()}
    return {"cpu_ms_per_round": cpu, "load_1min": [round(load_before, 1), round(os.getloadavg()[0], 1)],
            "first_page_p50_ms": round(percentile(first, 0.5) * 1000, 1),
            "first_page_p95_ms": round(percentile(first, 0.95) * 1000, 1),
            "walk_p50_ms": round(percentile(walks, 0.5) * 1000, 1),
            "walk_p95_ms": round(percentile(walks, 0.95) * 1000, 1), "servers_walked": walked}


def _live_instances(cell_url: str, project: str) -> int:
    engine = sa.create_engine(cell_url, poolclass=sa.pool.NullPool)
    with engine.connect() as conn:
        # SELECT count(*) FROM instances WHERE project_id = :project AND deleted = <false>
        count = conn.execute(sa.text("SELECT count(*) FROM instances WHERE project_id = :p AND deleted = :d"),
                             {"p": project, "d": _false(conn)}).scalar_one()
    engine.dispose()
    return int(count)


def _false(conn: Any) -> Any:
    """``deleted`` is a boolean in Corral's schema, an integer (0 = live) in upstream's."""
    column = sa.inspect(conn).get_columns("instances")
    kind = next(c["type"] for c in column if c["name"] == "deleted")
    return False if isinstance(kind, sa.Boolean) else 0


def corral_fill_cells(api_url: str, cell_urls: list[str], project: str, per_cell: int) -> None:
    """cell2 and cell3 created; cell1..3 topped up to ``per_cell`` live servers of ``project``."""
    from corral.compute.db import api_tables
    from corral.compute.domain.cell_admin import create_cell
    from corral.core.db import Database

    api_db = Database.from_url(api_url)
    with api_db.read() as conn:
        # SELECT uuid FROM cell_mappings WHERE name = 'cell1'
        cell1 = conn.execute(sa.select(api_tables.cell_mappings.c.uuid)
                             .where(api_tables.cell_mappings.c.name == "cell1")).scalar_one()
    cells = [cell1] + [create_cell(api_db, name=f"cell{i}", database_connection=cell_urls[i]).uuid for i in (2, 3)]
    api_db.dispose()
    compute_servers_detail.PROJECT = project
    for cell_uuid, url in zip(cells, cell_urls[1:], strict=True):
        missing = per_cell - _live_instances(url, project)
        if missing > 0:
            compute_servers_detail.populate(api_url, url, cell_uuid, missing)


def upstream_fill_cells(api_url: str, cell_urls: list[str], project: str, per_cell: int) -> None:
    """cell1..3 topped up to ``per_cell`` live servers of ``project``: copies of one server Nova booted."""
    cell1 = sa.create_engine(cell_urls[1], poolclass=sa.pool.NullPool)
    meta = sa.MetaData()
    names = ("instances", "instance_extra", "instance_info_caches", "instance_system_metadata")
    with cell1.connect() as conn:
        meta.reflect(conn, only=names)
        # SELECT * FROM instances WHERE project_id = :p AND vm_state = 'active' AND deleted = 0 LIMIT 1
        template = dict(conn.execute(sa.select(meta.tables["instances"]).where(
            meta.tables["instances"].c.project_id == project, meta.tables["instances"].c.vm_state == "active",
            meta.tables["instances"].c.deleted == 0).limit(1)).mappings().one())
        related = {}
        for name in names[1:]:
            table = meta.tables[name]
            # SELECT * FROM <table> WHERE instance_uuid = :uuid AND deleted = 0
            related[name] = [dict(row) for row in conn.execute(
                sa.select(table).where(table.c.instance_uuid == template["uuid"])).mappings()]
    cell1.dispose()
    api = sa.create_engine(api_url, poolclass=sa.pool.NullPool)
    api_meta = sa.MetaData()
    with api.connect() as conn:
        api_meta.reflect(conn, only=("instance_mappings", "cell_mappings"))
        cell_ids = dict(conn.execute(sa.select(api_meta.tables["cell_mappings"].c.name,
                                               api_meta.tables["cell_mappings"].c.id)).all())
    base = datetime.datetime(2026, 1, 1)
    for index, url in enumerate(cell_urls[1:], start=1):
        missing = per_cell - _live_instances(url, project)
        if missing <= 0:
            continue
        rows: dict[str, list[dict]] = {name: [] for name in names}
        mappings = []
        for number in range(missing):
            server = str(uuidlib.uuid4())
            created = base + datetime.timedelta(seconds=index * per_cell + number)
            rows["instances"].append({**{k: v for k, v in template.items() if k != "id"}, "uuid": server,
                                      "display_name": f"vm-{index}-{number}", "hostname": f"vm-{index}-{number}",
                                      "created_at": created, "updated_at": created, "launched_at": created})
            for name in names[1:]:
                rows[name].extend({**{k: v for k, v in row.items() if k != "id"}, "instance_uuid": server,
                                   "created_at": created} for row in related[name])
            mappings.append({"instance_uuid": server, "cell_id": cell_ids[f"cell{index}"], "project_id": project,
                             "user_id": template["user_id"], "queued_for_delete": False, "created_at": created})
        engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
        with engine.begin() as conn:
            for name in names:
                if rows[name]:
                    conn.execute(meta.tables[name].insert(), rows[name])
        engine.dispose()
        with api.begin() as conn:
            conn.execute(api_meta.tables["instance_mappings"].insert(), mappings)
    api.dispose()


# ------------------------------------------------------------------- sides


def corral_side(args: argparse.Namespace) -> dict[str, Any]:
    with ExitStack() as stack:
        workdir = stack.enter_context(scratch_dir("corral-bench-boots-"))

        def database(label: str) -> str:
            return stack.enter_context(postgresql_database(args.postgresql, label))

        cells = [database(f"cc{i}") for i in range(4)]
        api_url = database("capi")
        server = start_corral(workdir, {
            "DEFAULT": {"host": "bench-host", "compute_driver": "fake.FakeDriver"},
            "fake_driver": {"vcpus": 100000, "memory_mb": 100000000, "local_gb": 1000000},
            "compute": {"cell0_connection": cells[0], "poll_interval": args.corral_poll_interval},
            "quota": {"instances": -1, "cores": -1, "ram": -1},
            "identity_database": {"connection": database("cid")},
            "placement_database": {"connection": database("cplace")},
            "image_database": {"connection": database("cimg")},
            "api_database": {"connection": api_url},
            "database": {"connection": cells[1]},
        }, workers=args.workers, threads=args.threads, ready_path="/identity/v3")
        stack.callback(server.stop)
        token, project, _ = admin_token(server.url + "/identity", workdir / "data")
        compute_url = server.url + "/compute/v2.1"
        image_id = prepare(compute_url, server.url, token, "bench-host")
        cpu = {"corral": [server.process.pid]}
        result: dict[str, Any] = {"side": "corral"}
        if args.part in ("boots", "both"):
            result["boots"] = boot_runs(compute_url, token, image_id, args, "corral", cpu)
        if args.part in ("lists", "both"):
            if args.part == "lists":
                Boots(compute_url, token, image_id, target=1, clients=1, poll=args.poll, label="one",
                      cpu_groups=cpu).run()
            corral_fill_cells(api_url, cells, project, args.per_cell)
            time.sleep(6)  # the API re-reads cell mappings every 5 seconds
            result["lists"] = measure_lists(compute_url, token, args.list_rounds, cpu)
            print(f"corral lists: {result['lists']}", flush=True)
        result["log_errors"] = server.error_lines(5)
        return result


def upstream_side(args: argparse.Namespace) -> dict[str, Any]:
    with ExitStack() as stack:
        workdir = stack.enter_context(scratch_dir("nova-bench-boots-"))

        def database(label: str) -> str:
            return stack.enter_context(postgresql_database(args.postgresql, label))

        # Identity, Placement and Image for Nova: a corral serve with no compute service.
        services = start_corral(workdir, {
            "identity_database": {"connection": database("uid")},
            "placement_database": {"connection": database("uplace")},
            "image_database": {"connection": database("uimg")},
        }, workers=1, threads=16, ready_path="/identity/v3")
        stack.callback(services.stop)
        token, project, password = admin_token(services.url + "/identity", workdir / "data")
        cells = [database(f"nc{i}") for i in range(4)]
        api_url = database("napi")
        network = StubNetwork()
        stack.callback(network.close)
        novadir = workdir / "nova"
        novadir.mkdir()
        nova = UpstreamNova(args.upstream, novadir, identity_url=services.url + "/identity", password=password,
                            api_db=api_url, cell_dbs=cells if args.part != "boots" else cells[:2],
                            transport_url=args.transport_url, network_url=network.url,
                            debug=args.upstream_debug)
        stack.callback(nova.stop)
        if args.logs:
            stack.callback(_keep_logs, novadir, args.logs)
        nova.prepare_databases()
        compute_url = nova.start(workers=args.workers, threads=args.threads)
        try:
            image_id = prepare(compute_url, services.url, token, nova.host)
            cpu = {"nova": [p.process.pid for p in nova.processes],
                   "corral (identity, placement, image)": [services.process.pid]}
            result: dict[str, Any] = {"side": "upstream"}
            if args.part in ("boots", "both"):
                result["boots"] = boot_runs(compute_url, token, image_id, args, "upstream", cpu)
            if args.part in ("lists", "both"):
                if args.part == "lists":
                    Boots(compute_url, token, image_id, target=1, clients=1, poll=args.poll, label="one",
                          cpu_groups=cpu).run()
                upstream_fill_cells(api_url, cells, project, args.per_cell)
                result["lists"] = measure_lists(compute_url, token, args.upstream_list_rounds, cpu)
                print(f"upstream lists: {result['lists']}", flush=True)
        except Exception:
            print("\n".join(nova.errors()), file=sys.stderr)
            for process in nova.processes:
                print(f"--- {process.name}\n{process.log()[-2000:]}", file=sys.stderr)
            raise
        result["log_errors"] = nova.errors()
        return result


def _keep_logs(workdir: Path, target: Path) -> None:
    target.mkdir(parents=True, exist_ok=True)
    for log in workdir.glob("*.log"):
        shutil.copy(log, target / log.name)


# ------------------------------------------------------------------ report


def _cpu(values: dict[str, float]) -> str:
    return ", ".join(f"{name} {value:g}" for name, value in values.items())


def report(results: list[dict[str, Any]], args: argparse.Namespace) -> None:
    print(f"\n{args.clients} clients, {args.servers} servers ACTIVE per run, poll {args.poll}s; "
          f"API {args.workers} worker(s) x {args.threads} threads on both sides")
    print("| side | run | boots/s | to ACTIVE p50 / p95 (s) | POST p50 (ms) | CPU ms per boot | load (1 min) |")
    print("| --- | ---: | ---: | ---: | ---: | --- | --- |")
    for result in results:
        for number, boots in enumerate(result.get("boots", []), start=1):
            print(f"| {result['side']} | {number} | {boots['boots_per_s']} | {boots['to_active_p50_s']} / "
                  f"{boots['to_active_p95_s']} | {boots['post_p50_ms']} | {_cpu(boots['cpu_ms_per_boot'])} | "
                  f"{boots['load_1min'][0]} -> {boots['load_1min'][1]} |")
    print("\n| side | servers | first page p50 / p95 (ms) | walk p50 / p95 (ms) | CPU ms per page + walk | load |")
    print("| --- | ---: | ---: | ---: | --- | --- |")
    for result in results:
        if "lists" in result:
            lists = result["lists"]
            print(f"| {result['side']} | {lists['servers_walked']} | {lists['first_page_p50_ms']} / "
                  f"{lists['first_page_p95_ms']} | {lists['walk_p50_ms']} / {lists['walk_p95_ms']} | "
                  f"{_cpu(lists['cpu_ms_per_round'])} | {lists['load_1min'][0]} -> {lists['load_1min'][1]} |")
    for result in results:
        if result.get("log_errors"):
            print(f"{result['side']} log errors: {result['log_errors']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--upstream", type=Path, help="virtual environment with nova 34 (none: Corral only)")
    parser.add_argument("--only-upstream", action="store_true")
    parser.add_argument("--servers", type=int, default=200)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--poll", type=float, default=0.2, help="seconds between a client's status checks")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--per-cell", type=int, default=2000)
    parser.add_argument("--list-rounds", type=int, default=10, help="first pages and walks timed (Corral)")
    parser.add_argument("--upstream-list-rounds", type=int, default=3, help="the same for upstream (slower)")
    parser.add_argument("--part", choices=("boots", "lists", "both"), default="both")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--corral-poll-interval", type=float, default=1.0,
                        help="Corral's [compute] poll_interval")
    parser.add_argument("--postgresql", default=DEFAULT_POSTGRESQL_SERVER)
    parser.add_argument("--transport-url", default=DEFAULT_TRANSPORT_URL)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--logs", type=Path, help="copy upstream's service logs here")
    parser.add_argument("--upstream-debug", action="store_true", help="upstream's services log at debug level")
    args = parser.parse_args()
    results = []
    if not args.only_upstream:
        results.append(corral_side(args))
    if args.upstream:
        results.append(upstream_side(args))
    report(results, args)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
