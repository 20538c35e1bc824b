"""The Image service against upstream Glance: transfers, memory during an upload, and lists.

Both servers run on the same machine and the same PostgreSQL server, with
a filesystem store on the same disk, one worker process and 16 threads:

* upload of one image of ``--size-mib`` MiB (``PUT /file``, streamed from a
  file on disk), and the server's resident memory during it (sampled
  every 20 ms, all its processes) against its idle resident memory;
* download of it (``GET /file`` into nothing), then ``--concurrency``
  downloads at once (aggregate MB/s);
* ``GET /v2/images`` over ``--images`` images with three properties
  each: the first page at the default limit (25) and a walk of every page
  at ``limit=1000`` (p50 and p95 of ``--rounds`` rounds each).

The disk's own speed is measured too (writing and reading a file of the
same size with the page cache dropped where the machine allows it), since
transfers can be no faster than it.

    python benchmarks/image_transfers.py --upstream /work/venvs/glance [--size-mib 2048]

(``--upstream`` is a virtual environment with ``glance`` and ``gunicorn``
installed from PyPI; without it only Corral runs.)
"""

from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import requests

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import (  # noqa: E402
    DEFAULT_POSTGRESQL_SERVER,
    ServerProcess,
    free_port,
    percentile,
    postgresql_database,
    scratch_dir,
    start_corral,
    write_config,
)

MIB = 1024 * 1024
# An admin of project "admin", as Glance's context middleware reads it from keystonemiddleware's headers.
GLANCE_HEADERS = {"X-Identity-Status": "Confirmed", "X-Roles": "admin,member,reader", "X-Project-Id": "admin",
                  "X-User-Id": "admin", "Accept": "application/json"}


def start_upstream_glance(workdir: Path, venv: Path, db_url: str, *, workers: int, threads: int) -> ServerProcess:
    """Upstream Glance from ``venv`` under gunicorn, with its own unauthenticated pipeline (every request an admin)."""
    images, staging = workdir / "images", workdir / "staging"
    images.mkdir()
    staging.mkdir()
    # Glance's own pipeline with its context middleware and no token check: the
    # caller's identity comes from Keystone-style headers (see GLANCE_HEADERS).
    paste = (venv / "etc" / "glance" / "glance-api-paste.ini").read_text().replace(
        "\n[composite:rootapp]",
        "benchmark = cors http_proxy_to_wsgi versionnegotiation context rootapp\n\n[composite:rootapp]")
    paste += ("\n[composite:glance-api-benchmark]\npaste.composite_factory = glance.api:root_app_factory\n"
              "/: api\n/healthcheck: healthcheck\n")
    (workdir / "glance-api-paste.ini").write_text(paste)
    write_config(workdir / "glance-api.conf", {
        "DEFAULT": {"enabled_import_methods": "[glance-direct,web-download]",
                    "node_staging_uri": f"file://{staging}", "log_file": str(workdir / "glance-api.log")},
        "database": {"connection": db_url.replace("postgresql+psycopg://", "postgresql+psycopg2://")},
        "glance_store": {"stores": "file,http", "default_store": "file", "filesystem_store_datadir": str(images)},
        "paste_deploy": {"flavor": "benchmark", "config_file": str(workdir / "glance-api-paste.ini")},
        "oslo_concurrency": {"lock_path": str(workdir)},
    })
    env = {"OS_GLANCE_CONFIG_DIR": str(workdir)}
    subprocess.run([str(venv / "bin" / "glance-manage"), "--config-file", str(workdir / "glance-api.conf"),
                    "db_sync"], check=True, capture_output=True, env={**os.environ, **env})
    port = free_port()
    args = [str(venv / "bin" / "gunicorn"), "--bind", f"127.0.0.1:{port}", "--worker-class", "gthread",
            "--workers", str(workers), "--threads", str(threads), "--timeout", "3600", "--no-control-socket",
            "--log-level", "warning", "glance.wsgi.api:application"]
    return ServerProcess("upstream", args, f"http://127.0.0.1:{port}", workdir / "upstream.log", env=env,
                         cwd=workdir).wait_ready("/versions")


# ----------------------------------------------------------------- memory


def _tree_rss(pid: int) -> int:
    """Resident bytes of a process and its children."""
    total = 0
    pending = [pid]
    while pending:
        current = pending.pop()
        try:
            with open(f"/proc/{current}/status") as status:
                for line in status:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) * 1024
            with open(f"/proc/{current}/task/{current}/children") as children:
                pending.extend(int(child) for child in children.read().split())
        except OSError:
            continue
    return total


class RssSampler:
    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, _tree_rss(self.pid))
            time.sleep(0.02)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()


# -------------------------------------------------------------- transfers


class Service:
    def __init__(self, name: str, server: ServerProcess, headers: dict[str, str]) -> None:
        self.name = name
        self.server = server
        self.url = server.url + ("/image" if name == "corral" else "")
        self.headers = headers

    def create(self, **body: Any) -> str:
        body = {"disk_format": "raw", "container_format": "bare", **body}
        response = requests.post(self.url + "/v2/images", json=body, headers=self.headers, timeout=60)
        response.raise_for_status()
        return str(response.json()["id"])


