"""The node lock: ``nodes.reservation`` set by compare-and-set, fenced by a generation.

A conductor owns a node's lock while ``reservation`` holds its host name.
Taking it is ``UPDATE nodes SET reservation = :host, lock_generation =
lock_generation + 1 WHERE id = :id AND reservation IS NULL``: exactly one
of several concurrent takers updates a row.  A lock held by someone else is
retried a few times, then the caller gets :class:`NodeLocked` (409).

The generation fences a conductor presumed dead.  One cut off from the
database (or from everything) stops heartbeating; another conductor takes
its locks over (``take_over``), which moves the reservation and adds one to
the generation.  When the cut-off conductor comes back, its unfinished work
still believes it holds the lock it took; every write it makes is
conditioned on ``reservation = :host AND lock_generation = :generation``
(:func:`check` for writes to other tables, in the same transaction), so it
changes nothing, even if the same host has since taken a new lock on the
node.  Its work ends with :class:`LockLost`, which is logged and recorded
nowhere.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from corral.baremetal.db.tables import nodes
from corral.core.db import Database
from corral.core.errors import Conflict, NotFound


class NodeLocked(Conflict):
    def __init__(self, node_uuid: str, host: str) -> None:
        super().__init__(
            f"Node {node_uuid} is locked by host {host}, please retry after the current operation is completed."
        )


class LockLost(Conflict):
    """This conductor no longer holds the lock its work started with: another took the node over."""

    def __init__(self, node_uuid: str, host: str) -> None:
        super().__init__(f"Node {node_uuid} lost its lock held by {host}.")


def _try_reserve(conn: Connection, node_id: int, host: str) -> tuple[int | None, str | None]:
    """Take the lock: (its generation, None), or (None, the current holder)."""
    # UPDATE nodes SET reservation = :host, lock_generation = lock_generation + 1
    #   WHERE id = :id AND reservation IS NULL
    result = conn.execute(
        nodes.update().where(nodes.c.id == node_id, nodes.c.reservation.is_(None))
        .values(reservation=host, lock_generation=nodes.c.lock_generation + 1)
    )
    # SELECT reservation, lock_generation FROM nodes WHERE id = :id
    row = conn.execute(
        sa.select(nodes.c.reservation, nodes.c.lock_generation).where(nodes.c.id == node_id)
    ).first()
    if row is None:
        raise NotFound(f"Node {node_id} could not be found.")
    if result.rowcount == 1:
        return int(row.lock_generation), None
    return None, row.reservation or ""


def reserve(db: Database, node_id: int, node_uuid: str, host: str, *, attempts: int = 3,
            interval: float = 0.2) -> int:
    """Take the node's lock for ``host`` and return its generation, or raise NodeLocked."""
    holder: str | None = None
    for attempt in range(attempts + 1):
        generation, holder = db.write(_try_reserve, node_id, host)
        if generation is not None:
            return generation
        if holder == "":
            continue  # released between the two statements: try again at once
        if attempt < attempts:
            time.sleep(interval)
    raise NodeLocked(node_uuid, holder or host)


def release(db: Database, node_id: int, host: str, generation: int | None = None) -> bool:
    """Give the lock back; False when ``host`` did not hold it (or held another generation)."""

    def _release(conn: Connection) -> bool:
        # UPDATE nodes SET reservation = NULL WHERE id = :id AND reservation = :host
        #   [AND lock_generation = :generation]
        query = nodes.update().where(nodes.c.id == node_id, nodes.c.reservation == host)
        if generation is not None:
            query = query.where(nodes.c.lock_generation == generation)
        return conn.execute(query.values(reservation=None)).rowcount == 1

    return db.write(_release)


def check(conn: Connection, node_id: int, host: str, generation: int) -> bool:
    """Whether ``host`` still holds the lock of ``generation`` (inside a write transaction).

    The row stays locked until the transaction ends (``FOR UPDATE``; SQLite's
    writers are serialised anyway), so no takeover slips in between this
    check and the writes that follow it.
    """
    # SELECT id FROM nodes WHERE id = :id AND reservation = :host AND lock_generation = :generation FOR UPDATE
    query = sa.select(nodes.c.id).where(
        nodes.c.id == node_id, nodes.c.reservation == host, nodes.c.lock_generation == generation
    ).with_for_update()
    return conn.execute(query).first() is not None


def still_held(db: Database, node_id: int, host: str, generation: int) -> bool:
    """The same question outside a transaction: a cheap read before acting on hardware."""
    # SELECT id FROM nodes WHERE id = :id AND reservation = :host AND lock_generation = :generation
    with db.read() as conn:
        query = sa.select(nodes.c.id).where(
            nodes.c.id == node_id, nodes.c.reservation == host, nodes.c.lock_generation == generation
        )
        return conn.execute(query).first() is not None


def take_over(db: Database, node_id: int, dead_host: str, host: str) -> int | None:
    """Move a lock from ``dead_host`` to ``host``; the new generation, or None when not held by it."""

    def _take(conn: Connection) -> int | None:
        # UPDATE nodes SET reservation = :host, lock_generation = lock_generation + 1
        #   WHERE id = :id AND reservation = :dead_host
        result = conn.execute(
            nodes.update().where(nodes.c.id == node_id, nodes.c.reservation == dead_host)
            .values(reservation=host, lock_generation=nodes.c.lock_generation + 1)
        )
        if result.rowcount != 1:
            return None
        # SELECT lock_generation FROM nodes WHERE id = :id
        return int(conn.execute(sa.select(nodes.c.lock_generation).where(nodes.c.id == node_id)).scalar_one())

    return db.write(_take)


@contextlib.contextmanager
def node_lock(db: Database, node_id: int, node_uuid: str, host: str, *, attempts: int = 3,
              interval: float = 0.2) -> Iterator[int]:
    """Hold the node's lock for the duration of the block (the block gets its generation)."""
    generation = reserve(db, node_id, node_uuid, host, attempts=attempts, interval=interval)
    try:
        yield generation
    finally:
        release(db, node_id, host, generation)


def clear_reservations(db: Database, hosts: list[str]) -> int:
    """Release every lock held by ``hosts`` (conductors that died or restarted)."""
    if not hosts:
        return 0

    def _clear(conn: Connection) -> int:
        # UPDATE nodes SET reservation = NULL, lock_generation = lock_generation + 1 WHERE reservation IN (:hosts)
        result = conn.execute(
            nodes.update().where(nodes.c.reservation.in_(hosts))
            .values(reservation=None, lock_generation=nodes.c.lock_generation + 1)
        )
        return result.rowcount

    return db.write(_clear)
