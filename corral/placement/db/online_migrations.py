"""Online data migrations: fix up rows written by older versions while the service runs."""

from __future__ import annotations

import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from corral.core.db import Database
from corral.placement.db import consumers
from corral.placement.db.tables import allocations
from corral.placement.db.tables import consumers as consumers_table


def create_incomplete_consumers(db: Database, project_id: str, user_id: str, batch_size: int) -> tuple[int, int]:
    """Create consumer records for allocations that have none.

    Handles at most ``batch_size`` consumers; returns (found, migrated).
    """

    def work(conn: Connection) -> tuple[int, int]:
        # SELECT DISTINCT a.consumer_id FROM allocations a
        # WHERE NOT EXISTS (SELECT 1 FROM consumers c WHERE c.uuid = a.consumer_id) LIMIT :batch_size
        missing = list(
            conn.execute(
                sa.select(allocations.c.consumer_id)
                .where(~sa.exists().where(consumers_table.c.uuid == allocations.c.consumer_id))
                .distinct()
                .order_by(allocations.c.consumer_id)
                .limit(batch_size)
            ).scalars()
        )
        if not missing:
            return 0, 0
        now = datetime.datetime.now(datetime.UTC).replace(tzinfo=None)
        project = consumers.project_id(conn, project_id, now)
        user = consumers.user_id(conn, user_id, now)
        migrated = sum(
            consumers.create(conn, uuid, project=project, user=user, consumer_type=None, now=now) for uuid in missing
        )
        return len(missing), migrated

    return db.write(work)
