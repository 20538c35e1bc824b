"""Serving WSGI applications.

:func:`run_gunicorn` runs an application under gunicorn inside the
``corral serve`` process, with :mod:`corral.core.front`'s event-loop worker
(whole requests are read before a thread runs the application; background
work is started in the worker after it forks, so database pools and threads
are never shared across a fork).  :class:`ThreadedServer` is a small threaded server on the standard
library's ``wsgiref`` that runs in a background thread; tests and tools use
it to serve an application in-process.
"""

from __future__ import annotations

import logging
import socket
import socketserver
import ssl
import threading
from collections.abc import Callable
from typing import Any
from wsgiref import simple_server

LOG = logging.getLogger(__name__)


class _QuietHandler(simple_server.WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib name
        LOG.debug("%s - %s", self.address_string(), format % args)


class _ThreadingWSGIServer(socketserver.ThreadingMixIn, simple_server.WSGIServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128


class _TLSWSGIServer(_ThreadingWSGIServer):
    """TLS whose handshake runs in the request's thread, so a slow client delays only itself."""

    handshake_timeout = 30.0

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            request.settimeout(self.handshake_timeout)
            request.do_handshake()
            request.settimeout(None)
        except (ssl.SSLError, OSError) as error:
            LOG.info("TLS handshake with %s failed: %s", client_address[0], error)
            self.shutdown_request(request)
            return
        super().process_request_thread(request, client_address)


class ThreadedServer:
    """Serve ``app`` on ``host:port`` (port 0 picks a free one) in a thread, over TLS with ``ssl_context``."""

    def __init__(self, app: Callable[..., Any], host: str = "127.0.0.1", port: int = 0,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        server_class = _ThreadingWSGIServer if ssl_context is None else _TLSWSGIServer
        if ":" in host:
            server_class = type("IPv6" + server_class.__name__, (server_class,), {"address_family": socket.AF_INET6})
        self._server = simple_server.make_server(
            host, port, app, server_class=server_class, handler_class=_QuietHandler
        )
        if ssl_context is not None:
            self._server.socket = ssl_context.wrap_socket(self._server.socket, server_side=True,
                                                          do_handshake_on_connect=False)
        self.scheme = "http" if ssl_context is None else "https"
        self.host = host
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, name=f"wsgi:{self.port}", daemon=True)

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"

    def start(self) -> ThreadedServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def run_gunicorn(
    app_factory: Callable[[], Callable[..., Any]],
    *,
    bind: str,
    workers: int = 1,
    threads: int = 16,
    limits: Any = None,
    on_worker_start: Callable[[], list[Any]] | None = None,
    on_ready: Callable[[], None] | None = None,
    on_fork: Callable[[], None] | None = None,
    on_worker_exit: Callable[[int], None] | None = None,
) -> None:
    """Run the application under gunicorn in this process (blocks).

    ``on_fork`` runs in each worker as soon as it has forked, before the
    application is built; ``on_worker_exit(pid)`` in this process whenever a
    worker has exited.
    """
    from gunicorn.app.base import BaseApplication

    from corral.core import front

    limits = limits or front.Limits()
    background: list[Any] = []

    class _Application(BaseApplication):
        def load_config(self) -> None:
            self.cfg.set("bind", bind)
            self.cfg.set("workers", workers)
            self.cfg.set("threads", threads)
            self.cfg.set("worker_class", front.worker_class(limits))
            self.cfg.set("worker_connections", limits.max_connections)
            self.cfg.set("keepalive", max(1, round(limits.keepalive)))
            self.cfg.set("timeout", 120)
            self.cfg.set("graceful_timeout", 10)
            self.cfg.set("accesslog", None)
            if "control_socket_disable" in self.cfg.settings:
                # Several corral processes may run on one host; a shared
                # default control socket path would collide.
                self.cfg.set("control_socket_disable", True)
            if on_worker_start is not None:
                self.cfg.set("post_worker_init", lambda _worker: background.extend(on_worker_start()))
                self.cfg.set("worker_exit", lambda _arbiter, _worker: [item.stop() for item in background])
            if on_ready is not None:
                self.cfg.set("when_ready", lambda _arbiter: on_ready())
            if on_fork is not None:
                self.cfg.set("post_fork", lambda _arbiter, _worker: on_fork())
            if on_worker_exit is not None:
                self.cfg.set("child_exit", lambda _arbiter, worker: on_worker_exit(worker.pid))

        def load(self) -> Callable[..., Any]:
            return app_factory()

    _Application().run()