def _timed(work: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    result = work()
    return time.perf_counter() - started, result


def measure_transfers(service: Service, source: Path, concurrency: int) -> dict[str, Any]:
    size = source.stat().st_size
    image_id = service.create(name="big")
    idle = _tree_rss(service.server.process.pid)
    headers = {**service.headers, "Content-Type": "application/octet-stream"}

    def put() -> requests.Response:
        with open(source, "rb") as data:
            return requests.put(f"{service.url}/v2/images/{image_id}/file", data=data, headers=headers, timeout=3600)

    with RssSampler(service.server.process.pid) as sampler:
        upload_seconds, response = _timed(put)
    assert response.status_code == 204, response.text

    def get() -> int:
        received = 0
        with requests.get(f"{service.url}/v2/images/{image_id}/file", headers=service.headers, stream=True,
                          timeout=3600) as answer:
            answer.raise_for_status()
            for chunk in answer.iter_content(MIB):
                received += len(chunk)
        assert received == size, (received, size)
        return received

    # Downloads are repeated (the image is in the page cache after the first):
    # the median of three, single and parallel.
    download_seconds = sorted(_timed(get)[0] for _ in range(3))[1]
    with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
        parallel_seconds = sorted(_timed(lambda: list(pool.map(lambda _: get(), range(concurrency))))[0]
                                  for _ in range(3))[1]
    return {
        "upload_mb_s": size / MIB / upload_seconds,
        "download_mb_s": size / MIB / download_seconds,
        "parallel_mb_s": concurrency * size / MIB / parallel_seconds,
        "idle_rss_mb": idle / MIB,
        "upload_peak_rss_mb": sampler.peak / MIB,
        "upload_rss_growth_mb": (sampler.peak - idle) / MIB,
    }


def measure_lists(service: Service, count: int, rounds: int) -> dict[str, Any]:
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda n: service.create(name=f"image-{n:05d}", os_distro="cirros", hw_disk_bus="scsi",
                                               build=str(n)), range(count)))
    session = requests.Session()

    def first_page() -> None:
        session.get(service.url + "/v2/images", headers=service.headers, timeout=600).raise_for_status()

    def walk() -> int:
        seen, url = 0, service.url + "/v2/images?limit=1000"
        while url:
            page = orjson.loads(session.get(url, headers=service.headers, timeout=600).content)
            seen += len(page["images"])
            url = service.url + page["next"] if page.get("next") else ""
        return seen

    assert walk() >= count
    results: dict[str, Any] = {}
    for name, work in (("first_page", first_page), ("walk_limit_1000", walk)):
        times = [_timed(work)[0] * 1000 for _ in range(rounds)]
        results[name] = {"p50_ms": percentile(times, 0.5), "p95_ms": percentile(times, 0.95)}
    return results


# ------------------------------------------------------------------ disk


def _drop_caches() -> bool:
    try:
        subprocess.run(["sync"], check=True)
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return True
    except OSError:
        return False


def measure_disk(directory: Path, size_mib: int) -> dict[str, Any]:
    target = directory / "disk-probe"
    block = os.urandom(MIB)
    started = time.perf_counter()
    with open(target, "wb") as out:
        for _ in range(size_mib):
            out.write(block)
        out.flush()
        os.fsync(out.fileno())
    write_seconds = time.perf_counter() - started
    dropped = _drop_caches()
    started = time.perf_counter()
    with open(target, "rb") as data:
        while data.read(MIB):
            pass
    read_seconds = time.perf_counter() - started
    target.unlink()
    return {"write_mb_s": size_mib / write_seconds, "read_mb_s": size_mib / read_seconds,
            "read_after_dropping_caches": dropped}


def make_source(directory: Path, size_mib: int) -> Path:
    source = directory / "image.raw"
    digest = hashlib.md5(usedforsecurity=False)
    with open(source, "wb") as out:
        for _ in range(size_mib):
            block = os.urandom(MIB)
            digest.update(block)
            out.write(block)
    return source


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--upstream", type=Path, help="virtual environment with glance and gunicorn")
    parser.add_argument("--postgresql", default=DEFAULT_POSTGRESQL_SERVER)
    parser.add_argument("--size-mib", type=int, default=2048)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--images", type=int, default=10000)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--skip", choices=("transfers", "lists"), action="append", default=[])
    args = parser.parse_args()
    results: dict[str, Any] = {}
    with scratch_dir("image-bench-") as workdir:
        source = make_source(workdir, args.size_mib)
        results["disk"] = measure_disk(workdir, args.size_mib)
        print("disk", json.dumps(results["disk"]), flush=True)
        sides = ["corral"] + (["upstream"] if args.upstream else [])
        for side in sides:
            side_dir = workdir / side
            side_dir.mkdir()
            with postgresql_database(args.postgresql, f"image_{side}") as db_url:
                if side == "corral":
                    server = start_corral(side_dir, {
                        "api": {"auth_strategy": "noauth2"},
                        "image_database": {"connection": db_url},
                        "glance_store": {"filesystem_store_datadir": str(side_dir / "images")},
                    }, workers=1, threads=16, ready_path="/image/versions")
                    service = Service("corral", server, {"X-Auth-Token": "admin:admin", "Accept": "application/json"})
                else:
                    server = start_upstream_glance(side_dir, args.upstream, db_url, workers=1, threads=16)
                    service = Service("upstream", server, GLANCE_HEADERS)
                try:
                    side_results: dict[str, Any] = {}
                    if "transfers" not in args.skip:
                        side_results["transfers"] = measure_transfers(service, source, args.concurrency)
                    if "lists" not in args.skip:
                        side_results["lists"] = measure_lists(service, args.images, args.rounds)
                    results[side] = side_results
                    print(side, json.dumps(side_results), flush=True)
                finally:
                    server.stop()
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
