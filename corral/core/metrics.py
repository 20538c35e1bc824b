"""Prometheus metrics: what every process counts, and how they are scraped.

Every metric Corral exports is defined here, with its labels; the code that
counts calls these objects directly (a counter increment, a gauge set).
``docs/metrics.md`` lists them for operators, and their names are stable:
dashboards and tests read them.

Nothing is exported unless ``[metrics] listen`` is set.  ``corral serve``
then runs prometheus_client's multiprocess mode: each process that counts
(every gunicorn worker, the background process of ``--workers N``) calls
:func:`enable` with one directory, after it forked and before it builds
anything, and writes its values to files of its own there; the process that
listens (gunicorn's master, or a background-only process itself) adds up
every process's files at each scrape (:func:`exporter`).  Counters of a
process that died are kept (they only ever grow); gauges of the ``live``
modes are dropped when the master learns of its death
(:func:`process_died`).

Per request the work is two counter increments and a histogram
observation, each a write into a memory-mapped file; nothing is read from
a database at scrape time.  Gauges of state (database pools, open
connections) are sampled once a second by a thread of each process
(:class:`_Sampler`), not updated on every checkout; the conductor counts
nodes by provision state with one grouped query every ``[metrics]
refresh_interval`` seconds.

No label value comes from a client unchecked: routes are the templates the
router matched (or ``(unmatched)``), methods outside the usual ones are
``other``, and databases, cells, conductors and periodic tasks are named
as the operator or the code named them, never with URLs or credentials.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, values
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead

LOG = logging.getLogger(__name__)

# Corral's own metrics (not prometheus_client's default registry, whose
# process and platform collectors mean nothing in multiprocess mode).
REGISTRY = CollectorRegistry(auto_describe=True)

# Seconds between two samples of the state gauges (pools, connections).
SAMPLE_INTERVAL = 1.0

REQUEST_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
TASK_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0)
POSITION_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)

_ALL: list[Any] = []


def _add(metric: Any) -> Any:
    _ALL.append(metric)
    return metric


def _counter(name: str, documentation: str, labels: Iterable[str] = ()) -> Counter:
    return _add(Counter(name, documentation, list(labels), registry=REGISTRY))


def _gauge(name: str, documentation: str, labels: Iterable[str] = (), *, mode: str = "livesum") -> Gauge:
    return _add(Gauge(name, documentation, list(labels), registry=REGISTRY, multiprocess_mode=mode))  # type: ignore[arg-type]


def _histogram(name: str, documentation: str, labels: Iterable[str], buckets: Iterable[float]) -> Histogram:
    return _add(Histogram(name, documentation, list(labels), registry=REGISTRY, buckets=tuple(buckets)))


# ------------------------------------------------------------ processes

PROCESSES = _gauge("corral_processes", "Live Corral processes counting metrics, by role.", ["role"])

# ----------------------------------------------------------------- HTTP

HTTP_REQUESTS = _counter(
    "corral_http_requests", "Requests answered, by service, route template, method and status code.",
    ["service", "route", "method", "status"],
)
HTTP_DURATION = _histogram(
    "corral_http_request_duration_seconds",
    "Time from the application's start on a request to its answer's end, by service, route template and method.",
    ["service", "route", "method"], REQUEST_BUCKETS,
)
HTTP_CONNECTIONS_OPEN = _gauge("corral_http_connections_open", "Client connections open (sampled).")
HTTP_CONNECTIONS_REFUSED = _counter(
    "corral_http_connections_refused", "Connections answered 503 because the process held max_connections.",
)
HTTP_CLIENT_TIMEOUTS = _counter(
    "corral_http_client_timeouts",
    "Connections closed because a client was too slow, by phase (head, body, send).", ["phase"],
)
HTTP_STREAMED_IN_FLIGHT = _gauge(
    "corral_http_streamed_requests_in_flight", "Streamed uploads and downloads running.",
)
HTTP_STREAMED_REFUSED = _counter(
    "corral_http_streamed_requests_refused",
    "Streamed requests answered 503 because max_streamed_requests were running.",
)

# ------------------------------------------------------------- databases

DB_CHECKED_OUT = _gauge("corral_db_pool_checked_out", "Pooled connections in use (sampled).", ["database"])
DB_OVERFLOW = _gauge("corral_db_pool_overflow", "Connections open beyond max_pool_size (sampled).", ["database"])
DB_CAPACITY = _gauge("corral_db_pool_capacity", "max_pool_size + max_overflow of the pools.", ["database"])
DB_WAITS = _counter(
    "corral_db_pool_waits", "Checkouts that found every connection in use and waited for one.", ["database"],
)
DB_POOL_TIMEOUTS = _counter(
    "corral_db_pool_timeouts", "Checkouts that waited pool_timeout without getting a connection.", ["database"],
)
DB_UNAVAILABLE = _counter(
    "corral_db_unavailable",
    "Operations that failed because the database could not be reached, did not answer or had no free "
    "connection (a request's 503).", ["database"],
)
DB_UP = _gauge(
    "corral_db_up", "0 while a process counts the database as down (its last connection attempt got no answer).",
    ["database"], mode="livemin",
)
DB_CONNECTIONS_CUT = _counter(
    "corral_db_connections_cut", "Connections cut because their database stopped answering.", ["database"],
)
DB_RECONNECTS = _counter(
    "corral_db_reconnects", "Times a database that was down answered a new connection again.", ["database"],
)

# ------------------------------------------------------ background work

CONDUCTOR_TASKS_RUNNING = _gauge("corral_conductor_tasks_running", "Conductor work running.", ["conductor"])
CONDUCTOR_TASKS_WAITING = _gauge(
    "corral_conductor_tasks_waiting", "Conductor work accepted and waiting for a worker.", ["conductor"],
)
CONDUCTOR_TASKS_STARTED = _counter("corral_conductor_tasks", "Conductor work accepted.", ["conductor"])
CONDUCTOR_TASKS_REFUSED = _counter(
    "corral_conductor_tasks_refused", "Conductor work refused (503) because every worker was busy.", ["conductor"],
)
PERIODIC_RUNS = _counter("corral_periodic_task_runs", "Runs of a periodic task.", ["task"])
PERIODIC_FAILURES = _counter("corral_periodic_task_failures", "Runs of a periodic task that raised.", ["task"])
PERIODIC_DURATION = _histogram(
    "corral_periodic_task_duration_seconds", "Time one run of a periodic task took.", ["task"], TASK_BUCKETS,
)
BAREMETAL_NODES = _gauge(
    "corral_baremetal_nodes", "Nodes by provision state, counted by a conductor every refresh_interval.",
    ["provision_state"], mode="livemax",
)
BAREMETAL_CONDUCTORS_ALIVE = _gauge(
    "corral_baremetal_conductors_alive", "Conductors whose heartbeat is recent, as a conductor last counted them.",
    mode="livemax",
)
BAREMETAL_NODES_RECOVERED = _counter(
    "corral_baremetal_nodes_recovered",
    "Nodes whose lock a conductor took over from a conductor that stopped (or from itself after a restart).",
    ["conductor"],
)

# ------------------------------------------------------------- Placement

SNAPSHOT_READS = _counter(
    "corral_placement_snapshot_reads", "Topology snapshot reads, by kind (full, changes).", ["kind"],
)
SNAPSHOT_READ_DURATION = _histogram(
    "corral_placement_snapshot_read_seconds", "Time a topology snapshot read took, by kind (full, changes).",
    ["kind"], REQUEST_BUCKETS,
)
SNAPSHOT_POSITIONS_BEHIND = _histogram(
    "corral_placement_snapshot_positions_behind",
    "Positions the snapshot was behind the database when a search found it out of date.", [], POSITION_BUCKETS,
)

# --------------------------------------------------------------- Compute

CELL_UP = _gauge("corral_compute_cell_up", "1 once a cell answered, 0 once it failed or timed out.", ["cell"],
                 mode="livemin")
CELL_TIMEOUTS = _counter("corral_compute_cell_timeouts", "Scatter-gather tasks a cell did not finish in time.",
                         ["cell"])
CELL_FAILURES = _counter("corral_compute_cell_failures", "Scatter-gather tasks that could not reach a cell.",
                         ["cell"])
CELL_SKIPPED = _counter(
    "corral_compute_cell_skipped", "Scatter-gather tasks not started because the cell failed recently.", ["cell"],
)

# -------------------------------------------------------------- Identity

TOKEN_CACHE_HITS = _counter("corral_token_cache_hits", "Tokens found already decrypted in the process's cache.")
TOKEN_CACHE_MISSES = _counter("corral_token_cache_misses", "Tokens decrypted (not in the process's cache).")
TOKEN_REVOCATION_READS = _counter(
    "corral_token_revocation_reads",
    "Reads of the revocation events' version, by result (unchanged, changed, failed).", ["result"],
)


# ------------------------------------------------------ multiprocess mode

_enabled_dir: str | None = None


def enabled() -> bool:
    """Whether this process writes metrics for a listener to export."""
    return _enabled_dir is not None


def prepare_directory(path: str) -> str:
    """An empty directory for the processes' files (what an earlier run left is removed)."""
    if os.path.isdir(path):
        shutil.rmtree(path)
    os.makedirs(path, mode=0o700)
    return path


