"""PostgreSQL: claims for new consumers, on the driver's own connection.

The usual claim (``PUT /allocations/{consumer}`` with ``consumer_generation:
null``) is the hot write of a busy cloud.  On PostgreSQL it takes two
statements, sent with psycopg directly: one locks the providers (lowest id
first), one creates the consumers, inserts the allocations, bumps the
providers' generations and returns the capacity as it was just before.  The
second statement's snapshot is taken once the first holds its locks, so the
capacity it returns is current; the check runs on it while the locks are
held, and any refusal rolls everything back.  SQLAlchemy is not in the way:
building its execution context cost as much as the driver's own work.
(Sending both statements in one psycopg pipeline saves a round trip, but
psycopg then polls the socket while PostgreSQL waits for a lock, and that
costs more than it saves.)

Consumers that already hold allocations (without a consumer record, which
only data from elsewhere can have) change nothing here: the caller takes
the general path for them, in the same transaction.
"""

from __future__ import annotations

import contextlib
import datetime
from collections.abc import Iterable, Iterator
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from corral.core import errors
from corral.placement.db import consumers
from corral.placement.domain import allocations as rules
from corral.placement.domain.allocations import ConsumerAllocations
from corral.placement.domain.inventory import Inventory

_LOCK = b"""
SELECT rp.id, rp.uuid FROM resource_providers rp
WHERE rp.uuid = ANY(CAST(%(provider_uuids)s AS varchar[]))
ORDER BY rp.id
FOR UPDATE
"""

# The writes of a WITH are invisible to its SELECT: it returns the usage
# from before them.  PostgreSQL runs every data-modifying part to
# completion, read or not.
_CLAIM = b"""
WITH in_use AS (
    SELECT EXISTS (SELECT 1 FROM allocations
                   WHERE consumer_id = ANY(CAST(%(consumer_uuids)s AS varchar[]))) AS yes
), new_consumers AS (
    INSERT INTO consumers (uuid, project_id, user_id, consumer_type_id, generation, created_at)
    SELECT uuid, project_id, user_id, consumer_type_id, 1, %(now)s
    FROM unnest(CAST(%(consumer_uuids)s AS varchar[]), CAST(%(project_ids)s AS integer[]),
                CAST(%(user_ids)s AS integer[]), CAST(%(type_ids)s AS integer[]))
         AS wanted(uuid, project_id, user_id, consumer_type_id)
    WHERE NOT (SELECT yes FROM in_use)
    ON CONFLICT DO NOTHING
    RETURNING id
), new_allocations AS (
    INSERT INTO allocations (resource_provider_id, consumer_id, resource_class_id, used, created_at)
    SELECT rp.id, wanted.consumer_uuid, wanted.class_id, wanted.used, %(now)s
    FROM unnest(CAST(%(row_providers)s AS varchar[]), CAST(%(row_consumers)s AS varchar[]),
                CAST(%(row_classes)s AS integer[]), CAST(%(row_amounts)s AS integer[]))
         AS wanted(provider_uuid, consumer_uuid, class_id, used)
    JOIN resource_providers rp ON rp.uuid = wanted.provider_uuid
    WHERE NOT (SELECT yes FROM in_use)
    RETURNING id
), bumped AS (
    UPDATE resource_providers SET generation = generation + 1, updated_at = %(now)s
    WHERE uuid = ANY(CAST(%(provider_uuids)s AS varchar[])) AND NOT (SELECT yes FROM in_use)
    RETURNING id
)
SELECT inv.resource_provider_id, inv.resource_class_id,
       inv.total, inv.reserved, inv.min_unit, inv.max_unit, inv.step_size, inv.allocation_ratio,
       COALESCE((SELECT SUM(a.used) FROM allocations a
                 WHERE a.resource_provider_id = inv.resource_provider_id
                   AND a.resource_class_id = inv.resource_class_id), 0) AS used,
       (SELECT count(*) FROM new_consumers) AS consumers_created,
       (SELECT yes FROM in_use) AS consumers_in_use
FROM inventories inv JOIN resource_providers rp ON rp.id = inv.resource_provider_id
WHERE rp.uuid = ANY(CAST(%(provider_uuids)s AS varchar[]))
"""


