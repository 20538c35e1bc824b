"""The node lock: ``nodes.reservation`` set by compare-and-set.

A conductor owns a node's lock while ``reservation`` holds its host name.
Taking it is ``UPDATE nodes SET reservation = :host WHERE id = :id AND
reservation IS NULL``: exactly one of several concurrent takers updates a
row.  A lock held by someone else is retried a few times, then the caller
gets :class:`NodeLocked` (409).
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


def _try_reserve(conn: Connection, node_id: int, host: str) -> str | None:
    """Take the lock; None when taken, else the current holder."""
    # UPDATE nodes SET reservation = :host WHERE id = :id AND reservation IS NULL
    result = conn.execute(
        nodes.update().where(nodes.c.id == node_id, nodes.c.reservation.is_(None)).values(reservation=host)
    )
    if result.rowcount == 1:
        return None
    # SELECT uuid, reservation FROM nodes WHERE id = :id
    row = conn.execute(sa.select(nodes.c.uuid, nodes.c.reservation).where(nodes.c.id == node_id)).first()
    if row is None:
        raise NotFound(f"Node {node_id} could not be found.")
    return row.reservation or ""


def reserve(db: Database, node_id: int, node_uuid: str, host: str, *, attempts: int = 3,
            interval: float = 0.2) -> None:
    """Take the node's lock for ``host`` or raise NodeLocked."""
    for attempt in range(attempts + 1):
        holder = db.write(_try_reserve, node_id, host)
        if holder is None:
            return
        if holder == "":
            continue  # released between the two statements: try again at once
        if attempt < attempts:
            time.sleep(interval)
    raise NodeLocked(node_uuid, holder or host)


def release(db: Database, node_id: int, host: str) -> bool:
    """Give the lock back; False when ``host`` did not hold it."""

    def _release(conn: Connection) -> bool:
        # UPDATE nodes SET reservation = NULL WHERE id = :id AND reservation = :host
        result = conn.execute(
            nodes.update().where(nodes.c.id == node_id, nodes.c.reservation == host).values(reservation=None)
        )
        return result.rowcount == 1

    return db.write(_release)


@contextlib.contextmanager
def node_lock(db: Database, node_id: int, node_uuid: str, host: str, *, attempts: int = 3,
              interval: float = 0.2) -> Iterator[None]:
    """Hold the node's lock for the duration of the block."""
    reserve(db, node_id, node_uuid, host, attempts=attempts, interval=interval)
    try:
        yield
    finally:
        release(db, node_id, host)


def clear_reservations(db: Database, hosts: list[str]) -> int:
    """Release every lock held by ``hosts`` (conductors that died or restarted)."""
    if not hosts:
        return 0

    def _clear(conn: Connection) -> int:
        # UPDATE nodes SET reservation = NULL WHERE reservation IN (:hosts)
        result = conn.execute(nodes.update().where(nodes.c.reservation.in_(hosts)).values(reservation=None))
        return result.rowcount

    return db.write(_clear)
