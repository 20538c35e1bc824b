"""Serve the test-only streaming service as ``corral serve`` serves services (gunicorn, the event-loop front).

``python -m tests.support.stream_server --port N [--threads N] [--body-timeout S] ...``, or as an
operator would: ``gunicorn -k corral.core.front.BufferingWorker 'tests.support.stream_server:application()'``.
:class:`StreamServer` runs either in a child process for tests and benchmarks.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
from pathlib import Path
from typing import Any

from tests.support.process import CorralProcess


class StreamServer(CorralProcess):
    """The streaming test service in a child process, with these ``Limits`` (``front.Limits`` field names)."""

    def __init__(self, directory: Path, *, threads: int = 4, gunicorn_command: bool = False, **limits: Any) -> None:
        super().__init__(directory / "unused.conf", directory, role="api",
                         log_path=directory / f"stream-server-{id(self)}.log")
        if gunicorn_command:
            assert not limits, "gunicorn's command line takes its own settings"
            self._args = [sys.executable, "-m", "gunicorn", "-k", "corral.core.front.BufferingWorker", "--threads",
                          str(threads), "-b", f"127.0.0.1:{self.port}", "tests.support.stream_server:application()"]
            return
        options = [f"--{name.replace('_', '-')}={value}" for name, value in limits.items()]
        self._args = [sys.executable, "-m", "tests.support.stream_server", "--port", str(self.port),
                      "--threads", str(threads), *options]

    def start(self, wait_path: str | None = "/stream/ping", timeout: float = 60) -> StreamServer:
        super().start(wait_path, timeout)
        return self

    def worker_pid(self) -> int:
        """The gunicorn worker serving requests (the only child of the arbiter)."""
        assert self.process is not None
        pid = self.process.pid
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        assert len(children) == 1, children
        return int(children[0])


def application() -> Any:
    """The all-in-one application with only the streaming test service mounted."""
    from corral.core import config, services, wsgi

    services.SERVICE_MODULES["streamtest"] = "tests.support.stream_service"
    conf = config.make_conf([], overrides={"api": {"auth_strategy": "noauth"}}, services=["streamtest"])
    return wsgi.all_in_one(conf, ["streamtest"])


def main() -> None:
    from corral.core import front, server

    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--threads", type=int, default=4)
    for field in dataclasses.fields(front.Limits):
        parser.add_argument(f"--{field.name.replace('_', '-')}", type=type(field.default), default=field.default)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s")
    limits = front.Limits(**{field.name: getattr(args, field.name) for field in dataclasses.fields(front.Limits)})
    server.run_gunicorn(application, bind=f"127.0.0.1:{args.port}", threads=args.threads, limits=limits)


if __name__ == "__main__":
    main()
