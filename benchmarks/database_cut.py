"""How long clients wait when the database host disappears (packets dropped).

Needs root (network namespaces, ``iptables``).  Placement's database is reached
through a network namespace this script creates (198.18.0.2, a veth pair
from 198.18.0.1): a forwarder listening inside it passes connections on to
the real PostgreSQL or MariaDB server on 127.0.0.1, holding what it
passes on for half of ``--rtt-ms`` each way.  To cut the host off,
``iptables`` in the namespace drops every packet to and from the
forwarder: no refusal, no reset, as when a host dies or a network
partitions.  Every other service stays on SQLite.

Measured, on ``corral serve`` (one worker, 16 threads): ``GET
/healthcheck`` while all is well; then, with the database cut off, the
time to an answer for the request in flight on a pooled connection, for
later requests one after another and 32 at once, and for ``GET
/healthcheck``; then how long after the database is back requests
succeed again::

    sudo python benchmarks/database_cut.py --backend postgresql --rtt-ms 200
    sudo python benchmarks/database_cut.py --tree /path/to/older/checkout --label before
"""

from __future__ import annotations

import argparse
import concurrent.futures
import ctypes
import os
import queue
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import requests
import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import REPO, ServerProcess, free_port, percentile, scratch_dir, write_config  # noqa: E402

SERVERS = {"postgresql": "postgresql+psycopg://postgres@127.0.0.1:5432/postgres",
           "mysql": "mysql+pymysql://root@127.0.0.1:3306/"}
HOST_ADDRESS, DB_ADDRESS = "198.18.0.1", "198.18.0.2"
HEADERS = {"X-Auth-Token": "admin"}
CLONE_NEWNET = 0x40000000


def run(*command: str) -> None:
    subprocess.run(command, check=True)


class CutNetwork:
    """A namespace behind a veth pair, and a forwarder in it to the real server.

    The forwarder holds what it passes on for half the round trip each
    way (this kernel has no ``netem``); cutting drops every packet to and
    from it with ``iptables`` inside the namespace.
    """

    def __init__(self, name: str, target: tuple[str, int], rtt_ms: int) -> None:
        self.name, self.target, self.delay = name, target, rtt_ms / 2000
        self.host_link, self.ns_link = f"{name[:12]}h", f"{name[:12]}n"

    def __enter__(self) -> CutNetwork:
        run("ip", "netns", "add", self.name)
        try:
            run("ip", "link", "add", self.host_link, "type", "veth", "peer", "name", self.ns_link)
            run("ip", "link", "set", self.ns_link, "netns", self.name)
            run("ip", "addr", "add", f"{HOST_ADDRESS}/30", "dev", self.host_link)
            run("ip", "link", "set", self.host_link, "up")
            self._ns("ip", "addr", "add", f"{DB_ADDRESS}/30", "dev", self.ns_link)
            self._ns("ip", "link", "set", self.ns_link, "up")
            self.port = self._forward()
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *_exc: object) -> None:
        subprocess.run(["ip", "netns", "delete", self.name], check=False)
        subprocess.run(["ip", "link", "delete", self.host_link], check=False, capture_output=True)

    def _ns(self, *command: str) -> None:
        run("ip", "netns", "exec", self.name, *command)

    def cut(self, dropped: bool) -> None:
        verb = "-A" if dropped else "-D"
        self._ns("iptables", verb, "INPUT", "-p", "tcp", "--dport", str(self.port), "-j", "DROP")
        self._ns("iptables", verb, "OUTPUT", "-p", "tcp", "--sport", str(self.port), "-j", "DROP")

    def _forward(self) -> int:
        listener = _socket_in_namespace(self.name)
        listener.bind((DB_ADDRESS, 0))
        listener.listen(128)
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()
        return listener.getsockname()[1]

    def _accept(self, listener: socket.socket) -> None:
        while True:
            client, _ = listener.accept()
            upstream = socket.create_connection(self.target)
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pump, args=(source, sink, self.delay), daemon=True).start()


