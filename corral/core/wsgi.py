"""WSGI applications: one per service, and the all-in-one composite.

Each service's application serves at its own root, so it can be mounted
alone (``gunicorn 'corral.wsgi:placement()'``).  The composite mounts every
service under its prefix (``/identity``, ``/placement``, ``/baremetal``,
``/compute``) and answers ``GET /`` with the list of services.

Both carry ``streams_body(method, path)`` when a service declares
``STREAMED_BODIES``: the requests whose body the server hands to the
application as it arrives instead of reading it whole first (see
:mod:`corral.core.front_stream`).  ``path`` is the whole request path, as
``PATH_INFO`` has it before any prefix is taken off.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterable, Iterator
from types import ModuleType
from typing import Any

import orjson
from oslo_config import cfg

from corral.core import auth, local_calls, metrics, services

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]

ACCESS_LOG = logging.getLogger("corral.access")


class RequestLog:
    """One log line per request: client, method, path, status, time, request id.

    The query string is left out (it is not needed to follow a request and
    is the one place a careless client might put a secret), and characters
    that could forge log lines are escaped.  An answer that streams is
    logged once it is sent (closed), with the time that took.

    When this process exports metrics (:mod:`corral.core.metrics`), each
    request is counted there too, under the service and route template the
    application named in the environment (``service`` by default).
    """

    def __init__(self, app: WsgiApp, streams_body: Callable[[str, str], bool] | None = None,
                 service: str = "corral") -> None:
        self._app = app
        # Read by the server (corral.core.front) from the application it serves.
        self.streams_body = streams_body
        self._meter = metrics.RequestMeter(service) if metrics.enabled() else None

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        started = time.perf_counter()
        method = environ.get("REQUEST_METHOD", "")
        path = environ.get("SCRIPT_NAME", "") + environ.get("PATH_INFO", "")
        answer: list[Any] = ["500", ()]

        def recording(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            answer[:] = [status.partition(" ")[0], headers]
            return start_response(status, headers, exc_info) if exc_info else start_response(status, headers)

        meter = self._meter
        try:
            result = self._app(environ, recording)
        except BaseException:
            _log(environ, method, path, answer, started, meter)
            raise
        if isinstance(result, (list, tuple)):
            _log(environ, method, path, answer, started, meter)
            return result
        return _LoggedWhenClosed(result, lambda: _log(environ, method, path, answer, started, meter))


class _LoggedWhenClosed:
    """A streamed answer, logged when the server closes it."""

    def __init__(self, result: Iterable[bytes], log: Callable[[], None]) -> None:
        self._result = result
        self._log = log

    def __iter__(self) -> Iterator[bytes]:
        return iter(self._result)

    def close(self) -> None:
        try:
            close = getattr(self._result, "close", None)
            if close is not None:
                close()
        finally:
            self._log()


def _log(environ: dict[str, Any], method: str, path: str, answer: list[Any], started: float,
         meter: metrics.RequestMeter | None = None) -> None:
    seconds = time.perf_counter() - started
    if meter is not None:
        meter.record(environ, method, answer[0], seconds)
    request_id = next((value for name, value in answer[1] if name.lower() == "x-openstack-request-id"), "-")
    ACCESS_LOG.info('%s "%s %s" %s %.1f ms %s', environ.get("REMOTE_ADDR", "-"), _printable(method),
                    _printable(path), answer[0], seconds * 1000, request_id)


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


def streamed_bodies(mounted: Iterable[tuple[str, ModuleType]]) -> Callable[[str, str], bool] | None:
    """``streams_body(method, path)`` for services mounted at these prefixes, or None if none streams a body."""
    patterns: dict[str, list[str]] = {}
    for prefix, module in mounted:
        for method, pattern in getattr(module, "STREAMED_BODIES", ()):
            patterns.setdefault(method.upper(), []).append(f"{re.escape(prefix)}(?:{pattern})")
    if not patterns:
        return None
    compiled = {method: re.compile("|".join(f"(?:{item})" for item in items)) for method, items in patterns.items()}

    def streams_body(method: str, path: str) -> bool:
        pattern = compiled.get(method)
        return pattern is not None and pattern.fullmatch(path) is not None

    return streams_body


def service_app(conf: cfg.ConfigOpts, name: str) -> WsgiApp:
    (module,) = services.load([name])
    from corral.core import health

    checks = health.Health(health.checks_for(conf, [name]), conf.corral_server.healthcheck_timeout).start()
    return RequestLog(health.WithHealth(wrap(module.make_app(conf), conf), checks), streamed_bodies([("", module)]),
                      service=module.NAME)


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
                # (the service's own name, for requests its middleware answers before Corral's code runs)
                environ[metrics.SERVICE_KEY] = prefix.strip("/")
                return app(environ, start_response)
        if path == "/":
            environ[metrics.ROUTE_KEY] = "/"
        if path == "/" and environ.get("REQUEST_METHOD") in ("GET", "HEAD"):
            start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(self._index)))])
            return [self._index]
        body = b'{"message": "Not found"}'
        start_response("404 Not Found", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        return [body]


def all_in_one(conf: cfg.ConfigOpts, names: Iterable[str] | None = None) -> WsgiApp:
    apps = {}
    modules = services.load(names)
    for module in modules:
        apps[module.PREFIX] = wrap(module.make_app(conf), conf)
    from corral.core import health

    checks = health.Health(health.checks_for(conf, names), conf.corral_server.healthcheck_timeout).start()
    composite = RequestLog(health.WithHealth(PrefixDispatcher(apps), checks),
                           streamed_bodies((module.PREFIX, module) for module in modules))
    # Calls this process's services make to one another go straight to it.
    local_calls.register(conf, composite)
    return composite
