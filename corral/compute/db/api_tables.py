"""Tables of the Compute API database (SQLAlchemy Core).

The API database knows where everything lives: cells (``cell_mappings``),
which cell holds each compute host (``host_mappings``) and each instance
(``instance_mappings``), plus what the API needs without reaching a cell:
request specs (the flavor, image and availability zone a server was booted
with), build requests, flavors, quotas, host aggregates, key pairs and
server groups (``instance_groups``) with their members.

``instance_mappings.queued_for_delete`` is nullable on purpose: NULL means
"not migrated yet" and readers treat it as "not deleted"; the online data
migration fills it from the cells.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.dialects import mysql

from corral.core.db import NAMING_CONVENTION
from corral.core.db import timestamp_columns as _timestamps

metadata = sa.MetaData(naming_convention=NAMING_CONVENTION)


cell_mappings = sa.Table(
    "cell_mappings",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("uuid", sa.String(36), nullable=False, unique=True),
    sa.Column("name", sa.String(255), nullable=True),
    sa.Column("transport_url", sa.Text, nullable=False),
    sa.Column("database_connection", sa.Text, nullable=False),
    sa.Column("disabled", sa.Boolean, nullable=False, default=False),
    *_timestamps(),
)

host_mappings = sa.Table(
    "host_mappings",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("cell_id", sa.Integer, sa.ForeignKey("cell_mappings.id"), nullable=False, index=True),
    sa.Column("host", sa.String(255), nullable=False, unique=True),
    *_timestamps(),
)

instance_mappings = sa.Table(
    "instance_mappings",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("instance_uuid", sa.String(36), nullable=False, unique=True),
    # NULL while the instance is still a build request (not yet in a cell).
    sa.Column("cell_id", sa.Integer, sa.ForeignKey("cell_mappings.id"), nullable=True, index=True),
    sa.Column("project_id", sa.String(255), nullable=False),
    sa.Column("user_id", sa.String(255), nullable=True),
    sa.Column("queued_for_delete", sa.Boolean, nullable=True),
    *_timestamps(),
    sa.Index("ix_instance_mappings_project_id_qfd", "project_id", "queued_for_delete"),
)

request_specs = sa.Table(
    "request_specs",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("instance_uuid", sa.String(36), nullable=False, unique=True),
    # JSON: flavor, image, availability_zone, user_id, project_id, hints...
    sa.Column("spec", sa.Text, nullable=False),
    *_timestamps(),
)

build_requests = sa.Table(
    "build_requests",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("instance_uuid", sa.String(36), nullable=False, unique=True),
    sa.Column("project_id", sa.String(255), nullable=False, index=True),
    # JSON: the instance as it will be created in its cell.
    sa.Column("instance", sa.Text, nullable=False),
    *_timestamps(),
)

flavors = sa.Table(
    "flavors",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("flavorid", sa.String(255), nullable=False, unique=True),
    sa.Column("name", sa.String(255), nullable=False, unique=True),
    sa.Column("memory_mb", sa.Integer, nullable=False),
    sa.Column("vcpus", sa.Integer, nullable=False),
    sa.Column("root_gb", sa.Integer, nullable=False),
    sa.Column("ephemeral_gb", sa.Integer, nullable=False),
    sa.Column("swap", sa.Integer, nullable=False),
    sa.Column("rxtx_factor", sa.Float, nullable=False),
    sa.Column("vcpu_weight", sa.Integer, nullable=True),
    sa.Column("disabled", sa.Boolean, nullable=False, default=False),
    sa.Column("is_public", sa.Boolean, nullable=False, default=True),
    sa.Column("description", sa.Text, nullable=True),
    *_timestamps(),
)

flavor_extra_specs = sa.Table(
    "flavor_extra_specs",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("flavor_id", sa.Integer, sa.ForeignKey("flavors.id", ondelete="CASCADE"), nullable=False),
    sa.Column("key", sa.String(255), nullable=False),
    sa.Column("value", sa.String(255), nullable=True),
    *_timestamps(),
    sa.UniqueConstraint("flavor_id", "key"),
)

flavor_projects = sa.Table(
    "flavor_projects",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("flavor_id", sa.Integer, sa.ForeignKey("flavors.id", ondelete="CASCADE"), nullable=False),
    sa.Column("project_id", sa.String(255), nullable=False),
    *_timestamps(),
    sa.UniqueConstraint("flavor_id", "project_id"),
)

quotas = sa.Table(
    "quotas",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("project_id", sa.String(255), nullable=False),
    sa.Column("resource", sa.String(255), nullable=False),
    sa.Column("hard_limit", sa.Integer, nullable=True),
    *_timestamps(),
    sa.UniqueConstraint("project_id", "resource"),
)

aggregates = sa.Table(
    "aggregates",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("uuid", sa.String(36), nullable=False, unique=True),
    sa.Column("name", sa.String(255), nullable=False, unique=True),
    *_timestamps(),
)

aggregate_hosts = sa.Table(
    "aggregate_hosts",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("aggregate_id", sa.Integer, sa.ForeignKey("aggregates.id", ondelete="CASCADE"), nullable=False),
    sa.Column("host", sa.String(255), nullable=False),
    *_timestamps(),
    sa.UniqueConstraint("aggregate_id", "host"),
)

aggregate_metadata = sa.Table(
    "aggregate_metadata",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("aggregate_id", sa.Integer, sa.ForeignKey("aggregates.id", ondelete="CASCADE"), nullable=False),
    sa.Column("key", sa.String(255), nullable=False),
    sa.Column("value", sa.String(255), nullable=False),
    *_timestamps(),
    sa.UniqueConstraint("aggregate_id", "key"),
)


# Key pair names compare byte for byte on every backend (MySQL's default
# collation would make "Key" and "key" the same name).
_KEY_NAME = sa.String(255).with_variant(mysql.VARCHAR(255, collation="utf8mb4_bin"), "mysql", "mariadb")
# Public keys as large as a request body may carry (MySQL's TEXT stops at 64 KiB).
LONG_TEXT = sa.Text().with_variant(mysql.MEDIUMTEXT(), "mysql", "mariadb")

key_pairs = sa.Table(
    "key_pairs",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("name", _KEY_NAME, nullable=False),
    sa.Column("user_id", sa.String(255), nullable=False),
    sa.Column("fingerprint", sa.String(255), nullable=True),
    sa.Column("public_key", LONG_TEXT, nullable=True),
    # 'ssh' or 'x509'
    sa.Column("type", sa.String(4), nullable=False, default="ssh"),
    *_timestamps(),
    sa.UniqueConstraint("user_id", "name"),
)

instance_groups = sa.Table(
    "instance_groups",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("uuid", sa.String(36), nullable=False, unique=True),
    sa.Column("name", sa.String(255), nullable=True),
    sa.Column("project_id", sa.String(255), nullable=False, index=True),
    sa.Column("user_id", sa.String(255), nullable=True),
    # 'affinity', 'anti-affinity', 'soft-affinity' or 'soft-anti-affinity'
    sa.Column("policy", sa.String(255), nullable=False),
    # JSON object of strings ({"max_server_per_host": "2"}); NULL for groups
    # created before microversion 2.64 (shown as {} afterwards).
    sa.Column("rules", sa.Text, nullable=True),
    *_timestamps(),
)

# A server's membership in a group, recorded when it is booted into it.
# ``host`` is where the scheduler placed it (set under the group's row lock
# when its resources are claimed, cleared when it is deleted for good), so
# that concurrent boots see the hosts of members not yet in a cell.
instance_group_member = sa.Table(
    "instance_group_member",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column(
        "group_id", sa.Integer, sa.ForeignKey("instance_groups.id", ondelete="CASCADE"), nullable=False
    ),
    sa.Column("instance_uuid", sa.String(36), nullable=False, index=True),
    sa.Column("host", sa.String(255), nullable=True),
    *_timestamps(),
    sa.UniqueConstraint("group_id", "instance_uuid"),
)
