"""Queries on one cell database: instances, their metadata, services, compute nodes."""

from __future__ import annotations

import datetime
import json
import uuid as uuidlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from corral.compute.db import cell_tables as t
from corral.compute.db.api_queries import utcnow
from corral.compute.db.server_records import tag_conditions

SOFT_DELETED = "soft-delete"

# Sort keys a caller may ask for (upstream's names, mapped to columns).
SORT_COLUMNS = {
    "access_ip_v4": "access_ip_v4", "access_ip_v6": "access_ip_v6", "availability_zone": "availability_zone",
    "config_drive": "config_drive", "created_at": "created_at", "display_description": "display_description",
    "display_name": "display_name", "ephemeral_gb": "ephemeral_gb", "host": "host", "hostname": "hostname",
    "image_ref": "image_ref", "instance_type_id": "flavorid", "key_name": "key_name",
    "launch_index": "launch_index", "launched_at": "launched_at", "locked": "locked",
    "locked_by": "locked_by", "memory_mb": "memory_mb", "node": "node", "power_state": "power_state",
    "progress": "progress", "project_id": "project_id", "reservation_id": "reservation_id",
    "root_gb": "root_gb", "task_state": "task_state", "terminated_at": "terminated_at",
    "updated_at": "updated_at", "user_id": "user_id", "uuid": "uuid", "vcpus": "vcpus",
    "vm_state": "vm_state",
}


@dataclass
class InstanceFilters:
    """What a listing selects, already checked and normalised by the API layer."""

    project_id: str | None = None
    user_id: str | None = None
    # As upstream reads its ``deleted`` filter: False, neither deleted nor
    # soft-deleted; True, deleted or soft-deleted; "any", every instance.
    deleted: bool | str | None = False
    exact: dict[str, Any] = field(default_factory=dict)
    # column -> list of accepted values
    one_of: dict[str, list[Any]] = field(default_factory=dict)
    name_contains: str | None = None
    changes_since: datetime.datetime | None = None
    changes_before: datetime.datetime | None = None
    # A filter that can match nothing here (ip: Corral has no networks).
    match_nothing: bool = False
    # Upstream's tag filters: every one, any one, not every one, none of these.
    tags: list[str] | None = None
    tags_any: list[str] | None = None
    not_tags: list[str] | None = None
    not_tags_any: list[str] | None = None


def instance_dict(row: Any) -> dict[str, Any]:
    instance = dict(row._mapping)
    instance["flavor"] = json.loads(instance["flavor"])
    return instance


def create_instance(conn: Connection, values: dict[str, Any], metadata: dict[str, str]) -> None:
    # INSERT INTO instances (...) VALUES (...); INSERT INTO instance_metadata (...) per item
    values = dict(values)
    values["flavor"] = json.dumps(values["flavor"])
    now = values.setdefault("created_at", utcnow())
    values.setdefault("updated_at", now)
    conn.execute(t.instances.insert().values(**values))
    for key, value in metadata.items():
        conn.execute(t.instance_metadata.insert().values(
            instance_uuid=values["uuid"], key=key, value=value, created_at=now
        ))


def get_instance(conn: Connection, instance_uuid: str, *, read_deleted: bool = False) -> dict[str, Any] | None:
    # SELECT * FROM instances WHERE uuid = :uuid [AND deleted = false]
    query = sa.select(t.instances).where(t.instances.c.uuid == instance_uuid)
    if not read_deleted:
        query = query.where(t.instances.c.deleted.is_(False))
    row = conn.execute(query).first()
    return None if row is None else instance_dict(row)


def update_instance(conn: Connection, instance_uuid: str, expected: dict[str, Any] | None = None,
                    **values: Any) -> int:
    """Compare-and-swap update: only when the row still has the ``expected`` values."""
    # UPDATE instances SET ..., updated_at = now WHERE uuid = :uuid [AND col = :expected ...]
    query = t.instances.update().where(t.instances.c.uuid == instance_uuid)
    for column, value in (expected or {}).items():
        query = query.where(t.instances.c[column].is_(None) if value is None else t.instances.c[column] == value)
    values.setdefault("updated_at", utcnow())
    return conn.execute(query.values(**values)).rowcount


