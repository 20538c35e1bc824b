"""Tables of one cell database (SQLAlchemy Core).

Every cell (cell0 included) has the same schema: the full instance rows,
their metadata, the services that run in the cell and the compute nodes
its compute services report.  Deleted instances stay as rows with
``deleted`` set, as upstream keeps them, so ``GET /servers?deleted=true``
and the online data migration can still see them.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.dialects import mysql

from corral.core.db import NAMING_CONVENTION, Timestamp
from corral.core.db import timestamp_columns as _timestamps

metadata = sa.MetaData(naming_convention=NAMING_CONVENTION)


instances = sa.Table(
    "instances",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("uuid", sa.String(36), nullable=False, unique=True),
    sa.Column("project_id", sa.String(255), nullable=False),
    sa.Column("user_id", sa.String(255), nullable=False),
    sa.Column("display_name", sa.String(255), nullable=True),
    sa.Column("display_description", sa.Text, nullable=True),
    sa.Column("hostname", sa.String(255), nullable=True),
    sa.Column("host", sa.String(255), nullable=True),
    sa.Column("node", sa.String(255), nullable=True),
    sa.Column("availability_zone", sa.String(255), nullable=True),
    sa.Column("vm_state", sa.String(255), nullable=True),
    sa.Column("task_state", sa.String(255), nullable=True),
    sa.Column("power_state", sa.Integer, nullable=True),
    # The resources counted by quota, copied from the flavor at boot.
    sa.Column("memory_mb", sa.Integer, nullable=False),
    sa.Column("vcpus", sa.Integer, nullable=False),
    sa.Column("root_gb", sa.Integer, nullable=False),
    sa.Column("ephemeral_gb", sa.Integer, nullable=False),
    # JSON: the embedded flavor (name, sizes, extra specs) as booted.
    sa.Column("flavor", sa.Text, nullable=False),
    sa.Column("flavorid", sa.String(255), nullable=False),
    sa.Column("image_ref", sa.String(255), nullable=True),
    sa.Column("key_name", sa.String(255), nullable=True),
    # The key pair's public key at boot (what a config drive carries).
    sa.Column("key_data", sa.Text().with_variant(mysql.MEDIUMTEXT(), "mysql", "mariadb"), nullable=True),
    sa.Column("reservation_id", sa.String(255), nullable=True),
    sa.Column("launch_index", sa.Integer, nullable=True),
    sa.Column("config_drive", sa.String(255), nullable=True),
    sa.Column("access_ip_v4", sa.String(39), nullable=True),
    sa.Column("access_ip_v6", sa.String(39), nullable=True),
    sa.Column("progress", sa.Integer, nullable=True),
    sa.Column("user_data", sa.Text, nullable=True),
    sa.Column("locked", sa.Boolean, nullable=False, default=False),
    sa.Column("locked_by", sa.String(255), nullable=True),
    # Why it is locked (2.73); upstream keeps it in the system metadata.
    sa.Column("locked_reason", sa.String(255), nullable=True),
    # JSON, while the server is being built: the hosts tried and the alternates a failed
    # build is rescheduled to (upstream passes them along in its RPC calls); NULL when a
    # failed build is not rescheduled.
    sa.Column("build_alternates", sa.Text, nullable=True),
    sa.Column("launched_at", Timestamp, nullable=True),
    sa.Column("terminated_at", Timestamp, nullable=True),
    sa.Column("deleted", sa.Boolean, nullable=False, default=False),
    sa.Column("deleted_at", Timestamp, nullable=True),
    *_timestamps(),
    sa.Index("ix_instances_project_id_deleted", "project_id", "deleted"),
    sa.Index("ix_instances_host_deleted", "host", "deleted"),
    sa.Index("ix_instances_created_at", "created_at"),
)

instance_metadata = sa.Table(
    "instance_metadata",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column(
        "instance_uuid", sa.String(36), sa.ForeignKey("instances.uuid", ondelete="CASCADE"), nullable=False
    ),
    sa.Column("key", sa.String(255), nullable=False),
    sa.Column("value", sa.String(255), nullable=True),
    *_timestamps(),
    sa.UniqueConstraint("instance_uuid", "key"),
)

services = sa.Table(
    "services",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("uuid", sa.String(36), nullable=False, unique=True),
    sa.Column("host", sa.String(255), nullable=False),
    sa.Column("binary", sa.String(255), nullable=False),
    sa.Column("topic", sa.String(255), nullable=True),
    sa.Column("report_count", sa.Integer, nullable=False, default=0),
    sa.Column("disabled", sa.Boolean, nullable=False, default=False),
    sa.Column("disabled_reason", sa.String(255), nullable=True),
    sa.Column("last_seen_up", Timestamp, nullable=True),
    sa.Column("forced_down", sa.Boolean, nullable=False, default=False),
    sa.Column("version", sa.Integer, nullable=False, default=0),
    *_timestamps(),
    sa.UniqueConstraint("host", "binary"),
)

compute_nodes = sa.Table(
    "compute_nodes",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("uuid", sa.String(36), nullable=False, unique=True),
    sa.Column("host", sa.String(255), nullable=False),
    sa.Column("hypervisor_hostname", sa.String(255), nullable=False),
    sa.Column("hypervisor_type", sa.String(255), nullable=False),
    sa.Column("hypervisor_version", sa.Integer, nullable=True),
    sa.Column("host_ip", sa.String(39), nullable=True),
    # JSON, as the virt driver describes the CPU.
    sa.Column("cpu_info", sa.Text, nullable=True),
    sa.Column("vcpus", sa.Integer, nullable=False),
    sa.Column("memory_mb", sa.Integer, nullable=False),
    sa.Column("local_gb", sa.Integer, nullable=False),
    sa.Column("vcpus_used", sa.Integer, nullable=False, default=0),
    sa.Column("memory_mb_used", sa.Integer, nullable=False, default=0),
    sa.Column("local_gb_used", sa.Integer, nullable=False, default=0),
    sa.Column("cpu_allocation_ratio", sa.Float, nullable=False),
    sa.Column("ram_allocation_ratio", sa.Float, nullable=False),
    sa.Column("disk_allocation_ratio", sa.Float, nullable=False),
    *_timestamps(),
    sa.UniqueConstraint("host", "hypervisor_hostname"),
)

# Tags compare exactly on every backend (MySQL's default collation would
# make "Web" and "web" one tag).
_TAG = sa.String(60).with_variant(mysql.VARCHAR(60, collation="utf8mb4_bin"), "mysql", "mariadb")

tags = sa.Table(
    "tags",
    metadata,
    sa.Column("resource_id", sa.String(36), primary_key=True),
    sa.Column("tag", _TAG, primary_key=True),
    sa.Index("ix_tags_tag", "tag"),
)

# Why a server went wrong: the latest one shows in ERROR and DELETED servers.
instance_faults = sa.Table(
    "instance_faults",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("instance_uuid", sa.String(36), nullable=False),
    sa.Column("code", sa.Integer, nullable=False),
    sa.Column("message", sa.String(255), nullable=True),
    sa.Column("details", sa.Text().with_variant(mysql.MEDIUMTEXT(), "mysql", "mariadb"), nullable=True),
    sa.Column("host", sa.String(255), nullable=True),
    *_timestamps(),
    sa.Index("ix_instance_faults_instance_uuid", "instance_uuid"),
)

# What was asked of each server (os-instance-actions), kept after it is deleted.
instance_actions = sa.Table(
    "instance_actions",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("action", sa.String(255), nullable=False),
    sa.Column("instance_uuid", sa.String(36), nullable=False),
    sa.Column("request_id", sa.String(255), nullable=False),
    sa.Column("user_id", sa.String(255), nullable=True),
    sa.Column("project_id", sa.String(255), nullable=True),
    sa.Column("start_time", Timestamp, nullable=True),
    sa.Column("finish_time", Timestamp, nullable=True),
    sa.Column("message", sa.String(255), nullable=True),
    *_timestamps(),
    sa.Index("ix_instance_actions_instance_uuid_updated_at", "instance_uuid", "updated_at"),
    sa.Index("ix_instance_actions_request_id", "request_id"),
)

instance_actions_events = sa.Table(
    "instance_actions_events",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("action_id", sa.Integer, sa.ForeignKey("instance_actions.id", ondelete="CASCADE"), nullable=False),
    sa.Column("event", sa.String(255), nullable=False),
    sa.Column("start_time", Timestamp, nullable=True),
    sa.Column("finish_time", Timestamp, nullable=True),
    sa.Column("result", sa.String(255), nullable=True),
    sa.Column("traceback", sa.Text().with_variant(mysql.MEDIUMTEXT(), "mysql", "mariadb"), nullable=True),
    sa.Column("host", sa.String(255), nullable=True),
    sa.Column("details", sa.Text, nullable=True),
    *_timestamps(),
    sa.Index("ix_instance_actions_events_action_id", "action_id"),
)

# Work the API left for a server's compute service (what upstream casts
# over RPC): one at a time per server, claimed and removed by the compute
# service of the server's host.
instance_tasks = sa.Table(
    "instance_tasks",
    metadata,
    sa.Column("instance_uuid", sa.String(36), primary_key=True),
    sa.Column("task", sa.String(255), nullable=False),
    sa.Column("request_id", sa.String(255), nullable=False),
    # JSON: the action's arguments (reboot type, rescue image, ...).
    sa.Column("params", sa.Text, nullable=False),
    *_timestamps(),
)