def enable(path: str, role: str) -> None:
    """Write this process's metrics to files under ``path`` from now on.

    Called once a process has forked and before it builds its
    applications.  Values counted before (in memory, by a parent) are
    dropped: each process starts from zero in files of its own.
    """
    global _enabled_dir
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = path
    # prometheus_client picks its value class when it is imported, from
    # that variable; a process that decides later switches it here.  Every
    # metric's values are made again with it (a labelled metric's children
    # are made on first use).
    values.ValueClass = values.MultiProcessValue()
    for metric in _ALL:
        if metric._labelnames:
            with metric._lock:
                metric._metrics = {}
        else:
            metric._metric_init()
    _enabled_dir = path
    _SAMPLER.reset()
    PROCESSES.labels(role).set(1)


def process_died(path: str, pid: int) -> None:
    """Drop the live gauges of a process that exited (its counters stay)."""
    try:
        mark_process_dead(pid, path)
    except OSError as error:
        LOG.warning("cannot drop the metrics of process %d: %s", pid, error)


def exporter(path: str, authenticate: Callable[[str | None], Any] | None = None) -> Callable[..., Any]:
    """The WSGI application of a metrics listener: ``GET /metrics``, every process of ``path`` added up.

    ``authenticate(authorization header)`` raises to refuse (401).
    """
    registry = CollectorRegistry(auto_describe=False)
    MultiProcessCollector(registry, path=path)

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        if environ.get("PATH_INFO") != "/metrics":
            return _plain(start_response, "404 Not Found", b"Not found: metrics are at /metrics\n")
        if environ.get("REQUEST_METHOD") not in ("GET", "HEAD"):
            return _plain(start_response, "405 Method Not Allowed", b"Only GET and HEAD are allowed here.\n",
                          [("Allow", "GET, HEAD")])
        if authenticate is not None:
            try:
                authenticate(environ.get("HTTP_AUTHORIZATION"))
            except Exception:  # noqa: BLE001 - any failure to authenticate is a 401
                return _plain(start_response, "401 Unauthorized", b"Authentication required.\n",
                              [("WWW-Authenticate", 'Basic realm="corral metrics"')])
        body = generate_latest(registry)
        start_response("200 OK", [("Content-Type", CONTENT_TYPE_LATEST), ("Content-Length", str(len(body))),
                                  ("Cache-Control", "no-store")])
        return [] if environ["REQUEST_METHOD"] == "HEAD" else [body]

    return app