def instance_metadata(conn: Connection, uuids: Sequence[str]) -> dict[str, dict[str, str]]:
    # SELECT instance_uuid, key, value FROM instance_metadata WHERE instance_uuid IN (...) ORDER BY key
    found: dict[str, dict[str, str]] = {u: {} for u in uuids}
    if uuids:
        rows = conn.execute(
            sa.select(t.instance_metadata)
            .where(t.instance_metadata.c.instance_uuid.in_(list(uuids)))
            .order_by(t.instance_metadata.c.key)
        )
        for row in rows:
            found[row.instance_uuid][row.key] = row.value
    return found


# --------------------------------------------------------------- listing


def _null_aware_order(column: sa.ColumnElement[Any], ascending: bool) -> list[Any]:
    # NULLs sort first ascending and last descending on every backend, so
    # that results of several cells merge in the same order.
    if ascending:
        return [sa.case((column.is_(None), 0), else_=1).asc(), column.asc()]
    return [sa.case((column.is_(None), 0), else_=1).desc(), column.desc()]


def _after(column: sa.ColumnElement[Any], value: Any, ascending: bool) -> Any:
    """Rows strictly after ``value`` in the null-aware order."""
    if ascending:
        return column.is_not(None) if value is None else column > value
    if value is None:
        return sa.false()
    return sa.or_(column < value, column.is_(None))


def _equal(column: sa.ColumnElement[Any], value: Any) -> Any:
    return column.is_(None) if value is None else column == value


def _not_soft_deleted() -> Any:
    # vm_state != 'soft-delete' OR vm_state IS NULL
    c = t.instances.c
    return sa.or_(c.vm_state != SOFT_DELETED, c.vm_state.is_(None))


def _where_filters(query: Any, filters: InstanceFilters) -> Any:
    c = t.instances.c
    if filters.match_nothing:
        return query.where(sa.false())
    if filters.project_id is not None:
        query = query.where(c.project_id == filters.project_id)
    if filters.user_id is not None:
        query = query.where(c.user_id == filters.user_id)
    if filters.deleted is True:
        query = query.where(sa.or_(c.deleted.is_(True), c.vm_state == SOFT_DELETED))
    elif filters.deleted is False:
        query = query.where(c.deleted.is_(False), _not_soft_deleted())
    for column, value in filters.exact.items():
        query = query.where(_equal(c[column], value))
    for column, values in filters.one_of.items():
        query = query.where(c[column].in_(values))
    if filters.name_contains:
        query = query.where(c.display_name.contains(filters.name_contains, autoescape=True))
    if filters.changes_since is not None:
        query = query.where(c.updated_at >= filters.changes_since)
    if filters.changes_before is not None:
        query = query.where(c.updated_at <= filters.changes_before)
    for clause in tag_conditions(filters.tags, filters.tags_any, filters.not_tags, filters.not_tags_any):
        query = query.where(clause)
    return query


