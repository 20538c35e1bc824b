"""Images, their properties and tags: lookups and writes.

An image comes back as a dict of its row with ``properties`` (a dict) and
``tags`` (a list in the order they were added).  Every change to an image
row is a compare-and-set on ``generation``.
"""

from __future__ import annotations

import datetime
import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from corral.image.db.tables import image_members, image_properties, image_tags, images
from corral.image.domain.images import now
from corral.image.domain.listing import ListQuery, Viewer


def get(conn: Connection, image_id: str, *, deleted: bool = False, lock: bool = False) -> dict[str, Any] | None:
    """The image (with properties and tags), or None; deleted images only when asked.

    ``lock`` holds the row until the transaction ends, so that writers of
    one image take turns instead of failing each other's compare-and-set.
    """
    # SELECT images.*, <properties as JSON>, <tags as JSON> FROM images WHERE id = :id [AND NOT deleted]
    #   [FOR UPDATE OF images]
    query = sa.select(images, *_extras(conn.dialect.name)).where(images.c.id == image_id)
    if not deleted:
        query = query.where(images.c.deleted.is_(False))
    if lock:
        query = query.with_for_update(of=images)
    result = conn.execute(query)
    rows = _decoded(result.keys(), result.all())
    return rows[0] if rows else None


def exists(conn: Connection, image_id: str) -> bool:
    """Whether the id was ever used (deleted images included)."""
    # SELECT 1 FROM images WHERE id = :id
    return conn.execute(sa.select(sa.literal(1)).where(images.c.id == image_id)).first() is not None


# JSON aggregate functions by backend: (object of name -> value, array).
_AGGREGATES = {
    "sqlite": (sa.func.json_group_object, sa.func.json_group_array),
    "postgresql": (sa.func.json_object_agg, sa.func.json_agg),
    "mysql": (sa.func.json_objectagg, sa.func.json_arrayagg),
}


_PAIRS = {
    "sqlite": sa.func.json_array,
    "postgresql": sa.func.json_build_array,
    "mysql": sa.func.json_array,
}


def _extras(dialect: str) -> list[Any]:
    """An image row's properties and tags as two JSON columns, so that one statement reads both.

    Each is a correlated subquery on its table's primary key or unique
    index; tags are aggregated in the order they were added.
    """
    as_object, as_array = _AGGREGATES[dialect]
    # (SELECT json_group_object(name, value) FROM image_properties WHERE image_id = images.id)
    properties = (sa.select(sa.cast(as_object(image_properties.c.name, image_properties.c.value), sa.Text))
                  .where(image_properties.c.image_id == images.c.id).scalar_subquery().label("properties_json"))
    # (SELECT json_group_array(json_array(id, value)) FROM image_tags WHERE image_id = images.id)
    # (each tag with its id, to be put in the order they were added: no backend here orders inside
    # an aggregate, and a sorted subquery under a correlated one is read whole for every image)
    pair = _PAIRS[dialect](image_tags.c.id, image_tags.c.value)
    tags = (sa.select(sa.cast(as_array(pair), sa.Text)).where(image_tags.c.image_id == images.c.id)
            .scalar_subquery().label("tags_json"))
    return [properties, tags]


def _decoded(keys: Iterable[str], rows: Iterable[Any]) -> list[dict[str, Any]]:
    """Rows as dicts, their JSON columns made into ``properties`` and ``tags``."""
    names = list(keys)
    decoded = []
    for row in rows:
        item = dict(zip(names, row, strict=True))
        properties = item.pop("properties_json")
        tags = item.pop("tags_json")
        item["properties"] = dict(sorted(orjson.loads(properties).items())) if properties else {}
        item["tags"] = [tag for _id, tag in sorted(orjson.loads(tags))] if tags else []
        decoded.append(item)
    return decoded


def insert(conn: Connection, row: Mapping[str, Any], properties: Mapping[str, str], tags: Iterable[str]) -> None:
    # INSERT INTO images (...) VALUES (...); INSERT INTO image_properties ...; INSERT INTO image_tags ...
    conn.execute(images.insert().values(**row, generation=1, deleted=False))
    _write_extras(conn, row["id"], properties, tags)


def _write_extras(conn: Connection, image_id: str, properties: Mapping[str, str] | None,
                  tags: Iterable[str] | None) -> None:
    if properties is not None:
        # DELETE FROM image_properties WHERE image_id = :id; INSERT INTO image_properties ...
        conn.execute(image_properties.delete().where(image_properties.c.image_id == image_id))
        if properties:
            conn.execute(image_properties.insert(),
                         [{"image_id": image_id, "name": name, "value": value} for name, value in properties.items()])
    if tags is not None:
        # DELETE FROM image_tags WHERE image_id = :id; INSERT INTO image_tags ...
        conn.execute(image_tags.delete().where(image_tags.c.image_id == image_id))
        rows = [{"image_id": image_id, "value": tag} for tag in dict.fromkeys(tags)]
        if rows:
            conn.execute(image_tags.insert(), rows)


