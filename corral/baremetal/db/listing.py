"""Keyset pages of any Bare Metal table: ``ORDER BY sort_key, id`` after a marker row."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import sqlalchemy as sa


def page(query: sa.Select, table: sa.Table, *, sort_key: str = "id", sort_dir: str = "asc",
         limit: int | None = None, marker: Mapping[str, Any] | None = None) -> sa.Select:
    """``query`` ordered by ``(sort_key, id)``, rows after ``marker``, at most ``limit``."""
    column = table.c[sort_key]
    ascending = sort_dir == "asc"
    if marker is not None:
        query = query.where(after(table, column, marker, ascending))
    order = [column.asc() if ascending else column.desc()]
    if sort_key != "id":
        order.append(table.c.id.asc() if ascending else table.c.id.desc())
    query = query.order_by(*order)
    if limit is not None:
        query = query.limit(limit)
    return query


def after(table: sa.Table, column: sa.Column, marker: Mapping[str, Any], ascending: bool) -> Any:
    """Rows strictly after the marker in (column, id) order; NULLs sort first."""
    value, marker_id = marker[column.name], marker["id"]
    id_after = table.c.id > marker_id if ascending else table.c.id < marker_id
    if column.name == "id":
        return id_after
    if value is None:
        if ascending:
            return sa.or_(column.is_not(None), sa.and_(column.is_(None), id_after))
        return sa.and_(column.is_(None), id_after)
    beyond = column > value if ascending else column < value
    tied = sa.and_(column == value, id_after)
    if ascending:
        return sa.or_(beyond, tied)
    return sa.or_(beyond, tied, column.is_(None))


def sort_keys(table: sa.Table, json_fields: Iterable[str]) -> frozenset[str]:
    """Columns a list may be sorted by: every column but the JSON documents."""
    return frozenset(column.name for column in table.columns if column.name not in set(json_fields))
