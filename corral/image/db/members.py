"""Image members (projects an image is shared with) and single tags."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from corral.core.db import is_duplicate
from corral.image.db.tables import image_members, image_tags, images
from corral.image.domain.images import now


def get(conn: Connection, image_id: str, member: str) -> dict[str, Any] | None:
    # SELECT * FROM image_members WHERE image_id = :image AND member = :member
    row = conn.execute(sa.select(image_members).where(
        image_members.c.image_id == image_id, image_members.c.member == member)).first()
    return None if row is None else dict(row._mapping)


def list_for(conn: Connection, image_id: str) -> list[dict[str, Any]]:
    # SELECT * FROM image_members WHERE image_id = :image ORDER BY created_at, member
    rows = conn.execute(sa.select(image_members).where(image_members.c.image_id == image_id)
                        .order_by(image_members.c.created_at, image_members.c.member))
    return [dict(row._mapping) for row in rows]


def count(conn: Connection, image_id: str) -> int:
    # SELECT count(*) FROM image_members WHERE image_id = :image
    return int(conn.execute(sa.select(sa.func.count()).select_from(image_members)
                            .where(image_members.c.image_id == image_id)).scalar_one())


def add(conn: Connection, image_id: str, member: str) -> dict[str, Any] | None:
    """The new membership (pending), or None when the project already is a member."""
    moment = now()
    values = {"image_id": image_id, "member": member, "status": "pending", "created_at": moment,
              "updated_at": moment}
    try:
        with conn.begin_nested():
            # INSERT INTO image_members (image_id, member, status, ...) VALUES (...)
            conn.execute(image_members.insert().values(**values))
    except sa.exc.IntegrityError as error:
        if is_duplicate(error):
            return None
        raise
    return values


def set_status(conn: Connection, image_id: str, member: str, status: str) -> dict[str, Any] | None:
    # UPDATE image_members SET status = :status, updated_at = :now WHERE image_id = :image AND member = :member
    conn.execute(image_members.update().where(image_members.c.image_id == image_id,
                                              image_members.c.member == member)
                 .values(status=status, updated_at=now()))
    return get(conn, image_id, member)


def remove(conn: Connection, image_id: str, member: str) -> bool:
    # DELETE FROM image_members WHERE image_id = :image AND member = :member
    return conn.execute(image_members.delete().where(
        image_members.c.image_id == image_id, image_members.c.member == member)).rowcount == 1


def touch_image(conn: Connection, image_id: str) -> None:
    """A change to an image's tags or members is a change to the image (its generation grows)."""
    # UPDATE images SET generation = generation + 1, updated_at = :now WHERE id = :id
    conn.execute(images.update().where(images.c.id == image_id)
                 .values(generation=images.c.generation + 1, updated_at=now()))


def add_tag(conn: Connection, image_id: str, tag: str) -> bool:
    """False when the image already has the tag."""
    try:
        with conn.begin_nested():
            # INSERT INTO image_tags (image_id, value) VALUES (:image, :tag)
            conn.execute(image_tags.insert().values(image_id=image_id, value=tag))
    except sa.exc.IntegrityError as error:
        if is_duplicate(error):
            return False
        raise
    return True


def remove_tag(conn: Connection, image_id: str, tag: str) -> bool:
    # DELETE FROM image_tags WHERE image_id = :image AND value = :tag
    return conn.execute(image_tags.delete().where(image_tags.c.image_id == image_id,
                                                  image_tags.c.value == tag)).rowcount == 1