def _socket_in_namespace(name: str) -> socket.socket:
    """A socket of the namespace ``name``, made from a thread that visits it."""
    libc = ctypes.CDLL(None, use_errno=True)
    made: list[socket.socket] = []

    def visit() -> None:
        with open(f"/var/run/netns/{name}") as target:
            if libc.setns(target.fileno(), CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns")
        made.append(socket.socket())  # the thread ends in the namespace; nothing else runs there

    thread = threading.Thread(target=visit)
    thread.start()
    thread.join()
    return made[0]


def _pump(source: socket.socket, sink: socket.socket, delay: float) -> None:
    """Pass bytes on ``delay`` seconds after they arrive, in order, without serialising them."""
    held: queue.Queue[tuple[float, bytes]] = queue.Queue()

    def send() -> None:
        while True:
            due, data = held.get()
            time.sleep(max(0.0, due - time.monotonic()))
            if not data:
                return
            try:
                sink.sendall(data)
            except OSError:
                return

    threading.Thread(target=send, daemon=True).start()
    try:
        while data := source.recv(65536):
            held.put((time.monotonic() + delay, data))
    except OSError:
        pass
    held.put((0.0, b""))


def timed(url: str, path: str, timeout: float) -> tuple[int, float]:
    """Status and seconds to the answer (status 0: no answer within ``timeout``)."""
    started = time.monotonic()
    try:
        status = requests.get(url + path, headers=HEADERS, timeout=timeout).status_code
    except requests.RequestException:
        status = 0
    return status, time.monotonic() - started


def fresh_database(backend: str) -> tuple[str, str]:
    name = f"bench_cut_{os.getpid()}"
    admin = sa.create_engine(SERVERS[backend], isolation_level="AUTOCOMMIT", poolclass=sa.pool.NullPool)
    with admin.connect() as conn:
        conn.execute(sa.text(f"CREATE DATABASE {name}"))
    admin.dispose()
    return name, sa.engine.make_url(SERVERS[backend]).set(database=name).render_as_string(hide_password=False)


def drop_database(backend: str, name: str) -> None:
    force = " WITH (FORCE)" if backend == "postgresql" else ""
    admin = sa.create_engine(SERVERS[backend], isolation_level="AUTOCOMMIT", poolclass=sa.pool.NullPool)
    with admin.connect() as conn:
        conn.execute(sa.text(f"DROP DATABASE IF EXISTS {name}{force}"))
    admin.dispose()


def measure(server_url: str, network: CutNetwork, timeout: float) -> None:
    def get(path: str) -> tuple[int, float]:
        return timed(server_url, path, timeout)

    first_status, first = get("/healthcheck")
    health = []
    for _ in range(10):
        time.sleep(2.1)  # past the health report's cache
        health.append(get("/healthcheck")[1])
    print(f"healthy /healthcheck: right after the start {first_status} in {first * 1000:.0f} ms, then p50 "
          f"{percentile(health, 0.5) * 1000:.0f} ms, max {max(health) * 1000:.0f} ms")
    assert get("/placement/resource_providers")[0] == 200
    time.sleep(2.1)
    network.cut(True)
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        in_flight = pool.submit(get, "/placement/resource_providers")
        checked = pool.submit(get, "/healthcheck")
        (status, seconds), (health_status, health_seconds) = in_flight.result(), checked.result()
    print(f"cut: request in flight on a pooled connection: {status} after {seconds:.2f} s")
    print(f"cut: /healthcheck at the same time: {health_status} after {health_seconds:.2f} s")
    later = [get("/placement/resource_providers") for _ in range(3)]
    print("cut: later requests one after another: " + ", ".join(f"{s} after {t:.2f} s" for s, t in later))
    with concurrent.futures.ThreadPoolExecutor(32) as pool:
        burst = list(pool.map(lambda _: get("/placement/resource_providers"), range(32)))
    print(f"cut: 32 at once: statuses {sorted({s for s, _ in burst})}, slowest {max(t for _, t in burst):.2f} s, "
          f"p50 {percentile([t for _, t in burst], 0.5):.2f} s")
    time.sleep(2.1)
    status, seconds = get("/healthcheck")
    print(f"cut: /healthcheck later: {status} after {seconds:.2f} s")
    network.cut(False)
    back = time.monotonic()
    while get("/placement/resource_providers")[0] != 200 and time.monotonic() - back < 300:
        time.sleep(0.2)
    print(f"back: requests succeed again {time.monotonic() - back:.2f} s after the database is reachable")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=sorted(SERVERS), default="postgresql")
    parser.add_argument("--rtt-ms", type=int, default=0, help="round trip added to the database's network")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds a client waits for an answer")
    parser.add_argument("--tree", type=Path, default=REPO, help="Source tree whose corral to run.")
    parser.add_argument("--label", default="corral")
    args = parser.parse_args()
    name, url = fresh_database(args.backend)
    try:
        cut_off(args, url)
    finally:
        drop_database(args.backend, name)


def cut_off(args: argparse.Namespace, url: str) -> None:
    target = sa.engine.make_url(SERVERS[args.backend])
    with CutNetwork(f"corcut{os.getpid() % 10000}", (target.host, target.port), args.rtt_ms) as network, \
            scratch_dir("corral-cut-") as workdir:
        proxied = sa.engine.make_url(url).set(host=DB_ADDRESS, port=network.port)
        config = write_config(workdir / "corral.conf", {
            "api": {"auth_strategy": "noauth2"},
            "placement_database": {"connection": proxied.render_as_string(hide_password=False)},
        })
        port = free_port()
        server = ServerProcess(
            args.label,
            [sys.executable, "-m", "corral", "serve", "--port", str(port), "--migrate", "--workers", "1",
             "--threads", "16", "--config-file", str(config), "--data-dir", str(workdir / "data")],
            f"http://127.0.0.1:{port}", workdir / "corral.log", cwd=args.tree, env={"PYTHONPATH": str(args.tree)},
        ).wait_ready("/placement/")
        print(f"{args.label}: {args.backend}, {args.rtt_ms} ms round trip to the database, "
              f"{args.timeout:g} s client timeout")
        try:
            measure(server.url, network, args.timeout)
        finally:
            server.stop()


if __name__ == "__main__":
    main()