def _plain(start_response: Callable[..., Any], status: str, body: bytes,
           headers: list[tuple[str, str]] | None = None) -> list[bytes]:
    start_response(status, [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(body))),
                            *(headers or [])])
    return [body]


# ---------------------------------------------------------------- requests

_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
# Set by the services' Falcon middleware (corral.core.http) and the
# all-in-one dispatcher, read once the answer is out.
SERVICE_KEY = "corral.service"
ROUTE_KEY = "corral.route"
UNMATCHED = "(unmatched)"


class RequestMeter:
    """Counts each answered request: one counter increment and one histogram observation."""

    def __init__(self, service: str) -> None:
        self._service = service
        self._children: dict[tuple[str, str, str, str], tuple[Any, Any]] = {}
        self._lock = threading.Lock()

    def record(self, environ: Mapping[str, Any], method: str, status: str, seconds: float) -> None:
        key = (environ.get(SERVICE_KEY) or self._service, environ.get(ROUTE_KEY) or UNMATCHED,
               method if method in _METHODS else "other", status)
        pair = self._children.get(key)
        if pair is None:
            with self._lock:
                pair = self._children.get(key)
                if pair is None:
                    pair = (HTTP_REQUESTS.labels(*key), HTTP_DURATION.labels(*key[:3]))
                    self._children[key] = pair
        pair[0].inc()
        pair[1].observe(seconds)


# --------------------------------------------------------------- databases

_DATABASE_GROUPS = {
    "placement_database": "placement",
    "baremetal_database": "baremetal",
    "identity_database": "identity",
    "image_database": "image",
    "api_database": "compute_api",
    "database": "compute_cell",
}


def database_name(group: str | None) -> str | None:
    """The ``database`` label of a service's configuration group."""
    return _DATABASE_GROUPS.get(group or "")


