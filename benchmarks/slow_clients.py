"""Ordinary requests while hostile clients hold connections open.

Starts ``corral serve`` (one worker, 16 threads, embedded SQLite), creates
a few resource providers, then times ordinary requests
(``GET /placement/resource_providers``, each on a new connection, one
after another) in three situations:

* nobody else connected;
* 200 stalled connections, each having sent ``GET /placement/resource_pro``
  and nothing more (re-opened as soon as the server closes one);
* 50 trickling connections: 25 sending a request head and 25 a request
  body one byte every 0.5 s (re-opened likewise).

An ordinary request that gets no answer within ``--timeout`` seconds counts
as timed out.  ``--tree`` runs another source tree's ``corral`` (for
example a checkout from before a change) for comparison::

    python benchmarks/slow_clients.py
    python benchmarks/slow_clients.py --tree /path/to/older/checkout --label before
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import REPO, ServerProcess, free_port, percentile, scratch_dir, write_config  # noqa: E402

TOKEN = "admin"
STALLED_LINE = b"GET /placement/resource_pro"
TRICKLE_HEAD = (b"GET /placement/resource_providers HTTP/1.1\r\nHost: x\r\nX-Auth-Token: admin\r\n"
                b"X-Padding: " + b"p" * 400 + b"\r\n\r\n")
TRICKLE_BODY = b'{"name": "trickled", "padding": "' + b"p" * 400 + b'"}'
TRICKLE_BODY_HEAD = (b"POST /placement/resource_providers HTTP/1.1\r\nHost: x\r\nX-Auth-Token: admin\r\n"
                     b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(TRICKLE_BODY))


class Attack:
    """Keeps ``count`` hostile connections open on a loop in a thread."""

    def __init__(self, port: int, kind: str, count: int) -> None:
        self.port = port
        self.kind = kind
        self.count = count
        self.opened = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._stop: asyncio.Event | None = None
        self._tasks: list[asyncio.Future[None]] = []

    def start(self) -> Attack:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result()
        return self

    async def _start(self) -> None:
        self._stop = asyncio.Event()
        for index in range(self.count):
            self._tasks.append(asyncio.ensure_future(self._keep_one(index)))
        while self.opened < self.count:
            await asyncio.sleep(0.05)

    async def _keep_one(self, index: int) -> None:
        assert self._stop is not None
        while not self._stop.is_set():
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
            except OSError:
                await asyncio.sleep(0.1)
                continue
            self.opened += 1
            try:
                await self._misbehave(index, reader, writer)
            except (OSError, asyncio.IncompleteReadError):
                pass
            finally:
                writer.close()

    async def _misbehave(self, index: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        assert self._stop is not None
        if self.kind == "stalled":
            writer.write(STALLED_LINE)
            await writer.drain()
            await self._until_closed_or_stopped(reader)
            return
        head, slow = (TRICKLE_HEAD[:4], TRICKLE_HEAD[4:]) if index % 2 == 0 else (TRICKLE_BODY_HEAD, TRICKLE_BODY)
        writer.write(head)
        await writer.drain()
        for byte in slow:
            if self._stop.is_set() or reader.at_eof():
                return
            writer.write(bytes([byte]))
            await writer.drain()
            try:
                await asyncio.wait_for(reader.read(65536), 0.5)
                return  # answered or closed: open another
            except asyncio.TimeoutError:
                pass

    async def _until_closed_or_stopped(self, reader: asyncio.StreamReader) -> None:
        assert self._stop is not None
        while not self._stop.is_set():
            try:
                if not await asyncio.wait_for(reader.read(65536), 0.5):
                    return
            except asyncio.TimeoutError:
                continue

    def stop(self) -> None:
        async def _stop() -> None:
            assert self._stop is not None
            self._stop.set()
            await asyncio.gather(*self._tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(_stop(), self._loop).result(timeout=60)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)


def ordinary_requests(port: int, count: int, timeout: float) -> tuple[list[float], int, int]:
    """Latencies (ms) of answered requests, the number timed out and the number refused."""
    latencies: list[float] = []
    timed_out = refused = 0
    for _ in range(count):
        started = time.perf_counter()
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        try:
            connection.request("GET", "/placement/resource_providers", headers={"X-Auth-Token": TOKEN})
            response = connection.getresponse()
            response.read()
            if response.status == 200:
                latencies.append((time.perf_counter() - started) * 1000)
            else:
                refused += 1
        except TimeoutError:
            timed_out += 1
        except OSError:
            refused += 1
        finally:
            connection.close()
    return latencies, timed_out, refused


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tree", type=Path, default=REPO, help="Source tree whose corral to run.")
    parser.add_argument("--label", default="corral")
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--timeout", type=float, default=10.0)
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--stalled", type=int, default=200)
    parser.add_argument("--trickling", type=int, default=50)
    args = parser.parse_args()

    with scratch_dir("corral-slow-clients-") as workdir:
        config = write_config(workdir / "corral.conf", {"api": {"auth_strategy": "noauth2"}})
        port = free_port()
        server = ServerProcess(
            args.label,
            [sys.executable, "-m", "corral", "serve", "--port", str(port), "--threads", str(args.threads),
             "--config-file", str(config), "--data-dir", str(workdir / "data")],
            f"http://127.0.0.1:{port}", workdir / "corral.log", cwd=args.tree,
            env={"PYTHONPATH": str(args.tree)},
        ).wait_ready("/")
        try:
            for index in range(10):
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                connection.request("POST", "/placement/resource_providers", body=b'{"name": "rp%d"}' % index,
                                   headers={"X-Auth-Token": TOKEN, "Content-Type": "application/json"})
                connection.getresponse().read()
                connection.close()
            print(f"{args.label}: ordinary requests ({args.requests} per row, new connection each, "
                  f"{args.timeout:g} s timeout), 1 worker, {args.threads} threads\n")
            print("| hostile connections | answered | timed out | refused | p50 ms | p95 ms |")
            print("| --- | ---: | ---: | ---: | ---: | ---: |")
            for kind, count in (("none", 0), ("stalled", args.stalled), ("trickling", args.trickling)):
                attack = Attack(port, kind, count).start() if count else None
                try:
                    latencies, timed_out, refused = ordinary_requests(port, args.requests, args.timeout)
                finally:
                    if attack is not None:
                        attack.stop()
                shown = "0" if not count else f"{count} {kind}"
                p50 = f"{percentile(latencies, 0.5):.1f}" if latencies else "-"
                p95 = f"{percentile(latencies, 0.95):.1f}" if latencies else "-"
                print(f"| {shown} | {len(latencies)} | {timed_out} | {refused} | {p50} | {p95} |", flush=True)
        finally:
            server.stop()


if __name__ == "__main__":
    main()
