"""What is known about a node beyond its row: history, inventory, firmware, shards.

Every function takes an open connection, except :func:`record`, which
writes one history entry for a conductor task, in a transaction that
checks the task still holds the node's lock.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa
from oslo_utils import uuidutils
from sqlalchemy.engine import Connection

from corral.baremetal.db import json_columns
from corral.baremetal.db.nodes import utcnow
from corral.baremetal.db.tables import firmware_components, node_history, node_inventory, nodes
from corral.baremetal.domain import states

# Events longer than this are cut (upstream truncates its text column too).
MAX_EVENT_LENGTH = 65535

_EVENT_TYPES = (
    ({states.CLEANING, states.CLEANWAIT, states.CLEANHOLD}, "cleaning"),
    ({states.DEPLOYING, states.DEPLOYWAIT, states.DEPLOYHOLD}, "deploying"),
    ({states.SERVICING, states.SERVICEWAIT, states.SERVICEHOLD}, "servicing"),
    ({states.INSPECTING, states.INSPECTWAIT}, "inspection"),
    ({states.RESCUING, states.RESCUEWAIT, states.UNRESCUING}, "rescue"),
    ({states.VERIFYING}, "verification"),
    ({states.DELETING}, "undeploying"),
)


def event_type(state: str) -> str:
    """The kind of work a node was doing in ``state``, for its history."""
    for members, name in _EVENT_TYPES:
        if state in members:
            return name
    return "provisioning"


def record(task: Any, event: str, kind: str, *, started: datetime.datetime | None = None,
           error: bool = False) -> None:
    """Add a history entry for the task's node (its state as it is now)."""
    node = task.node
    duration = None
    if isinstance(started, datetime.datetime):
        duration = int((utcnow() - started).total_seconds())
    row = {
        "uuid": uuidutils.generate_uuid(),
        "node_id": task.node_id,
        "conductor": task.conductor.host,
        "event_type": kind,
        "severity": "ERROR" if error else "INFO",
        "event": event[:MAX_EVENT_LENGTH],
        "user": None,
        "project": None,
        "state": node.get("provision_state"),
        "target_provision_state": node.get("target_provision_state"),
        "duration_seconds": duration,
        "created_at": utcnow(),
    }
    # INSERT INTO node_history (...) VALUES (...), with the task's lock checked in the same transaction
    task.write(lambda conn: conn.execute(node_history.insert().values(**row)))


HISTORY_SORT_KEYS = frozenset({"created_at", "id", "uuid", "severity", "event_type"})


def history_of(conn: Connection, node_id: int, *, sort_key: str = "created_at", sort_dir: str = "asc",
               limit: int | None = None, marker: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    # SELECT * FROM node_history WHERE node_id = :node_id [AND after marker] ORDER BY <key>, id LIMIT :limit
    column = node_history.c[sort_key]
    ascending = sort_dir == "asc"
    query = sa.select(node_history).where(node_history.c.node_id == node_id)
    if marker is not None:
        id_after = node_history.c.id > marker["id"] if ascending else node_history.c.id < marker["id"]
        beyond = column > marker[sort_key] if ascending else column < marker[sort_key]
        query = query.where(sa.or_(beyond, sa.and_(column == marker[sort_key], id_after)))
    query = query.order_by(column.asc() if ascending else column.desc(),
                           node_history.c.id.asc() if ascending else node_history.c.id.desc())
    if limit is not None:
        query = query.limit(limit)
    return [dict(row._mapping) for row in conn.execute(query)]


def history_entry(conn: Connection, uuid: str) -> dict[str, Any] | None:
    # SELECT * FROM node_history WHERE uuid = :uuid
    row = conn.execute(sa.select(node_history).where(node_history.c.uuid == uuid)).first()
    return dict(row._mapping) if row is not None else None


# ------------------------------------------------------------- inventory

_INVENTORY_JSON = {"inventory_data": {}, "plugin_data": {}}


def store_inventory(conn: Connection, node_id: int, inventory: Mapping[str, Any],
                    plugin_data: Mapping[str, Any]) -> None:
    # DELETE FROM node_inventory WHERE node_id = :id; INSERT INTO node_inventory (...) VALUES (...)
    conn.execute(node_inventory.delete().where(node_inventory.c.node_id == node_id))
    values = json_columns.encode({"node_id": node_id, "inventory_data": dict(inventory),
                                  "plugin_data": dict(plugin_data)}, _INVENTORY_JSON)
    conn.execute(node_inventory.insert().values(created_at=utcnow(), **values))


def inventory_of(conn: Connection, node_id: int) -> dict[str, Any] | None:
    # SELECT * FROM node_inventory WHERE node_id = :id
    row = conn.execute(sa.select(node_inventory).where(node_inventory.c.node_id == node_id)).first()
    return json_columns.decode(row, _INVENTORY_JSON) if row is not None else None


# -------------------------------------------------------------- firmware


def firmware_of(conn: Connection, node_id: int) -> list[dict[str, Any]]:
    # SELECT * FROM firmware_information WHERE node_id = :id ORDER BY component
    query = (sa.select(firmware_components).where(firmware_components.c.node_id == node_id)
             .order_by(firmware_components.c.component))
    return [dict(row._mapping) for row in conn.execute(query)]


def flash_firmware(conn: Connection, node_id: int, component: str, version: str,
                   identity: Mapping[str, str | None] | None = None) -> None:
    """Record that ``component`` now runs ``version`` (the first version seen stays ``initial_version``)."""
    table = firmware_components
    # SELECT id FROM firmware_information WHERE node_id = :id AND component = :component
    found = conn.execute(sa.select(table.c.id).where(table.c.node_id == node_id,
                                                     table.c.component == component)).first()
    now = utcnow()
    if found is None:
        # INSERT INTO firmware_information (...) VALUES (...)
        conn.execute(table.insert().values(node_id=node_id, component=component, initial_version=version,
                                           current_version=version, last_version_flashed=version,
                                           created_at=now, **dict(identity or {})))
        return
    # UPDATE firmware_information SET current_version = :v, last_version_flashed = :v WHERE id = :id
    conn.execute(table.update().where(table.c.id == found.id).values(
        current_version=version, last_version_flashed=version, updated_at=now))


# ---------------------------------------------------------------- shards


def shards(conn: Connection) -> list[dict[str, Any]]:
    """Each shard (None for nodes without one) and how many nodes it has, most first."""
    # SELECT count(id), shard FROM nodes GROUP BY shard
    query = sa.select(sa.func.count(nodes.c.id), nodes.c.shard).group_by(nodes.c.shard)
    found = [{"name": str(shard), "count": int(count)} for count, shard in conn.execute(query)]
    return sorted(found, key=lambda item: (-item["count"], item["name"]))


def children_of(conn: Connection, parent_uuid: str, project: str | None = None) -> list[str]:
    # SELECT uuid FROM nodes WHERE parent_node = :uuid [AND (owner = :p OR lessee = :p)] ORDER BY id
    query = sa.select(nodes.c.uuid).where(nodes.c.parent_node == parent_uuid)
    if project is not None:
        query = query.where(sa.or_(nodes.c.owner == project, nodes.c.lessee == project))
    return list(conn.execute(query.order_by(nodes.c.id)).scalars())
