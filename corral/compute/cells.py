"""Cells: their mappings, their databases and the scatter-gather over them.

:meth:`CellRegistry.scatter_gather` runs one task per cell in parallel and
waits for all of them up to ``[cells] timeout``.  Each cell's entry in the
result is the task's return value, :data:`DID_NOT_RESPOND` (timeout) or the
connection error the task raised; :func:`is_failure` is true for the last
two and callers treat both as "the cell is down".

Only a failure to reach a cell makes it "down" (connection refused or
reset, timeouts: :func:`corral.core.db.is_connection_error`).  Any other
error from a cell's task (a value the database refused, a bug) belongs to
the request: :meth:`CellRegistry.scatter_gather` raises it, so the request
fails with its own 4xx (or 500) and other requests never see it.

Waiting for a cell that is down is what makes every request slow, so a
cell that could not be reached or timed out is remembered for ``[cells]
down_cell_recheck_interval`` seconds and reported down at once in that
window (:class:`CellRecentlyDown`); a cell whose previous task is still
running is never given a second one.  When a task times out, the database
connection it is blocked on is shut down from outside, so a hung cell does
not hold worker threads for ever and comes back as soon as it answers.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import sqlalchemy as sa
from oslo_config import cfg
from sqlalchemy import event
from sqlalchemy.engine import Connection

from corral.core import metrics
from corral.core.db import Database, database_from_conf, is_connection_error
from corral.core.db_liveness import shutdown_socket
from corral.compute.db import api_tables as t

LOG = logging.getLogger(__name__)

T = TypeVar("T")

CELL0_UUID = "00000000-0000-0000-0000-000000000000"
CELL0_NAME = "cell0"


class _DidNotRespond:
    def __repr__(self) -> str:
        return "DID_NOT_RESPOND"


DID_NOT_RESPOND = _DidNotRespond()


class CellRecentlyDown(Exception):
    """The cell failed moments ago; it was not asked again."""


def is_failure(result: object) -> bool:
    return result is DID_NOT_RESPOND or isinstance(result, BaseException)


@dataclass(frozen=True)
class CellMapping:
    id: int
    uuid: str
    name: str | None
    database_connection: str
    transport_url: str
    disabled: bool

    @property
    def is_cell0(self) -> bool:
        return self.uuid == CELL0_UUID

    @property
    def identity(self) -> str:
        return f"{self.uuid}({self.name})" if self.name else self.uuid

    @property
    def label(self) -> str:
        """The cell's name in the metrics: its name, or its UUID when it has none."""
        return self.name or self.uuid


def _mapping(row: Any) -> CellMapping:
    return CellMapping(
        id=row.id,
        uuid=row.uuid,
        name=row.name,
        database_connection=row.database_connection,
        transport_url=row.transport_url,
        disabled=bool(row.disabled),
    )


def load_cell_mappings(conn: Connection) -> list[CellMapping]:
    # SELECT * FROM cell_mappings ORDER BY id
    rows = conn.execute(sa.select(t.cell_mappings).order_by(t.cell_mappings.c.id))
    return [_mapping(row) for row in rows]


@dataclass
class _CellHealth:
    retry_at: float = 0.0
    last_error: BaseException | None = None
    # A task that timed out and may still be running against this cell.
    stuck: concurrent.futures.Future[Any] | None = None
    # What the metrics were last told (set on changes only).
    reported_up: bool | None = None


class CellDatabase(Database):
    """A cell's database, whose connections can be cut from outside.

    Every DBAPI connection the engine opens is remembered (weakly) so that,
    when the cell stops answering, :meth:`interrupt` can shut down their
    sockets: threads blocked on them (in a query or in the pool's
    pre-ping) then fail at once instead of waiting for TCP to give up.
    """

    def __init__(self, engine: Any, *, max_retries: int = 20, name: str | None = None) -> None:
        super().__init__(engine, max_retries=max_retries, name=name)
        self._opened: weakref.WeakSet[Any] = weakref.WeakSet()
        event.listen(engine, "connect", self._remember)

    def _remember(self, dbapi_connection: Any, _record: Any) -> None:
        try:
            self._opened.add(dbapi_connection)
        except TypeError:  # a driver whose connections cannot be weakly referenced
            pass

    def interrupt(self) -> None:
        for dbapi_connection in list(self._opened):
            shutdown_socket(dbapi_connection)


