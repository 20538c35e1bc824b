"""Port and port group queries.  Rows are plain dicts, JSON fields decoded.

Every row read here carries its node's ``node_uuid``, ``node_owner`` and
``node_lessee`` (for access checks) and, for ports, ``portgroup_uuid``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from corral.baremetal.db import json_columns, listing
from corral.baremetal.db.nodes import utcnow
from corral.baremetal.db.tables import nodes, portgroups, ports

PORT_JSON = {"extra": {}, "local_link_connection": {}, "internal_info": {}}
PORTGROUP_JSON = {"extra": {}, "internal_info": {}, "properties": {}}

PORT_SORT_KEYS = listing.sort_keys(ports, PORT_JSON)
PORTGROUP_SORT_KEYS = listing.sort_keys(portgroups, PORTGROUP_JSON)

_pg = portgroups.alias("member_of")


def _node_columns() -> list[Any]:
    return [nodes.c.uuid.label("node_uuid"), nodes.c.owner.label("node_owner"),
            nodes.c.lessee.label("node_lessee")]


def _port_select() -> sa.Select:
    # SELECT ports.*, nodes.uuid AS node_uuid, nodes.owner, nodes.lessee, member_of.uuid AS portgroup_uuid
    #   FROM ports JOIN nodes ON nodes.id = ports.node_id
    #   LEFT JOIN portgroups AS member_of ON member_of.id = ports.portgroup_id
    joined = ports.join(nodes, nodes.c.id == ports.c.node_id).outerjoin(_pg, _pg.c.id == ports.c.portgroup_id)
    return sa.select(ports, *_node_columns(), _pg.c.uuid.label("portgroup_uuid")).select_from(joined)


def _portgroup_select() -> sa.Select:
    # SELECT portgroups.*, nodes.uuid AS node_uuid, nodes.owner, nodes.lessee
    #   FROM portgroups JOIN nodes ON nodes.id = portgroups.node_id
    joined = portgroups.join(nodes, nodes.c.id == portgroups.c.node_id)
    return sa.select(portgroups, *_node_columns()).select_from(joined)


def _where_ident(table: sa.Table, *, row_id: int | None, uuid: str | None, name: str | None,
                 address: str | None) -> Any:
    if row_id is not None:
        return table.c.id == row_id
    if uuid is not None:
        return table.c.uuid == uuid
    if name is not None:
        return table.c.name == name
    return table.c.address == address


# ---------------------------------------------------------------- ports


def get_port(conn: Connection, *, port_id: int | None = None, uuid: str | None = None,
             name: str | None = None, address: str | None = None) -> dict[str, Any] | None:
    # <port select> WHERE ports.id = :id | uuid = :uuid | name = :name | address = :address
    query = _port_select().where(_where_ident(ports, row_id=port_id, uuid=uuid, name=name, address=address))
    row = conn.execute(query).first()
    return json_columns.decode(row, PORT_JSON) if row is not None else None


def list_ports(conn: Connection, filters: Mapping[str, Any], *, sort_key: str = "id", sort_dir: str = "asc",
               limit: int | None = None, marker: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    # <port select> WHERE <filters> [AND (sort_key, id) after marker] ORDER BY sort_key, id LIMIT :limit
    query = _port_select()
    for condition in _conditions(ports, filters):
        query = query.where(condition)
    query = listing.page(query, ports, sort_key=sort_key, sort_dir=sort_dir, limit=limit, marker=marker)
    return [json_columns.decode(row, PORT_JSON) for row in conn.execute(query)]


def ports_of_node(conn: Connection, node_id: int) -> list[dict[str, Any]]:
    return list_ports(conn, {"node_id": node_id})


def insert_port(conn: Connection, values: Mapping[str, Any]) -> int:
    # INSERT INTO ports (...) VALUES (...)
    row = json_columns.encode(values, PORT_JSON)
    result = conn.execute(ports.insert().values(**row, created_at=utcnow()))
    return int(result.inserted_primary_key[0])


def update_port(conn: Connection, port_id: int, values: Mapping[str, Any]) -> None:
    # UPDATE ports SET ..., updated_at = :now WHERE id = :id
    row = json_columns.encode(values, PORT_JSON)
    conn.execute(ports.update().where(ports.c.id == port_id).values(**row, updated_at=utcnow()))


def delete_port(conn: Connection, port_id: int) -> None:
    # DELETE FROM ports WHERE id = :id
    conn.execute(ports.delete().where(ports.c.id == port_id))


# ---------------------------------------------------------- port groups


def get_portgroup(conn: Connection, *, portgroup_id: int | None = None, uuid: str | None = None,
                  name: str | None = None, address: str | None = None) -> dict[str, Any] | None:
    # <portgroup select> WHERE portgroups.id = :id | uuid = :uuid | name = :name | address = :address
    query = _portgroup_select().where(
        _where_ident(portgroups, row_id=portgroup_id, uuid=uuid, name=name, address=address))
    row = conn.execute(query).first()
    return json_columns.decode(row, PORTGROUP_JSON) if row is not None else None


def list_portgroups(conn: Connection, filters: Mapping[str, Any], *, sort_key: str = "id",
                    sort_dir: str = "asc", limit: int | None = None,
                    marker: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    # <portgroup select> WHERE <filters> [AND (sort_key, id) after marker] ORDER BY sort_key, id LIMIT :limit
    query = _portgroup_select()
    for condition in _conditions(portgroups, filters):
        query = query.where(condition)
    query = listing.page(query, portgroups, sort_key=sort_key, sort_dir=sort_dir, limit=limit, marker=marker)
    return [json_columns.decode(row, PORTGROUP_JSON) for row in conn.execute(query)]


def portgroups_of_node(conn: Connection, node_id: int) -> list[dict[str, Any]]:
    return list_portgroups(conn, {"node_id": node_id})


def insert_portgroup(conn: Connection, values: Mapping[str, Any]) -> int:
    # INSERT INTO portgroups (...) VALUES (...)
    row = json_columns.encode(values, PORTGROUP_JSON)
    result = conn.execute(portgroups.insert().values(**row, created_at=utcnow()))
    return int(result.inserted_primary_key[0])


def update_portgroup(conn: Connection, portgroup_id: int, values: Mapping[str, Any]) -> None:
    # UPDATE portgroups SET ..., updated_at = :now WHERE id = :id
    row = json_columns.encode(values, PORTGROUP_JSON)
    conn.execute(portgroups.update().where(portgroups.c.id == portgroup_id).values(**row, updated_at=utcnow()))


def delete_portgroup(conn: Connection, portgroup_id: int) -> None:
    # DELETE FROM portgroups WHERE id = :id
    conn.execute(portgroups.delete().where(portgroups.c.id == portgroup_id))


def member_count(conn: Connection, portgroup_id: int) -> int:
    # SELECT count(*) FROM ports WHERE portgroup_id = :id
    query = sa.select(sa.func.count()).select_from(ports).where(ports.c.portgroup_id == portgroup_id)
    return int(conn.execute(query).scalar_one())


def set_members_physical_network(conn: Connection, portgroup_id: int, physical_network: str | None) -> None:
    # UPDATE ports SET physical_network = :value WHERE portgroup_id = :id
    conn.execute(ports.update().where(ports.c.portgroup_id == portgroup_id)
                 .values(physical_network=physical_network, updated_at=utcnow()))


# ------------------------------------------------------------- filters


def _conditions(table: sa.Table, filters: Mapping[str, Any]) -> Iterable[Any]:
    for key, value in filters.items():
        if key == "project":
            yield sa.or_(nodes.c.owner == value, nodes.c.lessee == value)
        elif key == "conductor_groups":
            yield nodes.c.conductor_group.in_([group.lower() for group in value])
        elif key == "shard":
            yield nodes.c["shard"].in_(list(value))
        elif key == "description_contains":
            yield table.c.description.contains(value, autoescape=True)
        elif key == "address":
            # Addresses are stored normalised (lower case).
            yield table.c.address == value.lower()
        else:
            yield table.c[key] == value


def node_has_shard_column() -> bool:
    """Whether nodes carry a shard (the port list's ``shard`` filter needs it)."""
    return "shard" in nodes.c


def delete_for_node(conn: Connection, node_id: int) -> None:
    # DELETE FROM ports WHERE node_id = :id; DELETE FROM portgroups WHERE node_id = :id
    conn.execute(ports.delete().where(ports.c.node_id == node_id))
    conn.execute(portgroups.delete().where(portgroups.c.node_id == node_id))

