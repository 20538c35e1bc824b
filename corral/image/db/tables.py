"""The Image service's tables (SQLAlchemy Core).

An image row carries Glance's base attributes; additional properties,
tags and members are rows of their own.  Deleted images keep their row
(``deleted``), so that an id is never reused, as Glance refuses to reuse
one; their properties, tags and members are removed with them.

``generation`` grows with every change to an image, so that a change is a
compare-and-set (``UPDATE ... WHERE generation = :seen``) and two
concurrent PATCHes cannot lose one another's update.  ``lease_token`` and
``lease_expires`` name the upload, staging or import writing the image's
data and until when it is known to be alive: a process that dies
mid-upload leaves a lease that expires, and whichever process sees it
expired cleans up the half-written data and puts the image back in
``queued``.
"""

from __future__ import annotations

import sqlalchemy as sa

from corral.core.db import NAMING_CONVENTION, Timestamp, timestamp_columns

metadata = sa.MetaData(naming_convention=NAMING_CONVENTION)

IMAGE_ID = sa.String(36)
PROJECT_ID = sa.String(255)

images = sa.Table(
    "images",
    metadata,
    sa.Column("id", IMAGE_ID, primary_key=True),
    sa.Column("name", sa.String(255), nullable=True),
    sa.Column("status", sa.String(30), nullable=False),
    sa.Column("visibility", sa.String(20), nullable=False),
    sa.Column("protected", sa.Boolean, nullable=False),
    sa.Column("os_hidden", sa.Boolean, nullable=False),
    sa.Column("owner", PROJECT_ID, nullable=True),
    sa.Column("checksum", sa.String(32), nullable=True),
    sa.Column("os_hash_algo", sa.String(64), nullable=True),
    sa.Column("os_hash_value", sa.String(128), nullable=True),
    sa.Column("size", sa.BigInteger, nullable=True),
    sa.Column("virtual_size", sa.BigInteger, nullable=True),
    sa.Column("min_disk", sa.Integer, nullable=False),
    sa.Column("min_ram", sa.Integer, nullable=False),
    sa.Column("disk_format", sa.String(20), nullable=True),
    sa.Column("container_format", sa.String(20), nullable=True),
    # Where the store keeps the data (a store URI, which for some stores
    # holds credentials: never shown unless show_image_direct_url says so).
    sa.Column("location", sa.Text, nullable=True),
    # Bytes staged for a glance-direct import (counted by image_stage_total).
    sa.Column("staged_size", sa.BigInteger, nullable=True),
    sa.Column("generation", sa.Integer, nullable=False),
    sa.Column("lease_token", sa.String(64), nullable=True),
    sa.Column("lease_expires", Timestamp, nullable=True),
    sa.Column("deleted", sa.Boolean, nullable=False),
    sa.Column("deleted_at", Timestamp, nullable=True),
    *timestamp_columns(),
    sa.Index(None, "created_at", "id"),
    sa.Index(None, "owner"),
    sa.Index(None, "lease_expires"),
)

image_properties = sa.Table(
    "image_properties",
    metadata,
    sa.Column("image_id", IMAGE_ID, sa.ForeignKey("images.id"), primary_key=True),
    sa.Column("name", sa.String(255), primary_key=True),
    sa.Column("value", sa.Text, nullable=False),
)

image_tags = sa.Table(
    "image_tags",
    metadata,
    # Tags are listed in the order they were added.
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("image_id", IMAGE_ID, sa.ForeignKey("images.id"), nullable=False),
    sa.Column("value", sa.String(255), nullable=False),
    sa.UniqueConstraint("image_id", "value"),
)

image_members = sa.Table(
    "image_members",
    metadata,
    sa.Column("image_id", IMAGE_ID, sa.ForeignKey("images.id"), primary_key=True),
    sa.Column("member", PROJECT_ID, primary_key=True),
    sa.Column("status", sa.String(20), nullable=False),
    *timestamp_columns(),
    sa.Index(None, "member", "status"),
)