class CellRegistry:
    """The cells of one deployment and a database handle for each."""

    def __init__(self, conf: cfg.ConfigOpts, api_db: Database) -> None:
        self._conf = conf
        self._api_db = api_db
        self._lock = threading.Lock()
        self._databases: dict[str, tuple[str, CellDatabase]] = {}
        self._health: dict[str, _CellHealth] = {}
        self._mappings: list[CellMapping] | None = None
        self._loaded_at = 0.0
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=conf.cells.worker_pool_size, thread_name_prefix="cell"
        )

    # ------------------------------------------------------------ mappings

    # Cell mappings change rarely (an operator's command); re-read them now
    # and then rather than on every request.
    MAPPINGS_TTL = 5.0

    def mappings(self, *, include_cell0: bool = True, include_disabled: bool = True) -> list[CellMapping]:
        now = time.monotonic()
        with self._lock:
            cached = self._mappings
            fresh = cached is not None and now - self._loaded_at < self.MAPPINGS_TTL
        if not fresh:
            with self._api_db.read() as conn:
                cached = load_cell_mappings(conn)
            with self._lock:
                self._mappings, self._loaded_at = cached, now
                mapped = {cell.uuid for cell in cached}
                gone = [uuid for uuid in self._databases if uuid not in mapped]
                released = [self._databases.pop(uuid)[1] for uuid in gone]
            # Cells deleted from the mappings keep no connections open.
            for database in released:
                database.dispose()
        assert cached is not None
        return [
            cell
            for cell in cached
            if (include_cell0 or not cell.is_cell0) and (include_disabled or not cell.disabled)
        ]

    def refresh(self) -> None:
        with self._lock:
            self._mappings = None

    def by_id(self, cell_id: int) -> CellMapping:
        for cell in self.mappings():
            if cell.id == cell_id:
                return cell
        self.refresh()
        for cell in self.mappings():
            if cell.id == cell_id:
                return cell
        raise LookupError(f"cell {cell_id} is not mapped")

    def cell0(self) -> CellMapping | None:
        for cell in self.mappings():
            if cell.is_cell0:
                return cell
        return None

    # ----------------------------------------------------------- databases

    def database(self, cell: CellMapping) -> CellDatabase:
        """The cell's database handle (created on first use, replaced when its URL changes)."""
        with self._lock:
            known = self._databases.get(cell.uuid)
            if known is not None and known[0] == cell.database_connection:
                return known[1]
            database = self._new_database(cell.database_connection, cell.label)
            self._databases[cell.uuid] = (cell.database_connection, database)
        if known is not None:
            known[1].dispose()
        return database

    def _new_database(self, url: str, label: str) -> CellDatabase:
        # Every cell takes [database]'s pool options, as nova's cells do.
        timeout = self._conf.cells.connect_timeout
        name = f"compute_cell:{label}"
        plain = database_from_conf(self._conf, url, "database", name=name, connect_timeout=timeout)
        return CellDatabase(plain.engine, max_retries=plain.max_retries, name=name)

    def _abandon_database(self, cell: CellMapping) -> None:
        """Use fresh connections next time: the pooled ones may be hung."""
        with self._lock:
            known = self._databases.pop(cell.uuid, None)
        if known is not None:
            # Unblock the task stuck on it, then let the pool go.
            known[1].interrupt()
            known[1].engine.pool.dispose()

    # ------------------------------------------------------ scatter-gather

    def is_recently_down(self, cell: CellMapping) -> bool:
        with self._lock:
            health = self._health.get(cell.uuid)
            return health is not None and health.retry_at > time.monotonic()

    def scatter_gather(
        self,
        cells: list[CellMapping],
        work: Callable[[CellMapping, CellDatabase], T],
        *,
        timeout: float | None = None,
    ) -> dict[str, T | BaseException | _DidNotRespond]:
        """Run ``work(cell, database)`` in every cell at once; see the module docs."""
        timeout = self._conf.cells.timeout if timeout is None else timeout
        results: dict[str, Any] = {}
        submitted: dict[concurrent.futures.Future[Any], CellMapping] = {}
        for cell in cells:
            skipped = self._skip_reason(cell)
            if skipped is not None:
                metrics.CELL_SKIPPED.labels(cell.label).inc()
                results[cell.uuid] = skipped
                continue
            future = self._executor.submit(self._run, cell, work)
            submitted[future] = cell
        done, not_done = concurrent.futures.wait(submitted, timeout=timeout)
        request_errors: dict[str, BaseException] = {}
        for future in done:
            cell = submitted[future]
            error = future.exception()
            if error is None:
                results[cell.uuid] = future.result()
                self._record_success(cell)
            elif is_connection_error(error):
                results[cell.uuid] = error
                metrics.CELL_FAILURES.labels(cell.label).inc()
                self._record_failure(cell, error)
                LOG.warning("cell %s failed: %s", cell.identity, error)
            else:
                # The cell answered: the request (its values, or the code
                # serving it) is at fault, not the cell.
                request_errors[cell.uuid] = error
        for future in not_done:
            cell = submitted[future]
            results[cell.uuid] = DID_NOT_RESPOND
            LOG.warning("timed out waiting for a response from cell %s", cell.identity)
            metrics.CELL_TIMEOUTS.labels(cell.label).inc()
            future.cancel()
            self._record_failure(cell, None, stuck=future)
            self._abandon_database(cell)
        for cell in cells:
            if cell.uuid in request_errors:
                raise request_errors[cell.uuid]
        return {cell.uuid: results[cell.uuid] for cell in cells}

    def run_in_cell(self, cell: CellMapping, work: Callable[[CellMapping, CellDatabase], T]) -> T:
        """``work`` in one cell, with the same timeout and down-cell memory; raises on failure."""
        result = self.scatter_gather([cell], work)[cell.uuid]
        if result is DID_NOT_RESPOND:
            raise TimeoutError(f"cell {cell.identity} did not respond")
        if isinstance(result, BaseException):
            raise result
        return result  # type: ignore[return-value]

    def _skip_reason(self, cell: CellMapping) -> BaseException | None:
        now = time.monotonic()
        with self._lock:
            health = self._health.get(cell.uuid)
            if health is None:
                return None
            if health.stuck is not None and not health.stuck.done():
                return CellRecentlyDown(f"cell {cell.identity} is still busy with an earlier request")
            if health.retry_at > now:
                return CellRecentlyDown(f"cell {cell.identity} failed recently: {health.last_error}")
        return None

    def _run(self, cell: CellMapping, work: Callable[[CellMapping, CellDatabase], T]) -> T:
        return work(cell, self.database(cell))

    def _record_failure(
        self,
        cell: CellMapping,
        error: BaseException | None,
        stuck: concurrent.futures.Future[Any] | None = None,
    ) -> None:
        with self._lock:
            health = self._health.setdefault(cell.uuid, _CellHealth())
            health.stuck = stuck
            health.last_error = error or TimeoutError("no response")
            health.retry_at = time.monotonic() + self._conf.cells.down_cell_recheck_interval
            reported, health.reported_up = health.reported_up, False
        if reported is not False:
            metrics.CELL_UP.labels(cell.label).set(0)

    def _record_success(self, cell: CellMapping) -> None:
        with self._lock:
            health = self._health.setdefault(cell.uuid, _CellHealth())
            health.retry_at = 0.0
            health.last_error = None
            reported, health.reported_up = health.reported_up, True
        if reported is not True:
            metrics.CELL_UP.labels(cell.label).set(1)

    def forget_failures(self) -> None:
        """Ask every cell again on the next request (tests, operators' reloads)."""
        with self._lock:
            self._health.clear()

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
        with self._lock:
            databases = list(self._databases.values())
            self._databases.clear()
        for _url, database in databases:
            database.dispose()
