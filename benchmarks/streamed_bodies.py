"""Throughput and memory of a streamed upload and download through the event-loop front.

Serves the test-only streaming service (``tests/support/stream_service.py``)
as ``corral serve`` serves services (gunicorn, one worker) and sends it one
upload of ``--size`` MiB (``Content-Length``, from memory, 1 MiB at a time)
that it writes to a file (``--sink``, by default a temporary file in
``--dir``), then downloads that file (``wsgi.file_wrapper``, 1 MiB blocks).
Prints MB/s for each and the worker's resident memory: idle, highest
sampled during the transfer (``VmRSS`` every 50 ms) and its peak
(``VmHWM``)::

    python benchmarks/streamed_bodies.py --size 1024
    python benchmarks/streamed_bodies.py --size 1024 --sink /dev/null  (upload only)
"""

from __future__ import annotations

import argparse
import http.client
import os
import re
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.stream_server import StreamServer  # noqa: E402

MIB = 1024 * 1024


def _memory(pid: int, field: str) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    match = re.search(rf"^{field}:\s+(\d+) kB", status, re.M)
    assert match is not None
    return int(match.group(1)) * 1024


def _sampled(pid: int, work: Callable[[], None]) -> tuple[float, int]:
    """Run ``work``; its seconds and the highest VmRSS seen meanwhile."""
    highest = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            highest[0] = max(highest[0], _memory(pid, "VmRSS"))
            done.wait(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    started = time.perf_counter()
    try:
        work()
    finally:
        elapsed = time.perf_counter() - started
        done.set()
        sampler.join()
    return elapsed, highest[0]


def _upload(port: int, size: int, sink: str) -> None:
    data = os.urandom(MIB)
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    connection.putrequest("PUT", f"/stream/upload/benchmark?sink={sink}")
    connection.putheader("Content-Length", str(size))
    connection.endheaders()
    for _ in range(size // MIB):
        connection.send(data)
    response = connection.getresponse()
    body = response.read()
    connection.close()
    if response.status != 200 or f'"size":{size}'.encode() not in body:
        raise SystemExit(f"upload failed: {response.status} {body[:200]!r}")


def _download(port: int, size: int, path: str) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    connection.request("GET", f"/stream/file?path={path}")
    response = connection.getresponse()
    received = 0
    while chunk := response.read(MIB):
        received += len(chunk)
    connection.close()
    if response.status != 200 or received != size:
        raise SystemExit(f"download failed: {response.status}, {received} of {size} bytes")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1024, help="MiB uploaded, then downloaded")
    parser.add_argument("--sink", help="where the service writes the upload (default: a file in --dir)")
    parser.add_argument("--dir", help="directory for the server's files (default: the system's temporary one)")
    args = parser.parse_args()
    size = args.size * MIB
    with tempfile.TemporaryDirectory(dir=args.dir) as scratch:
        sink = args.sink or os.path.join(scratch, "upload.bin")
        server = StreamServer(Path(scratch), threads=4).start()
        try:
            worker = server.worker_pid()
            idle = _memory(worker, "VmRSS")
            up, up_rss = _sampled(worker, lambda: _upload(server.port, size, sink))
            print(f"upload   {args.size} MiB: {size / up / 1e6:7.1f} MB/s, worker RSS highest {up_rss / MIB:.1f} MiB")
            if os.path.isfile(sink):
                down, down_rss = _sampled(worker, lambda: _download(server.port, size, sink))
                print(f"download {args.size} MiB: {size / down / 1e6:7.1f} MB/s, "
                      f"worker RSS highest {down_rss / MIB:.1f} MiB")
            print(f"worker RSS idle {idle / MIB:.1f} MiB, peak (VmHWM) {_memory(worker, 'VmHWM') / MIB:.1f} MiB")
        finally:
            server.stop()


if __name__ == "__main__":
    main()