def claim(
    conn: Connection,
    requests: list[ConsumerAllocations],
    provider_uuids: list[str],
    class_ids: dict[str, int],
    now: datetime.datetime,
    cache: consumers.IdCache | None,
) -> bool:
    """Write the claims; False (nothing written) when a consumer already holds allocations."""
    params = _params(conn, requests, provider_uuids, class_ids, now, cache)
    with _driver_errors(conn), conn.connection.driver_connection.cursor() as cursor:
        locked = {uuid: ident for ident, uuid in cursor.execute(_LOCK, params).fetchall()}
        missing = [uuid for uuid in provider_uuids if uuid not in locked]
        if missing:
            raise errors.BadRequest(f"Allocation for resource provider '{missing[0]}' that does not exist.")
        capacity = cursor.execute(_CLAIM, params).fetchall()
    if capacity and capacity[0][-1]:
        return False
    created = capacity[0][-2] if capacity else None
    if created != len(requests):
        # Some consumer exists after all (or no inventory row came back to
        # say): its generation decides first, as when it is read up front.
        existing = consumers.get_many(conn, [request.consumer_uuid for request in requests])
        for request in requests:
            stored = existing.get(request.consumer_uuid)
            rules.check_generation(request, stored.generation if stored else None)
        if created is not None:
            raise rules.concurrent_consumer_update(requests[0].consumer_uuid)
    _check_capacity(requests, locked, capacity, class_ids)
    return True


def _params(
    conn: Connection,
    requests: list[ConsumerAllocations],
    provider_uuids: list[str],
    class_ids: dict[str, int],
    now: datetime.datetime,
    cache: consumers.IdCache | None,
) -> dict[str, Any]:
    rows = [
        (provider_uuid, request.consumer_uuid, class_ids[rc], amount)
        for request in requests
        for provider_uuid, amounts in request.allocations.items()
        for rc, amount in amounts.items()
    ]
    return {
        "now": now,
        "provider_uuids": _array(provider_uuids),
        "consumer_uuids": _array(request.consumer_uuid for request in requests),
        "project_ids": _array(consumers.project_id(conn, request.project_id, now, cache) for request in requests),
        "user_ids": _array(consumers.user_id(conn, request.user_id, now, cache) for request in requests),
        "type_ids": _array(consumers.consumer_type_id(conn, request.consumer_type, now, cache) for request in requests),
        "row_providers": _array(row[0] for row in rows),
        "row_consumers": _array(row[1] for row in rows),
        "row_classes": _array(row[2] for row in rows),
        "row_amounts": _array(row[3] for row in rows),
    }


def _array(values: Iterable[object]) -> str:
    """A PostgreSQL array literal: None is NULL, anything else is quoted (the statements cast it to the array's type).

    psycopg turns a Python list into an array parameter with several times
    the work PostgreSQL spends reading this text.
    """
    return "{" + ",".join(_element(value) for value in values) + "}"


def _element(value: object) -> str:
    if value is None:
        return "NULL"
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


@contextlib.contextmanager
def _driver_errors(conn: Connection) -> Iterator[None]:
    """Raise the driver's errors as SQLAlchemy would, so that retries (deadlocks)
    and dropping a broken connection work as for any other statement."""
    try:
        yield
    except conn.dialect.loaded_dbapi.Error as error:
        invalidated = conn.dialect.is_disconnect(error, conn.connection.dbapi_connection, None)
        if invalidated:
            conn.invalidate(error)
        raise sa.exc.DBAPIError.instance(
            "claim for new consumers", None, error, conn.dialect.loaded_dbapi.Error,
            connection_invalidated=invalidated, dialect=conn.dialect,
        ) from error


def _check_capacity(requests: list[ConsumerAllocations], locked: dict[str, int], capacity: list[tuple],
                    class_ids: dict[str, int]) -> None:
    current = {(row[0], row[1]): (Inventory(*row[2:8]), int(row[8])) for row in capacity}
    wanted: dict[tuple[int, int], list[int]] = {}
    for request in requests:
        for provider_uuid, amounts in request.allocations.items():
            for rc, amount in amounts.items():
                wanted.setdefault((locked[provider_uuid], class_ids[rc]), []).append(amount)
    uuids = {ident: uuid for uuid, ident in locked.items()}
    rules.check_capacity(current, wanted, uuids, {ident: name for name, ident in class_ids.items()})