def update(conn: Connection, image: Mapping[str, Any], values: Mapping[str, Any], *,
           properties: Mapping[str, str] | None = None, tags: Iterable[str] | None = None,
           status: str | None = None) -> bool:
    """Change the image if nobody changed it since ``image`` was read (and, given ``status``, it is in it)."""
    # UPDATE images SET ..., generation = generation + 1, updated_at = :now
    #  WHERE id = :id AND generation = :seen AND NOT deleted [AND status = :status]
    query = (images.update()
             .where(images.c.id == image["id"], images.c.generation == image["generation"],
                    images.c.deleted.is_(False))
             .values(**values, generation=images.c.generation + 1, updated_at=values.get("updated_at", now())))
    if status is not None:
        query = query.where(images.c.status == status)
    if conn.execute(query).rowcount != 1:
        return False
    _write_extras(conn, image["id"], properties, tags)
    return True


def mark_deleted(conn: Connection, image: Mapping[str, Any]) -> bool:
    """Delete the image (its row stays, so the id is never used again); False if it changed meanwhile."""
    moment = now()
    # UPDATE images SET status = 'deleted', deleted = TRUE, deleted_at = :now, location = NULL, ...
    #  WHERE id = :id AND generation = :seen AND NOT deleted
    changed = conn.execute(
        images.update()
        .where(images.c.id == image["id"], images.c.generation == image["generation"], images.c.deleted.is_(False))
        .values(status="deleted", deleted=True, deleted_at=moment, updated_at=moment, location=None,
                lease_token=None, lease_expires=None, generation=images.c.generation + 1)).rowcount
    if changed != 1:
        return False
    _write_extras(conn, image["id"], {}, [])
    # DELETE FROM image_members WHERE image_id = :id
    conn.execute(image_members.delete().where(image_members.c.image_id == image["id"]))
    return True


# ------------------------------------------------------------------ lists


# A list's statement depends only on the shape of its query (which
# filters, which sort, who looks, whether there is a marker); the values go
# in as parameters.  Statements are built once per shape and kept, so that
# a request does not rebuild and re-key the same SQL expression every time
# (about a third of a first page's time in the process, before).
_STATEMENTS_KEPT = 256


@dataclass(frozen=True)
class _Shape:
    dialect: str
    # None for an admin; else (the viewer has a project, every member status).
    visible: tuple[bool, bool] | None
    # "all", "exact" (a parameter), "no-community" or "own-community".
    visibility: str
    exact: tuple[tuple[str, bool], ...]  # (attribute, whether the value can match its column)
    one_of: tuple[str, ...]
    compare: tuple[tuple[str, str], ...]
    tags: int
    properties: int
    sort: tuple[tuple[str, str], ...]
    marker: bool


def _shape_and_values(dialect: str, query: ListQuery, viewer: Viewer,
                      marker: Mapping[str, Any] | None) -> tuple[_Shape, dict[str, Any]]:
    """What the statement for ``query`` looks like, and its parameters' values."""
    values: dict[str, Any] = {"limit": query.limit}
    visible = None
    if not viewer.is_admin:
        visible = (viewer.project_id is not None, query.member_status == "all")
        values["project"], values["member_status"] = viewer.project_id, query.member_status
    if query.visibility == "all":
        visibility = "all"
    elif query.visibility is not None:
        visibility, values["visibility"] = "exact", query.visibility
    elif viewer.project_id is None:
        visibility = "no-community"
    else:
        visibility, values["project"] = "own-community", viewer.project_id
    exact = []
    for index, (name, value) in enumerate(query.exact.items()):
        value = _column_value(name, value)
        exact.append((name, value is not None))
        values[f"exact_{index}"] = value
    for index, values_in in enumerate(query.one_of.values()):
        values[f"in_{index}"] = list(values_in)
    for index, (_name, _operator, value) in enumerate(query.compare):
        values[f"compare_{index}"] = value
    for index, tag in enumerate(query.tags):
        values[f"tag_{index}"] = tag
    for index, (name, value) in enumerate(query.properties.items()):
        values[f"property_name_{index}"], values[f"property_value_{index}"] = name, value
    if marker is not None:
        for index, (name, _direction) in enumerate(query.sort):
            values[f"marker_{index}"] = _sort_value(name, marker[name])
    shape = _Shape(dialect, visible, visibility, tuple(exact), tuple(query.one_of),
                   tuple((name, operator) for name, operator, _value in query.compare),
                   len(query.tags), len(query.properties), tuple(query.sort), marker is not None)
    return shape, values


