"""WSGI applications: one per service, and the all-in-one composite.

Each service's application serves at its own root, so it can be mounted
alone (``gunicorn 'corral.wsgi:placement()'``).  The composite mounts every
service under its prefix (``/identity``, ``/placement``, ``/baremetal``,
``/compute``) and answers ``GET /`` with the list of services.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import orjson
from oslo_config import cfg

from corral.core import auth, services

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def wrap(app: WsgiApp, conf: cfg.ConfigOpts) -> WsgiApp:
    """Middleware every service gets: Keystone (when used) and CORS."""
    app = auth.wrap_wsgi(app, conf)
    if conf.cors.allowed_origin:
        from oslo_middleware import cors

        app = cors.CORS(app, conf)
    return app


def service_app(conf: cfg.ConfigOpts, name: str) -> WsgiApp:
    (module,) = services.load([name])
    return wrap(module.make_app(conf), conf)


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


def all_in_one(conf: cfg.ConfigOpts, names: Iterable[str] | None = None) -> PrefixDispatcher:
    apps = {}
    for module in services.load(names):
        apps[module.PREFIX] = wrap(module.make_app(conf), conf)
    return PrefixDispatcher(apps)