def list_instances(
    conn: Connection,
    filters: InstanceFilters,
    sort: Sequence[tuple[str, bool]],
    limit: int,
    marker: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Instances in this cell, ordered by ``sort`` ([(column, ascending)]) then uuid.

    ``marker`` is the marker instance's row: only rows after it come back.
    """
    # SELECT * FROM instances WHERE <filters, tags: see tag_conditions> [AND <after marker>]
    #   ORDER BY <sort keys, NULLs first ascending>, uuid LIMIT :limit
    c = t.instances.c
    keys = list(sort) + [("uuid", sort[-1][1] if sort else False)]
    query = _where_filters(sa.select(t.instances), filters)
    if marker is not None:
        clauses = []
        for index, (column, ascending) in enumerate(keys):
            equal_before = [_equal(c[col], marker[col]) for col, _asc in keys[:index]]
            clauses.append(sa.and_(*equal_before, _after(c[column], marker[column], ascending)))
        query = query.where(sa.or_(*clauses))
    order: list[Any] = []
    for column, ascending in keys:
        order.extend(_null_aware_order(c[column], ascending))
    return [instance_dict(row) for row in conn.execute(query.order_by(*order).limit(limit))]


def instances_by_uuid(conn: Connection, uuids: Sequence[str], *, read_deleted: bool) -> list[dict[str, Any]]:
    # SELECT * FROM instances WHERE uuid IN (...) [AND deleted = false]
    query = sa.select(t.instances).where(t.instances.c.uuid.in_(list(uuids)))
    if not read_deleted:
        query = query.where(t.instances.c.deleted.is_(False))
    return [instance_dict(row) for row in conn.execute(query)]


def deleted_or_soft_deleted(conn: Connection, uuids: Sequence[str]) -> set[str]:
    # SELECT uuid FROM instances WHERE uuid IN (...) AND (deleted = true OR vm_state = 'soft-delete')
    query = sa.select(t.instances.c.uuid).where(
        t.instances.c.uuid.in_(list(uuids)),
        sa.or_(t.instances.c.deleted.is_(True), t.instances.c.vm_state == SOFT_DELETED),
    )
    return {row.uuid for row in conn.execute(query)}


def usage(conn: Connection, project_id: str) -> dict[str, int]:
    """Instances, vCPUs and RAM a project uses in this cell.

    Like upstream, neither deleted nor soft-deleted instances count.
    """
    # SELECT count(*), sum(vcpus), sum(memory_mb) FROM instances WHERE project_id = :p AND deleted = false
    #   AND (vm_state != 'soft-delete' OR vm_state IS NULL)
    c = t.instances.c
    row = conn.execute(
        sa.select(sa.func.count(), sa.func.coalesce(sa.func.sum(c.vcpus), 0),
                  sa.func.coalesce(sa.func.sum(c.memory_mb), 0))
        .where(c.project_id == project_id, c.deleted.is_(False), _not_soft_deleted())
    ).one()
    return {"instances": int(row[0]), "cores": int(row[1]), "ram": int(row[2])}


def host_instances(conn: Connection, host: str) -> list[dict[str, Any]]:
    # SELECT * FROM instances WHERE host = :host AND deleted = false ORDER BY id
    query = sa.select(t.instances).where(t.instances.c.host == host, t.instances.c.deleted.is_(False))
    return [instance_dict(row) for row in conn.execute(query.order_by(t.instances.c.id))]


def soft_deleted_before(conn: Connection, host: str, cutoff: datetime.datetime) -> list[dict[str, Any]]:
    # SELECT * FROM instances WHERE host = :host AND deleted = false AND vm_state = 'soft-delete'
    #   AND updated_at < :cutoff
    c = t.instances.c
    query = sa.select(t.instances).where(
        c.host == host, c.deleted.is_(False), c.vm_state == SOFT_DELETED, c.updated_at < cutoff
    )
    return [instance_dict(row) for row in conn.execute(query)]


# --------------------------------------------------------------- services


def service_dict(row: Any) -> dict[str, Any]:
    return dict(row._mapping)


def list_services(conn: Connection, host: str | None = None, binary: str | None = None) -> list[dict[str, Any]]:
    # SELECT * FROM services [WHERE host = :host] [AND binary = :binary] ORDER BY id
    query = sa.select(t.services)
    if host is not None:
        query = query.where(t.services.c.host == host)
    if binary is not None:
        query = query.where(t.services.c.binary == binary)
    return [service_dict(row) for row in conn.execute(query.order_by(t.services.c.id))]


def get_service(conn: Connection, *, uuid: str | None = None, service_id: int | None = None,
                host: str | None = None, binary: str | None = None) -> dict[str, Any] | None:
    # SELECT * FROM services WHERE uuid = :uuid | id = :id | (host = :host AND binary = :binary)
    s = t.services.c
    query = sa.select(t.services)
    if uuid is not None:
        query = query.where(s.uuid == uuid)
    elif service_id is not None:
        query = query.where(s.id == service_id)
    else:
        query = query.where(s.host == host, s.binary == binary)
    row = conn.execute(query).first()
    return None if row is None else service_dict(row)


def register_service(conn: Connection, host: str, binary: str, topic: str | None) -> dict[str, Any]:
    """The service row for (host, binary), created on first start; records a heartbeat."""
    # UPDATE services SET last_seen_up = now, report_count = report_count + 1 WHERE host = :h AND binary = :b
    # (INSERT when no row was updated)
    s = t.services
    now = utcnow()
    updated = conn.execute(
        s.update()
        .where(s.c.host == host, s.c.binary == binary)
        .values(last_seen_up=now, updated_at=now, report_count=s.c.report_count + 1)
    ).rowcount
    if not updated:
        conn.execute(s.insert().values(
            uuid=str(uuidlib.uuid4()), host=host, binary=binary, topic=topic, report_count=1,
            disabled=False, forced_down=False, version=1, last_seen_up=now, created_at=now, updated_at=now,
        ))
    found = get_service(conn, host=host, binary=binary)
    assert found is not None
    return found


def heartbeat(conn: Connection, service_id: int) -> None:
    # UPDATE services SET last_seen_up = now, report_count = report_count + 1 WHERE id = :id
    s = t.services
    now = utcnow()
    conn.execute(s.update().where(s.c.id == service_id).values(
        last_seen_up=now, updated_at=now, report_count=s.c.report_count + 1
    ))


def update_service(conn: Connection, service_id: int, **values: Any) -> None:
    # UPDATE services SET ... WHERE id = :id
    conn.execute(t.services.update().where(t.services.c.id == service_id).values(updated_at=utcnow(), **values))


def delete_service(conn: Connection, service_id: int) -> None:
    # DELETE FROM services WHERE id = :id
    conn.execute(t.services.delete().where(t.services.c.id == service_id))


# ----------------------------------------------------------- compute nodes


def compute_nodes(conn: Connection, host: str | None = None, hostname_like: str | None = None) -> list[dict[str, Any]]:
    """Compute nodes by id; ``hostname_like`` is a LIKE pattern, compared ignoring case."""
    # SELECT * FROM compute_nodes [WHERE host = :host] [AND lower(hypervisor_hostname) LIKE lower(:pattern)]
    #   ORDER BY id
    query = sa.select(t.compute_nodes)
    if host is not None:
        query = query.where(t.compute_nodes.c.host == host)
    if hostname_like is not None:
        query = query.where(t.compute_nodes.c.hypervisor_hostname.ilike(hostname_like))
    return [dict(row._mapping) for row in conn.execute(query.order_by(t.compute_nodes.c.id))]


def hypervisor_type_of(conn: Connection, host: str, node: str | None) -> str | None:
    """The hypervisor type of the host's compute node ``node`` (None when it has none such)."""
    # SELECT hypervisor_type FROM compute_nodes WHERE host = :host AND hypervisor_hostname = :node
    c = t.compute_nodes.c
    return conn.execute(  # type: ignore[no-any-return]
        sa.select(c.hypervisor_type).where(c.host == host, c.hypervisor_hostname == (node or ""))
    ).scalar()


def node_usage(conn: Connection) -> dict[tuple[str, str], dict[str, int]]:
    """What the instances on each (host, node) use: neither deleted ones nor those on no host count."""
    # SELECT host, node, count(*), sum(vcpus), sum(memory_mb), sum(root_gb + ephemeral_gb),
    #   sum(CASE WHEN task_state IS NOT NULL THEN 1 ELSE 0 END)
    #   FROM instances WHERE deleted = false AND host IS NOT NULL GROUP BY host, node
    c = t.instances.c
    query = (
        sa.select(
            c.host, c.node, sa.func.count(), sa.func.sum(c.vcpus), sa.func.sum(c.memory_mb),
            sa.func.sum(c.root_gb + c.ephemeral_gb), sa.func.sum(sa.case((c.task_state.is_not(None), 1), else_=0)),
        )
        .where(c.deleted.is_(False), c.host.is_not(None))
        .group_by(c.host, c.node)
    )
    return {
        (row[0], row[1] or ""): {"running_vms": int(row[2]), "vcpus_used": int(row[3] or 0),
                                 "memory_mb_used": int(row[4] or 0), "local_gb_used": int(row[5] or 0),
                                 "current_workload": int(row[6] or 0)}
        for row in conn.execute(query)
    }


def instances_on_hosts(conn: Connection, hosts: Sequence[str]) -> list[dict[str, Any]]:
    """uuid, display_name and host of the instances on ``hosts`` that are not deleted, by id."""
    # SELECT uuid, display_name, host FROM instances WHERE host IN (...) AND deleted = false ORDER BY id
    c = t.instances.c
    if not hosts:
        return []
    query = sa.select(c.uuid, c.display_name, c.host).where(c.host.in_(list(hosts)), c.deleted.is_(False))
    return [dict(row._mapping) for row in conn.execute(query.order_by(c.id))]


def active_in_window(conn: Connection, begin: datetime.datetime, end: datetime.datetime, project_id: str | None,
                     limit: int | None, after: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Instances that ran during [begin, end), deleted ones included, by project then uuid.

    ``after`` is a marker instance: only instances after it in that order.
    """
    # SELECT * FROM instances WHERE (terminated_at IS NULL OR terminated_at > :begin) AND launched_at < :end
    #   [AND project_id = :p] [AND (project_id > :mp OR (project_id = :mp AND uuid > :mu))]
    #   ORDER BY project_id, uuid [LIMIT :limit]
    c = t.instances.c
    query = sa.select(t.instances).where(
        sa.or_(c.terminated_at.is_(None), c.terminated_at > begin), c.launched_at < end
    )
    if project_id is not None:
        query = query.where(c.project_id == project_id)
    if after is not None:
        query = query.where(sa.or_(
            c.project_id > after["project_id"], sa.and_(c.project_id == after["project_id"], c.uuid > after["uuid"])
        ))
    query = query.order_by(c.project_id, c.uuid)
    if limit is not None:
        query = query.limit(limit)
    return [instance_dict(row) for row in conn.execute(query)]


def compute_hosts(conn: Connection) -> list[str]:
    # SELECT DISTINCT host FROM compute_nodes UNION SELECT host FROM services WHERE binary = 'nova-compute'
    nodes = sa.select(t.compute_nodes.c.host)
    services = sa.select(t.services.c.host).where(t.services.c.binary == "nova-compute")
    return sorted({row.host for row in conn.execute(sa.union(nodes, services))})


def host_instance_uuids(conn: Connection, host: str, uuids: Sequence[str]) -> set[str]:
    """Those of ``uuids`` that are servers of ``host``, deleted ones included."""
    # SELECT uuid FROM instances WHERE host = :host AND uuid IN (:uuids)
    i = t.instances
    found: set[str] = set()
    for start in range(0, len(uuids), 500):
        chunk = list(uuids[start:start + 500])
        found.update(conn.execute(sa.select(i.c.uuid).where(i.c.host == host, i.c.uuid.in_(chunk))).scalars())
    return found


def upsert_compute_node(conn: Connection, values: dict[str, Any]) -> dict[str, Any]:
    # UPDATE compute_nodes SET ... WHERE host = :host AND hypervisor_hostname = :node
    # (INSERT with a new uuid when no row was updated)
    n = t.compute_nodes
    now = utcnow()
    updated = conn.execute(
        n.update()
        .where(n.c.host == values["host"], n.c.hypervisor_hostname == values["hypervisor_hostname"])
        .values(updated_at=now, **{k: v for k, v in values.items() if k != "uuid"})
    ).rowcount
    if not updated and values.get("uuid"):
        # UPDATE compute_nodes SET host = :host, ... WHERE uuid = :uuid
        # A node with a fixed uuid (bare metal) that another host managed moves here.
        updated = conn.execute(
            n.update().where(n.c.uuid == values["uuid"])
            .values(updated_at=now, **{k: v for k, v in values.items() if k != "uuid"})
        ).rowcount
    if not updated:
        conn.execute(n.insert().values(uuid=values.get("uuid") or str(uuidlib.uuid4()), created_at=now,
                                       updated_at=now, **{k: v for k, v in values.items() if k != "uuid"}))
    row = conn.execute(
        sa.select(n).where(n.c.host == values["host"], n.c.hypervisor_hostname == values["hypervisor_hostname"])
    ).one()
    return dict(row._mapping)