def _column_value(name: str, value: Any) -> Any:
    """``value`` as the attribute's column holds it; None when no row can match it."""
    if isinstance(images.c[name].type, (sa.Integer, sa.BigInteger)) and not isinstance(value, int):
        try:
            return int(value)
        except ValueError:
            return None
    return value


def _visible(shape: _Shape) -> Any:
    """Images a non-admin viewer sees: public, community, its own, and shared with it."""
    assert shape.visible is not None
    has_project, every_status = shape.visible
    conditions = [images.c.visibility.in_(("public", "community"))]
    if has_project:
        membership = sa.select(image_members.c.image_id).where(
            image_members.c.image_id == images.c.id, image_members.c.member == sa.bindparam("project"))
        if not every_status:
            membership = membership.where(image_members.c.status == sa.bindparam("member_status"))
        conditions += [images.c.owner == sa.bindparam("project"),
                       sa.and_(images.c.visibility == "shared", membership.exists())]
    return sa.or_(*conditions)


def _visibility(shape: _Shape) -> list[Any]:
    if shape.visibility == "exact":
        return [images.c.visibility == sa.bindparam("visibility")]
    if shape.visibility == "no-community":
        return [images.c.visibility != "community"]
    if shape.visibility == "own-community":
        # Community images are listed by default only to their owner.
        return [sa.or_(images.c.owner == sa.bindparam("project"), images.c.visibility != "community")]
    return []


def _sort_column(name: str) -> Any:
    """Sort columns without NULLs, so that every backend orders them alike and markers compare."""
    column = images.c[name]
    if name in ("size", "virtual_size"):
        return sa.func.coalesce(column, -1)
    if name in ("name", "container_format", "disk_format"):
        return sa.func.coalesce(column, "")
    return column


def _sort_value(name: str, value: Any) -> Any:
    if value is None:
        return -1 if name in ("size", "virtual_size") else ""
    return value


def _after(sort: tuple[tuple[str, str], ...]) -> Any:
    """Rows after the marker (parameters ``marker_<i>``) in the (mixed-direction) sort order."""
    alternatives = []
    for index, (name, direction) in enumerate(sort):
        ties = [_sort_column(key) == sa.bindparam(f"marker_{position}")
                for position, (key, _) in enumerate(sort[:index])]
        column, value = _sort_column(name), sa.bindparam(f"marker_{index}")
        alternatives.append(sa.and_(*ties, column > value if direction == "asc" else column < value))
    return sa.or_(*alternatives)


def _compare(column: Any, operator: str, value: Any) -> Any:
    return {"gt": column > value, "gte": column >= value, "lt": column < value, "lte": column <= value,
            "neq": column != value, "eq": column == value}[operator]


def _filter_conditions(shape: _Shape) -> list[Any]:
    conditions = []
    for index, (name, can_match) in enumerate(shape.exact):
        conditions.append(images.c[name] == sa.bindparam(f"exact_{index}") if can_match else sa.false())
    for index, name in enumerate(shape.one_of):
        conditions.append(images.c[name].in_(sa.bindparam(f"in_{index}", expanding=True)))
    for index, (name, operator) in enumerate(shape.compare):
        conditions.append(_compare(images.c[name], operator, sa.bindparam(f"compare_{index}")))
    for index in range(shape.tags):
        conditions.append(sa.select(image_tags.c.id).where(
            image_tags.c.image_id == images.c.id, image_tags.c.value == sa.bindparam(f"tag_{index}")).exists())
    for index in range(shape.properties):
        conditions.append(sa.select(image_properties.c.name).where(
            image_properties.c.image_id == images.c.id,
            image_properties.c.name == sa.bindparam(f"property_name_{index}"),
            image_properties.c.value == sa.bindparam(f"property_value_{index}")).exists())
    return conditions


# What a list shows of an image (not the bookkeeping; the location only for direct_url).
_LISTED = [column for column in images.columns
           if column.name not in ("staged_size", "lease_token", "lease_expires", "deleted", "deleted_at")]


@functools.lru_cache(maxsize=_STATEMENTS_KEPT)
def _list_statement(shape: _Shape) -> sa.Select[Any]:
    # SELECT <listed>, <properties>, <tags> FROM images WHERE NOT deleted AND status != 'killed'
    #   AND <visible> AND <visibility> AND <filters> [AND <after marker>]
    #   ORDER BY <sort>, created_at, id LIMIT :limit
    conditions = [images.c.deleted.is_(False), images.c.status != "killed", *_filter_conditions(shape)]
    if shape.visible is not None:
        conditions.append(_visible(shape))
    conditions += _visibility(shape)
    if shape.marker:
        conditions.append(_after(shape.sort))
    order = [_sort_column(name).asc() if direction == "asc" else _sort_column(name).desc()
             for name, direction in shape.sort]
    return (sa.select(*_LISTED, *_extras(shape.dialect)).where(*conditions).order_by(*order)
            .limit(sa.bindparam("limit", type_=sa.Integer)))


