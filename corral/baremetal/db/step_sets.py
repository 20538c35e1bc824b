"""Deploy templates and runbooks: named, ordered sets of steps.

A deploy template (1.55) is named after a trait; its steps run when an
instance asks for that trait.  A runbook (1.92) is a set of clean or
service steps a node may run when it carries one of the runbook's traits.
Both are plain dicts keyed by column name, with ``steps`` (and, for
runbooks, ``traits``) attached.  Every function takes an open connection.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from corral.baremetal.db import json_columns
from corral.baremetal.db.nodes import utcnow
from corral.baremetal.db.tables import deploy_template_steps, deploy_templates, runbook_steps, runbook_traits, runbooks

_JSON = {"extra": {}}
_STEP_JSON = {"args": {}}


class Kind:
    """Where one kind of step set lives."""

    def __init__(self, table: sa.Table, steps: sa.Table, key: str, order: str) -> None:
        self.table = table
        self.steps = steps
        self.key = key  # the steps' foreign key column
        self.order = order  # the steps' ordering column

    def step_rows(self, set_id: int, steps: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        now = utcnow()
        rows = []
        for position, step in enumerate(steps):
            row = {self.key: set_id, "interface": step["interface"], "step": step["step"],
                   "args": step.get("args") or {}, "created_at": now}
            if self.order == "position":
                row["priority"] = step["priority"]
                row["position"] = position
            else:
                row["order"] = step["order"]
            rows.append(json_columns.encode(row, _STEP_JSON))
        return rows


TEMPLATES = Kind(deploy_templates, deploy_template_steps, "deploy_template_id", "position")
RUNBOOKS = Kind(runbooks, runbook_steps, "runbook_id", "order")

SORT_KEYS = frozenset({"id", "uuid", "name", "created_at", "updated_at"})


def _steps_of(conn: Connection, kind: Kind, ids: Sequence[int]) -> dict[int, list[dict[str, Any]]]:
    found: dict[int, list[dict[str, Any]]] = {set_id: [] for set_id in ids}
    if not ids:
        return found
    steps = kind.steps
    # SELECT * FROM <steps> WHERE <key> IN (:ids) ORDER BY <key>, <order>, id
    query = (sa.select(steps).where(steps.c[kind.key].in_(list(ids)))
             .order_by(steps.c[kind.key], steps.c[kind.order], steps.c.id))
    for row in conn.execute(query):
        step = json_columns.decode(row, _STEP_JSON)
        shown = {"interface": step["interface"], "step": step["step"], "args": step["args"]}
        if kind is TEMPLATES:
            shown["priority"] = step["priority"]
        else:
            shown["order"] = step["order"]
        found[step[kind.key]].append(shown)
    return found


def _traits_of(conn: Connection, ids: Sequence[int]) -> dict[int, list[str]]:
    found: dict[int, list[str]] = {set_id: [] for set_id in ids}
    if not ids:
        return found
    # SELECT runbook_id, trait FROM runbook_traits WHERE runbook_id IN (:ids) ORDER BY trait
    query = (sa.select(runbook_traits.c.runbook_id, runbook_traits.c.trait)
             .where(runbook_traits.c.runbook_id.in_(list(ids))).order_by(runbook_traits.c.trait))
    for set_id, trait in conn.execute(query):
        found[set_id].append(trait)
    return found


def _complete(conn: Connection, kind: Kind, rows: Iterable[Any]) -> list[dict[str, Any]]:
    found = [json_columns.decode(row, _JSON) for row in rows]
    ids = [item["id"] for item in found]
    steps = _steps_of(conn, kind, ids)
    traits = _traits_of(conn, ids) if kind is RUNBOOKS else {}
    for item in found:
        item["steps"] = steps[item["id"]]
        if kind is RUNBOOKS:
            item["traits"] = traits[item["id"]]
    return found


def get(conn: Connection, kind: Kind, *, set_id: int | None = None, uuid: str | None = None,
        name: str | None = None) -> dict[str, Any] | None:
    # SELECT * FROM <table> WHERE id = :id | uuid = :uuid | name = :name
    table = kind.table
    query = sa.select(table)
    if set_id is not None:
        query = query.where(table.c.id == set_id)
    elif uuid is not None:
        query = query.where(table.c.uuid == uuid)
    else:
        query = query.where(table.c.name == name)
    found = _complete(conn, kind, conn.execute(query))
    return found[0] if found else None


def list_sets(conn: Connection, kind: Kind, *, filters: Mapping[str, Any] | None = None, sort_key: str = "id",
              sort_dir: str = "asc", limit: int | None = None,
              marker: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    # SELECT * FROM <table> WHERE <filters> [AND after marker] ORDER BY <sort_key>, id LIMIT :limit
    table = kind.table
    query = sa.select(table)
    for key, value in (filters or {}).items():
        if key == "project":
            # A project sees its own runbooks and the public ones.
            query = query.where(sa.or_(table.c.owner == value, table.c.public))
        elif key == "name_in":
            query = query.where(table.c.name.in_(list(value)))
        else:
            query = query.where(table.c[key] == value)
    column = table.c[sort_key]
    ascending = sort_dir == "asc"
    if marker is not None:
        value = marker[sort_key]
        id_after = table.c.id > marker["id"] if ascending else table.c.id < marker["id"]
        beyond = column > value if ascending else column < value
        query = query.where(id_after if sort_key == "id" else sa.or_(beyond, sa.and_(column == value, id_after)))
    order = [column.asc() if ascending else column.desc()]
    if sort_key != "id":
        order.append(table.c.id.asc() if ascending else table.c.id.desc())
    query = query.order_by(*order)
    if limit is not None:
        query = query.limit(limit)
    return _complete(conn, kind, conn.execute(query))


def insert(conn: Connection, kind: Kind, values: Mapping[str, Any], steps: Sequence[Mapping[str, Any]],
           traits: Sequence[str] = ()) -> int:
    # INSERT INTO <table> (...) VALUES (...); INSERT INTO <steps> ...; INSERT INTO runbook_traits ...
    result = conn.execute(kind.table.insert().values(created_at=utcnow(), **json_columns.encode(values, _JSON)))
    set_id = int(result.inserted_primary_key[0])
    replace_steps(conn, kind, set_id, steps)
    if traits:
        set_traits(conn, set_id, traits)
    return set_id


def update(conn: Connection, kind: Kind, set_id: int, values: Mapping[str, Any],
           steps: Sequence[Mapping[str, Any]] | None = None) -> None:
    # UPDATE <table> SET ..., updated_at = :now WHERE id = :id
    conn.execute(kind.table.update().where(kind.table.c.id == set_id)
                 .values(updated_at=utcnow(), **json_columns.encode(values, _JSON)))
    if steps is not None:
        replace_steps(conn, kind, set_id, steps)


def replace_steps(conn: Connection, kind: Kind, set_id: int, steps: Sequence[Mapping[str, Any]]) -> None:
    # DELETE FROM <steps> WHERE <key> = :id; INSERT INTO <steps> ...
    conn.execute(kind.steps.delete().where(kind.steps.c[kind.key] == set_id))
    rows = kind.step_rows(set_id, steps)
    if rows:
        conn.execute(kind.steps.insert(), rows)


def delete(conn: Connection, kind: Kind, set_id: int) -> None:
    # DELETE FROM <steps> WHERE <key> = :id; [DELETE FROM runbook_traits ...]; DELETE FROM <table> WHERE id = :id
    conn.execute(kind.steps.delete().where(kind.steps.c[kind.key] == set_id))
    if kind is RUNBOOKS:
        conn.execute(runbook_traits.delete().where(runbook_traits.c.runbook_id == set_id))
    conn.execute(kind.table.delete().where(kind.table.c.id == set_id))


def set_traits(conn: Connection, runbook_id: int, traits: Iterable[str]) -> None:
    # DELETE FROM runbook_traits WHERE runbook_id = :id; INSERT INTO runbook_traits ...
    conn.execute(runbook_traits.delete().where(runbook_traits.c.runbook_id == runbook_id))
    now = utcnow()
    rows = [{"runbook_id": runbook_id, "trait": trait, "created_at": now} for trait in sorted(set(traits))]
    if rows:
        conn.execute(runbook_traits.insert(), rows)


def add_trait(conn: Connection, runbook_id: int, trait: str) -> None:
    # INSERT INTO runbook_traits (runbook_id, trait) VALUES (...) unless present
    present = conn.execute(sa.select(runbook_traits.c.trait).where(
        runbook_traits.c.runbook_id == runbook_id, runbook_traits.c.trait == trait)).first()
    if present is None:
        conn.execute(runbook_traits.insert().values(runbook_id=runbook_id, trait=trait, created_at=utcnow()))


def remove_trait(conn: Connection, runbook_id: int, trait: str) -> bool:
    # DELETE FROM runbook_traits WHERE runbook_id = :id AND trait = :trait
    result = conn.execute(runbook_traits.delete().where(
        runbook_traits.c.runbook_id == runbook_id, runbook_traits.c.trait == trait))
    return result.rowcount > 0


def templates_for_traits(conn: Connection, traits: Sequence[str]) -> list[dict[str, Any]]:
    """The deploy templates named after any of ``traits`` (by name)."""
    if not traits:
        return []
    return list_sets(conn, TEMPLATES, filters={"name_in": list(traits)}, sort_key="name")
