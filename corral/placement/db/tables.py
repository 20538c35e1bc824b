"""Placement's tables (SQLAlchemy Core).

Providers form trees through ``parent_provider_id`` / ``root_provider_id``
(a root points at itself).  Allocations reference consumers by UUID so
that allocations written before consumer records existed stay readable;
``consumers`` carries the consumer generation.
"""

from __future__ import annotations

import sqlalchemy as sa

from corral.core.db import NAMING_CONVENTION

metadata = sa.MetaData(naming_convention=NAMING_CONVENTION)


def _timestamps() -> list[sa.Column]:
    return [
        sa.Column("created_at", sa.DateTime, nullable=True),
        sa.Column("updated_at", sa.DateTime, nullable=True),
    ]


resource_classes = sa.Table(
    "resource_classes",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("name", sa.String(255), nullable=False, unique=True),
    *_timestamps(),
)

traits = sa.Table(
    "traits",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("name", sa.String(255), nullable=False, unique=True),
    *_timestamps(),
)

resource_providers = sa.Table(
    "resource_providers",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("uuid", sa.String(36), nullable=False, unique=True),
    sa.Column("name", sa.String(200), nullable=False, unique=True),
    sa.Column("generation", sa.Integer, nullable=False, server_default="0"),
    sa.Column("root_provider_id", sa.Integer, sa.ForeignKey("resource_providers.id"), nullable=True, index=True),
    sa.Column("parent_provider_id", sa.Integer, sa.ForeignKey("resource_providers.id"), nullable=True, index=True),
    *_timestamps(),
)

inventories = sa.Table(
    "inventories",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("resource_provider_id", sa.Integer, sa.ForeignKey("resource_providers.id"), nullable=False),
    sa.Column("resource_class_id", sa.Integer, sa.ForeignKey("resource_classes.id"), nullable=False, index=True),
    sa.Column("total", sa.Integer, nullable=False),
    sa.Column("reserved", sa.Integer, nullable=False),
    sa.Column("min_unit", sa.Integer, nullable=False),
    sa.Column("max_unit", sa.Integer, nullable=False),
    sa.Column("step_size", sa.Integer, nullable=False),
    sa.Column("allocation_ratio", sa.Float, nullable=False),
    *_timestamps(),
    sa.UniqueConstraint("resource_provider_id", "resource_class_id"),
)

allocations = sa.Table(
    "allocations",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("resource_provider_id", sa.Integer, sa.ForeignKey("resource_providers.id"), nullable=False),
    sa.Column("consumer_id", sa.String(36), nullable=False, index=True),
    sa.Column("resource_class_id", sa.Integer, sa.ForeignKey("resource_classes.id"), nullable=False, index=True),
    sa.Column("used", sa.Integer, nullable=False),
    *_timestamps(),
    sa.Index("ix_allocations_provider_class_used", "resource_provider_id", "resource_class_id", "used"),
)

projects = sa.Table(
    "projects",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("external_id", sa.String(255), nullable=False, unique=True),
    *_timestamps(),
)

users = sa.Table(
    "users",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("external_id", sa.String(255), nullable=False, unique=True),
    *_timestamps(),
)

consumer_types = sa.Table(
    "consumer_types",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("name", sa.String(255), nullable=False, unique=True),
    *_timestamps(),
)

consumers = sa.Table(
    "consumers",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("uuid", sa.String(36), nullable=False, unique=True),
    sa.Column("project_id", sa.Integer, sa.ForeignKey("projects.id"), nullable=False),
    sa.Column("user_id", sa.Integer, sa.ForeignKey("users.id"), nullable=False),
    sa.Column("generation", sa.Integer, nullable=False, server_default="0"),
    sa.Column("consumer_type_id", sa.Integer, sa.ForeignKey("consumer_types.id"), nullable=True, index=True),
    *_timestamps(),
    sa.Index("ix_consumers_project_user_uuid", "project_id", "user_id", "uuid"),
)

placement_aggregates = sa.Table(
    "placement_aggregates",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("uuid", sa.String(36), nullable=False, unique=True),
    *_timestamps(),
)

resource_provider_aggregates = sa.Table(
    "resource_provider_aggregates",
    metadata,
    sa.Column("resource_provider_id", sa.Integer, sa.ForeignKey("resource_providers.id"), primary_key=True),
    sa.Column("aggregate_id", sa.Integer, sa.ForeignKey("placement_aggregates.id"), primary_key=True, index=True),
    *_timestamps(),
)

resource_provider_traits = sa.Table(
    "resource_provider_traits",
    metadata,
    sa.Column("resource_provider_id", sa.Integer, sa.ForeignKey("resource_providers.id"), primary_key=True),
    sa.Column("trait_id", sa.Integer, sa.ForeignKey("traits.id"), primary_key=True, index=True),
    *_timestamps(),
)

# One row: ``version`` is a random value, replaced when the whole topology
# must be read again (a new database, tables emptied); ``position`` counts
# the transactions that changed providers, their inventories, traits or
# aggregates, or resource classes (never allocations).  Each such
# transaction increments it, which locks the row until it commits: such
# transactions commit in ``position`` order, one at a time.
topology_versions = sa.Table(
    "topology_versions",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("version", sa.String(32), nullable=False),
    sa.Column("position", sa.BigInteger, nullable=False, server_default="0"),
)

# What each of those transactions changed: one row per provider whose
# rows changed (created, moved, deleted, inventories, traits, aggregates),
# or one row without a provider when resource classes changed.  API
# processes apply these to their in-memory snapshot instead of reading it
# all again.  Old rows are pruned by the writers.
topology_changes = sa.Table(
    "topology_changes",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("position", sa.BigInteger, nullable=False, index=True),
    sa.Column("resource_provider_id", sa.Integer, nullable=True),
)
