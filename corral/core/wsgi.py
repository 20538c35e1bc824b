"""WSGI applications: one per service, and the all-in-one composite.

Each service's application serves at its own root, so it can be mounted
alone (``gunicorn 'corral.wsgi:placement()'``).  The composite mounts every
service under its prefix (``/identity``, ``/placement``, ``/baremetal``,
``/compute``) and answers ``GET /`` with the list of services.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

import orjson
from oslo_config import cfg

from corral.core import auth, services

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]

ACCESS_LOG = logging.getLogger("corral.access")


class RequestLog:
    """One log line per request: client, method, path, status, time, request id.

    The query string is left out (it is not needed to follow a request and
    is the one place a careless client might put a secret), and characters
    that could forge log lines are escaped.
    """

    def __init__(self, app: WsgiApp) -> None:
        self._app = app

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        started = time.perf_counter()
        method = environ.get("REQUEST_METHOD", "")
        path = environ.get("SCRIPT_NAME", "") + environ.get("PATH_INFO", "")
        answer: list[Any] = ["500", ()]

        def recording(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            answer[:] = [status.partition(" ")[0], headers]
            return start_response(status, headers, exc_info) if exc_info else start_response(status, headers)

        try:
            return self._app(environ, recording)
        finally:
            request_id = next((value for name, value in answer[1] if name.lower() == "x-openstack-request-id"), "-")
            ACCESS_LOG.info('%s "%s %s" %s %.1f ms %s', environ.get("REMOTE_ADDR", "-"), _printable(method),
                            _printable(path), answer[0], (time.perf_counter() - started) * 1000, request_id)


def _printable(text: str) -> str:
    if text.isprintable() and '"' not in text:
        return text
    return "".join(c if c.isprintable() and c != '"' else f"\\x{ord(c):02x}" for c in text)


def wrap(app: WsgiApp, conf: cfg.ConfigOpts) -> WsgiApp:
    """Middleware every service gets: Keystone (when used) and CORS."""
    app = auth.wrap_wsgi(app, conf)
    if conf.cors.allowed_origin:
        from oslo_middleware import cors

        app = cors.CORS(app, conf)
    return app


def service_app(conf: cfg.ConfigOpts, name: str) -> WsgiApp:
    (module,) = services.load([name])
    from corral.core import health

    checks = health.Health(health.checks_for(conf, [name]), conf.corral_server.healthcheck_timeout).start()
    return RequestLog(health.WithHealth(wrap(module.make_app(conf), conf), checks))


class PrefixDispatcher:
    """Route requests to the application mounted at the longest matching prefix."""

    def __init__(self, apps: dict[str, WsgiApp]) -> None:
        self._apps = sorted(apps.items(), key=lambda item: -len(item[0]))
        self._index = orjson.dumps(
            {"services": [{"name": prefix.strip("/"), "path": prefix} for prefix in sorted(apps)]}
        )

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "") or "/"
        for prefix, app in self._apps:
            if path == prefix or path.startswith(prefix + "/"):
                environ["SCRIPT_NAME"] = environ.get("SCRIPT_NAME", "") + prefix
                environ["PATH_INFO"] = path[len(prefix):]
                return app(environ, start_response)
        if path == "/" and environ.get("REQUEST_METHOD") in ("GET", "HEAD"):
            start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(self._index)))])
            return [self._index]
        body = b'{"message": "Not found"}'
        start_response("404 Not Found", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        return [body]


def all_in_one(conf: cfg.ConfigOpts, names: Iterable[str] | None = None) -> WsgiApp:
    apps = {}
    for module in services.load(names):
        apps[module.PREFIX] = wrap(module.make_app(conf), conf)
    from corral.core import health

    checks = health.Health(health.checks_for(conf, names), conf.corral_server.healthcheck_timeout).start()
    return RequestLog(health.WithHealth(PrefixDispatcher(apps), checks))
