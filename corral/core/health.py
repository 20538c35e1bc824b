"""``GET /healthcheck``: the state of every part the APIs depend on.

Each service contributes checks: by default one per database it owns
(reachable, and at the latest schema); a service module may instead define
``health_checks(conf)`` returning its own list of checks (see
:func:`checks_for`).  A check is a callable returning :class:`Part` s::

    {"status": "ok" | "degraded" | "down",
     "parts": [{"name": "placement.database", "status": "ok", "detail": ""},
               {"name": "baremetal.conductors", "status": "down",
                "detail": "no conductor has sent a heartbeat recently"}]}

The answer is 200 unless a part is down (503), so a load balancer can use
it as is.  It needs no authentication, like upstream's healthcheck
middleware, and so says nothing a stranger should not learn: details are
Corral's own short phrases, never error messages, host names or URLs.
Results are reused for :data:`CACHE_SECONDS`, and one check runs at a time,
so polling it cannot load the databases.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from typing import Any

import orjson
import sqlalchemy as sa
from oslo_config import cfg

LOG = logging.getLogger(__name__)

PATH = "/healthcheck"
OK, DEGRADED, DOWN = "ok", "degraded", "down"
_RANK = {OK: 0, DEGRADED: 1, DOWN: 2}
CACHE_SECONDS = 2.0


@dataclass(frozen=True)
class Part:
    name: str
    status: str
    detail: str = ""


Check = Callable[[], list[Part]]


def database_check(name: str, url: str, tree: Any = None) -> Check:
    """The database at ``url`` answers, and (given its migration tree) is at the latest schema."""
    from corral.core import migrations
    from corral.core.db import create_engine

    engine: list[sa.engine.Engine] = []

    def check() -> list[Part]:
        if not engine:
            engine.append(create_engine(url, pool_size=1, max_overflow=1, connect_timeout=3))
        try:
            with engine[0].connect() as conn:
                conn.exec_driver_sql("SELECT 1")
            if tree is not None and migrations.current_revision(engine[0], tree) != migrations.head_revision(tree):
                return [Part(name, DOWN, "not at the latest schema: run 'corral db upgrade'")]
        except sa.exc.SQLAlchemyError as error:
            LOG.warning("health: %s unreachable: %s", name, error)
            return [Part(name, DOWN, "unreachable")]
        return [Part(name, OK)]

    return check


def checks_for(conf: cfg.ConfigOpts, names: Iterable[str] | None = None) -> list[Check]:
    """Every selected service's checks: its ``health_checks(conf)``, or its databases."""
    from corral.core import services

    checks: list[Check] = []
    for module in services.load(names):
        own = getattr(module, "health_checks", None)
        if own is not None:
            checks.extend(own(conf))
            continue
        targets = module.migration_targets(conf)
        for index, (tree, url) in enumerate(targets):
            suffix = "" if len(targets) == 1 else f".{index}"
            checks.append(database_check(f"{module.NAME}.database{suffix}", url, tree))
    return checks


class Health:
    """Runs the checks (one run at a time, reused briefly) and renders the answer."""

    def __init__(self, checks: list[Check]) -> None:
        self._checks = checks
        self._lock = threading.Lock()
        self._last: tuple[float, dict[str, Any]] | None = None

    def report(self) -> dict[str, Any]:
        with self._lock:
            if self._last is not None and time.monotonic() - self._last[0] < CACHE_SECONDS:
                return self._last[1]
            parts: list[Part] = []
            for check in self._checks:
                try:
                    parts.extend(check())
                except Exception:
                    LOG.exception("health check %s failed", getattr(check, "__qualname__", check))
                    parts.append(Part(getattr(check, "__name__", "check"), DOWN, "the check itself failed"))
            worst = max((part.status for part in parts), key=_RANK.__getitem__, default=OK)
            report = {"status": worst, "parts": [asdict(part) for part in parts]}
            self._last = (time.monotonic(), report)
            return report

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        if environ.get("REQUEST_METHOD") not in ("GET", "HEAD"):
            body = orjson.dumps({"message": "Only GET and HEAD are allowed here."})
            start_response("405 Method Not Allowed", [("Content-Type", "application/json"), ("Allow", "GET, HEAD"),
                                                      ("Content-Length", str(len(body)))])
            return [body]
        report = self.report()
        body = orjson.dumps(report)
        status = "503 Service Unavailable" if report["status"] == DOWN else "200 OK"
        start_response(status, [("Content-Type", "application/json"), ("Cache-Control", "no-store"),
                                ("Content-Length", str(len(body)))])
        return [] if environ["REQUEST_METHOD"] == "HEAD" else [body]


class WithHealth:
    """Answers :data:`PATH` with ``health``; everything else goes to ``app``."""

    def __init__(self, app: Callable[..., Any], health: Health) -> None:
        self._app = app
        self._health = health

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        if environ.get("PATH_INFO") == PATH:
            return self._health(environ, start_response)
        return self._app(environ, start_response)
