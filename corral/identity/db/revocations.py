"""Revocation events: written with the change that causes them, read by every process.

Every write also stores a new random value in the one-row table
``revocation_versions``, in the same transaction, so a reader can tell
with one single-row read whether anything changed since it last looked.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterable

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from corral.identity.db.tables import revocation_events, revocation_versions
from corral.identity.domain.revocation import RevocationEvent


def now_us() -> int:
    return time.time_ns() // 1000


def record(conn: Connection, events: Iterable[tuple[str, str, str | None]], valid_for_s: int) -> int:
    """Add events revoking matching tokens issued up to now; the time used (microseconds).

    ``valid_for_s``: the longest a matching token can stay valid (token
    lifetime plus the allowed-expired window); the event is pruned after that.
    """
    stamp = now_us()
    rows = [
        {"kind": kind, "subject": subject, "scope": scope, "issued_before": stamp,
         "prune_after": stamp + valid_for_s * 1_000_000}
        for kind, subject, scope in events
    ]
    if not rows:
        return stamp
    # INSERT INTO revocation_events (kind, subject, scope, issued_before, prune_after) VALUES (...), ...
    conn.execute(revocation_events.insert(), rows)
    # DELETE FROM revocation_events WHERE prune_after < :now
    conn.execute(revocation_events.delete().where(revocation_events.c.prune_after < stamp))
    # UPDATE revocation_versions SET version = :new WHERE id = 1
    conn.execute(revocation_versions.update().where(revocation_versions.c.id == 1)
                 .values(version=secrets.token_hex(16)))
    return stamp


def version(conn: Connection) -> str | None:
    # SELECT version FROM revocation_versions WHERE id = 1
    return conn.execute(sa.select(revocation_versions.c.version).where(revocation_versions.c.id == 1)).scalar()


def events_in_force(conn: Connection) -> list[RevocationEvent]:
    ev = revocation_events.c
    # SELECT kind, subject, scope, issued_before FROM revocation_events WHERE prune_after >= :now
    query = sa.select(ev.kind, ev.subject, ev.scope, ev.issued_before).where(ev.prune_after >= now_us())
    return [RevocationEvent(row.kind, row.subject, row.scope, int(row.issued_before)) for row in conn.execute(query)]