def metered_pool_class(base: type, name: str) -> type:
    """A subclass of the QueuePool ``base`` that counts waits and timeouts under ``name``.

    A class of its own per database, since SQLAlchemy makes a pool again
    (``recreate``) from its class and its constructor's arguments alone.
    """
    waits = DB_WAITS.labels(name)
    timeouts = DB_POOL_TIMEOUTS.labels(name)
    from sqlalchemy import exc

    def _do_get(self: Any) -> Any:
        # What QueuePool does next: wait when none is free and no more may be opened.
        if self.checkedin() == 0 and self.overflow() >= self._max_overflow > -1:
            waits.inc()
            try:
                return base._do_get(self)  # type: ignore[attr-defined]
            except exc.TimeoutError:
                timeouts.inc()
                raise
        return base._do_get(self)  # type: ignore[attr-defined]

    return type(f"Metered{base.__name__}", (base,), {"_do_get": _do_get, "corral_database": name})


def watch_engine(engine: Any, name: str, capacity: int) -> None:
    """Sample ``engine``'s pool under ``name`` for as long as it exists."""
    DB_UP.labels(name).set(1)
    _SAMPLER.add_engine(engine, name, capacity)


# ------------------------------------------------------------- background


@dataclass(frozen=True)
class PoolMeter:
    """A worker pool's gauges and counters (see corral.core.workers)."""

    running: Any
    waiting: Any
    started: Any
    refused: Any


def conductor_pool(conductor: str) -> PoolMeter:
    return PoolMeter(CONDUCTOR_TASKS_RUNNING.labels(conductor), CONDUCTOR_TASKS_WAITING.labels(conductor),
                     CONDUCTOR_TASKS_STARTED.labels(conductor), CONDUCTOR_TASKS_REFUSED.labels(conductor))


_known_states: set[str] = set()


def report_nodes(by_state: Mapping[str, int], always: Iterable[str], conductors_alive: int) -> None:
    """Set the node gauges; a state once reported and now empty goes to 0."""
    _known_states.update(always)
    _known_states.update(by_state)
    for state in _known_states:
        BAREMETAL_NODES.labels(state).set(by_state.get(state, 0))
    BAREMETAL_CONDUCTORS_ALIVE.set(conductors_alive)


# ---------------------------------------------------------------- sampler


class _Sampler:
    """One thread per process setting the sampled gauges every :data:`SAMPLE_INTERVAL` seconds."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._engines: weakref.WeakKeyDictionary[Any, tuple[str, int]] = weakref.WeakKeyDictionary()
        self._gauges: list[tuple[Any, Callable[[], float]]] = []
        self._names: set[str] = set()
        self._pid: int | None = None

    def reset(self) -> None:
        with self._lock:
            self._engines = weakref.WeakKeyDictionary()
            self._gauges = []
            self._names = set()
            self._pid = None

    def add_engine(self, engine: Any, name: str, capacity: int) -> None:
        with self._lock:
            self._engines[engine] = (name, capacity)
        self._start()

    def add_gauge(self, child: Any, read: Callable[[], float]) -> None:
        with self._lock:
            self._gauges.append((child, read))
        self._start()

    def _start(self) -> None:
        if not enabled():
            return
        with self._lock:
            if self._pid == os.getpid():
                return
            self._pid = os.getpid()
        threading.Thread(target=self._run, name="metrics-sampler", daemon=True).start()

    def _run(self) -> None:
        while True:
            try:
                self.sample()
            except Exception:  # noqa: BLE001 - the sampler must outlive a bad sample
                LOG.exception("sampling metrics failed")
            time.sleep(SAMPLE_INTERVAL)

    def sample(self) -> None:
        with self._lock:
            engines = list(self._engines.items())
            gauges = list(self._gauges)
        totals: dict[str, list[int]] = {}
        for engine, (name, capacity) in engines:
            pool = engine.pool
            checked_out = getattr(pool, "checkedout", None)
            overflow = getattr(pool, "overflow", None)
            total = totals.setdefault(name, [0, 0, 0])
            total[0] += checked_out() if checked_out is not None else 0
            total[1] += max(0, overflow()) if overflow is not None else 0
            total[2] += capacity
        for name in self._names - totals.keys():
            totals[name] = [0, 0, 0]
        self._names = set(totals)
        for name, (checked_out, overflow, capacity) in totals.items():
            DB_CHECKED_OUT.labels(name).set(checked_out)
            DB_OVERFLOW.labels(name).set(overflow)
            DB_CAPACITY.labels(name).set(capacity)
        for child, read in gauges:
            child.set(read())


_SAMPLER = _Sampler()


def sample_gauge(child: Any, read: Callable[[], float]) -> None:
    """Set ``child`` to ``read()`` every :data:`SAMPLE_INTERVAL` seconds in this process."""
    _SAMPLER.add_gauge(child, read)