def list_page(conn: Connection, query: ListQuery, viewer: Viewer,
              marker: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """One page of the images ``viewer`` sees that match ``query``, after ``marker``."""
    shape, values = _shape_and_values(conn.dialect.name, query, viewer, marker)
    result = conn.execute(_list_statement(shape), values)
    return _decoded(result.keys(), result.all())


# --------------------------------------------------------------- quotas


def owner_usage(conn: Connection, owner: str) -> dict[str, int]:
    """What a project's images count against its limits, in one statement."""
    busy = images.c.status.in_(("saving", "uploading", "importing"))
    # SELECT count(*), sum(size) FILTER (stored), sum(staged_size), count(*) FILTER (busy) FROM images
    #  WHERE owner = :owner AND NOT deleted
    stored = sa.case((images.c.location.is_not(None), images.c.size), else_=0)
    row = conn.execute(
        sa.select(sa.func.count(),
                  sa.func.coalesce(sa.func.sum(stored), 0),
                  sa.func.coalesce(sa.func.sum(images.c.staged_size), 0),
                  sa.func.coalesce(sa.func.sum(sa.case((busy, 1), else_=0)), 0))
        .where(images.c.owner == owner, images.c.deleted.is_(False))).one()
    return {"image_count_total": int(row[0]), "image_size_total": int(row[1]), "image_stage_total": int(row[2]),
            "image_count_uploading": int(row[3])}


# ----------------------------------------------------------------- leases


def take_lease(conn: Connection, image: Mapping[str, Any], *, from_status: str, to_status: str, token: str,
               expires: datetime.datetime, values: Mapping[str, Any] | None = None) -> bool:
    """Move the image from ``from_status`` to ``to_status`` for one upload, staging or import."""
    # UPDATE images SET status = :to, lease_token = :token, lease_expires = :expires, ...
    #  WHERE id = :id AND status = :from AND lease_token IS NULL AND NOT deleted
    return conn.execute(
        images.update()
        .where(images.c.id == image["id"], images.c.status == from_status, images.c.lease_token.is_(None),
               images.c.deleted.is_(False))
        .values(status=to_status, lease_token=token, lease_expires=expires, updated_at=now(),
                generation=images.c.generation + 1, **(values or {}))).rowcount == 1


def renew_lease(conn: Connection, image_id: str, token: str, expires: datetime.datetime) -> bool:
    # UPDATE images SET lease_expires = :expires WHERE id = :id AND lease_token = :token AND NOT deleted
    return conn.execute(
        images.update()
        .where(images.c.id == image_id, images.c.lease_token == token, images.c.deleted.is_(False))
        .values(lease_expires=expires)).rowcount == 1


def end_lease(conn: Connection, image_id: str, token: str, values: Mapping[str, Any],
              properties: Mapping[str, str] | None = None) -> bool:
    """Record the result of the upload holding the lease; False when the image was deleted meanwhile."""
    # UPDATE images SET ..., lease_token = NULL, lease_expires = NULL
    #  WHERE id = :id AND lease_token = :token AND NOT deleted
    done = conn.execute(
        images.update()
        .where(images.c.id == image_id, images.c.lease_token == token, images.c.deleted.is_(False))
        .values(**values, lease_token=None, lease_expires=None, updated_at=now(),
                generation=images.c.generation + 1)).rowcount == 1
    if done and properties is not None:
        _write_extras(conn, image_id, properties, None)
    return done


def claim_expired(conn: Connection, image_id: str, token: str, new_token: str, moment: datetime.datetime) -> bool:
    """Take over a lease that is still the expired one seen (its writer did not renew it meanwhile)."""
    # UPDATE images SET lease_token = :new WHERE id = :id AND lease_token = :token AND lease_expires < :now
    return conn.execute(
        images.update()
        .where(images.c.id == image_id, images.c.lease_token == token, images.c.lease_expires < moment)
        .values(lease_token=new_token)).rowcount == 1


def expired_leases(conn: Connection, moment: datetime.datetime, limit: int = 100) -> list[dict[str, Any]]:
    # SELECT id, status, lease_token FROM images WHERE lease_expires < :now AND lease_token IS NOT NULL LIMIT :n
    rows = conn.execute(
        sa.select(images.c.id, images.c.status, images.c.lease_token)
        .where(images.c.lease_expires < moment, images.c.lease_token.is_not(None)).limit(limit))
    return [dict(row._mapping) for row in rows]
