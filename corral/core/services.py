"""The services this process can run, loaded by name when needed.

Each entry names a module that provides:

``NAME``, ``PREFIX``
    The service's name and its path prefix in the all-in-one server.
``register_opts(conf)``
    Register the service's configuration options.
``migration_targets(conf)``
    ``[(MigrationTree, url), ...]``: the databases the service owns.
``make_app(conf)``
    The service's own WSGI application, serving at its own root.
``start_background(conf, role)``
    Start background work (conductors, periodic tasks) for ``role`` and
    return objects with a ``stop()`` method.
``health_checks(conf)`` (optional)
    The checks ``GET /healthcheck`` runs for the service (a list of
    callables returning ``corral.core.health.Part`` s); without it, each
    database the service owns is checked (reachable, latest schema).
``cli`` (optional)
    A click group added to the ``corral`` command under ``NAME``.
``check_startup(conf, role)`` (optional)
    Checks run by ``corral serve`` before it migrates or listens; raises
    :class:`corral.core.startup.StartupError` with one line saying what to fix.
``prepare(conf, url)`` (optional)
    Run by ``corral serve`` before serving (``url`` is where the server is
    reached); returns lines to show the operator, or raises
    :class:`StartupError` with one line saying what to fix.
``STREAMED_BODIES`` (optional)
    ``((METHOD, regex), ...)``: requests whose body the server does not
    read whole before the application runs (image uploads), matched with
    ``re.fullmatch`` against the path below ``PREFIX``, for example
    ``(("PUT", r"/v2/images/[^/]+/file"),)``.  The application runs as soon
    as the request's head has arrived; ``wsgi.input.read()`` blocks until
    data arrives, returns ``b""`` at the end and raises
    :class:`corral.core.front_http.ClientDisconnected` if the client goes
    away or stops sending.  ``max_request_body_size`` does not apply: the
    application enforces its own limit.  Such requests, and any answer
    given as an iterable other than a list (sent as it is produced), count
    against ``[corral_server] max_streamed_requests``.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from types import ModuleType

SERVICE_MODULES: dict[str, str] = {
    "identity": "corral.identity.service",
    "placement": "corral.placement.service",
    "compute": "corral.compute.service",
    "baremetal": "corral.baremetal.service",
    "image": "corral.image.service",
}


class StartupError(Exception):
    """A service cannot start as configured; the message says what to do."""


def names() -> list[str]:
    return list(SERVICE_MODULES)


def load(selected: Iterable[str] | None = None) -> list[ModuleType]:
    wanted = list(SERVICE_MODULES) if selected is None else list(selected)
    unknown = [name for name in wanted if name not in SERVICE_MODULES]
    if unknown:
        raise ValueError(f"unknown service(s): {', '.join(unknown)}")
    return [importlib.import_module(SERVICE_MODULES[name]) for name in wanted]
