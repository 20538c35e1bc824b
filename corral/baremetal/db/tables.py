"""Bare Metal tables (SQLAlchemy Core).

JSON-valued node attributes (``driver_info``, ``instance_info``,
``properties`` ...) are stored as JSON text and decoded in
:mod:`corral.baremetal.db.nodes`, which keeps the schema identical on every
backend.  ``reservation`` holds the host name of the conductor that has the
node locked and ``lock_generation`` which of its locks it is (see
:mod:`corral.baremetal.conductor.locks`).
"""

from __future__ import annotations

import sqlalchemy as sa

from corral.core.db import NAMING_CONVENTION, Timestamp
from corral.core.db import timestamp_columns as _timestamps

metadata = sa.MetaData(naming_convention=NAMING_CONVENTION)

# Microsecond precision everywhere (MySQL's DATETIME drops it by default).


def _json(name: str) -> sa.Column:
    return sa.Column(name, sa.Text, nullable=True)


# Driver interfaces a node names, one column each (upstream's names).
INTERFACE_FIELDS = (
    "bios_interface",
    "boot_interface",
    "console_interface",
    "deploy_interface",
    "firmware_interface",
    "inspect_interface",
    "management_interface",
    "network_interface",
    "power_interface",
    "raid_interface",
    "rescue_interface",
    "storage_interface",
    "vendor_interface",
)

conductors = sa.Table(
    "conductors",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("hostname", sa.String(255), nullable=False, unique=True),
    sa.Column("drivers", sa.Text, nullable=True),
    sa.Column("online", sa.Boolean, nullable=False, default=True),
    sa.Column("conductor_group", sa.String(255), nullable=False, server_default=""),
    # Where the conductor answers JSON-RPC calls ("http://host:port").
    sa.Column("rpc_address", sa.String(255), nullable=True),
    *_timestamps(),
)

conductor_hardware_interfaces = sa.Table(
    "conductor_hardware_interfaces",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("conductor_id", sa.Integer, sa.ForeignKey("conductors.id", ondelete="CASCADE"), nullable=False),
    sa.Column("hardware_type", sa.String(255), nullable=False),
    sa.Column("interface_type", sa.String(16), nullable=False),
    sa.Column("interface_name", sa.String(255), nullable=False),
    sa.Column("default", sa.Boolean, nullable=False, default=False),
    *_timestamps(),
    sa.UniqueConstraint("conductor_id", "hardware_type", "interface_type", "interface_name"),
)

chassis = sa.Table(
    "chassis",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("uuid", sa.String(36), nullable=False, unique=True),
    sa.Column("description", sa.String(255), nullable=True),
    _json("extra"),
    *_timestamps(),
)

nodes = sa.Table(
    "nodes",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("uuid", sa.String(36), nullable=False, unique=True),
    sa.Column("name", sa.String(255), nullable=True, unique=True),
    sa.Column("description", sa.Text, nullable=True),
    sa.Column("driver", sa.String(255), nullable=False),
    _json("driver_info"),
    _json("driver_internal_info"),
    _json("properties"),
    _json("extra"),
    _json("instance_info"),
    sa.Column("instance_uuid", sa.String(36), nullable=True, unique=True),
    # The allocation holding this node (the allocations table arrives later).
    sa.Column("allocation_id", sa.Integer, nullable=True),
    # Conductor that last deployed the node (conductors.id); informational.
    sa.Column("conductor_affinity", sa.Integer, nullable=True),
    sa.Column("conductor_group", sa.String(255), nullable=False, server_default=""),
    sa.Column("reservation", sa.String(255), nullable=True),
    # Counts the lock's owners: every reservation and every takeover adds one.
    # A conductor writes only while reservation and generation are still the
    # ones it took, so one presumed dead that comes back changes nothing.
    sa.Column("lock_generation", sa.Integer, nullable=False, server_default="0"),
    sa.Column("power_state", sa.String(15), nullable=True),
    sa.Column("target_power_state", sa.String(15), nullable=True),
    sa.Column("provision_state", sa.String(15), nullable=False),
    sa.Column("target_provision_state", sa.String(15), nullable=True),
    sa.Column("provision_updated_at", Timestamp, nullable=True),
    sa.Column("last_error", sa.Text, nullable=True),
    sa.Column("maintenance", sa.Boolean, nullable=False, default=False),
    sa.Column("maintenance_reason", sa.Text, nullable=True),
    sa.Column("fault", sa.String(255), nullable=True),
    sa.Column("console_enabled", sa.Boolean, nullable=False, default=False),
    _json("clean_step"),
    _json("deploy_step"),
    _json("raid_config"),
    _json("target_raid_config"),
    sa.Column("resource_class", sa.String(80), nullable=True),
    sa.Column("automated_clean", sa.Boolean, nullable=True),
    sa.Column("protected", sa.Boolean, nullable=False, default=False),
    sa.Column("protected_reason", sa.Text, nullable=True),
    sa.Column("owner", sa.String(255), nullable=True),
    sa.Column("lessee", sa.String(255), nullable=True),
    sa.Column("retired", sa.Boolean, nullable=False, default=False),
    sa.Column("retired_reason", sa.Text, nullable=True),
    sa.Column("inspection_started_at", Timestamp, nullable=True),
    sa.Column("inspection_finished_at", Timestamp, nullable=True),
    # The chassis the node sits in (chassis.id).
    sa.Column("chassis_id", sa.Integer, sa.ForeignKey("chassis.id"), nullable=True),
    *(sa.Column(name, sa.String(255), nullable=True) for name in INTERFACE_FIELDS),
    *_timestamps(),
    # Fields of later microversions (1.66 and on).
    _json("network_data"),
    sa.Column("boot_mode", sa.String(16), nullable=True),
    sa.Column("secure_boot", sa.Boolean, nullable=True),
    sa.Column("shard", sa.String(255), nullable=True),
    # The parent's UUID (upstream stores the UUID, not the id).
    sa.Column("parent_node", sa.String(36), nullable=True),
    _json("service_step"),
    sa.Column("disable_power_off", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("instance_name", sa.String(255), nullable=True),
    sa.Column("health", sa.String(32), nullable=True),
    sa.Index(None, "provision_state"),
    sa.Index(None, "reservation"),
    sa.Index(None, "shard"),
    sa.Index(None, "parent_node"),
)

node_traits = sa.Table(
    "node_traits",
    metadata,
    sa.Column("node_id", sa.Integer, sa.ForeignKey("nodes.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("trait", sa.String(255), primary_key=True),
    *_timestamps(),
)

bios_settings = sa.Table(
    "bios_settings",
    metadata,
    sa.Column("node_id", sa.Integer, sa.ForeignKey("nodes.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("name", sa.String(255), primary_key=True),
    sa.Column("value", sa.Text, nullable=True),
    *_timestamps(),
)

# Requests for a node (the allocation API).  ``conductor_affinity`` is the
# conductors.id of the conductor processing the allocation; every write of
# that conductor is guarded by it, which is what makes takeover safe.
allocations = sa.Table(
    "allocations",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("uuid", sa.String(36), nullable=False, unique=True),
    sa.Column("name", sa.String(255), nullable=True, unique=True),
    sa.Column("node_id", sa.Integer, sa.ForeignKey("nodes.id", ondelete="SET NULL"), nullable=True),
    sa.Column("state", sa.String(15), nullable=False),
    sa.Column("owner", sa.String(255), nullable=True),
    sa.Column("last_error", sa.Text, nullable=True),
    sa.Column("resource_class", sa.String(80), nullable=True),
    _json("candidate_nodes"),
    _json("extra"),
    sa.Column("conductor_affinity", sa.Integer, sa.ForeignKey("conductors.id"), nullable=True),
    *_timestamps(),
    sa.Index(None, "state", "conductor_affinity"),
    sa.Index(None, "node_id"),
)

# The traits an allocation asks for, in the order given.
allocation_traits = sa.Table(
    "allocation_traits",
    metadata,
    sa.Column("allocation_id", sa.Integer, sa.ForeignKey("allocations.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("trait", sa.String(255), primary_key=True),
    sa.Column("position", sa.Integer, nullable=False, server_default="0"),
    *_timestamps(),
)

# Network ports and port groups of nodes.  A port's ``address`` (MAC) is
# unique across the deployment; ``internal_info["tenant_vif_port_id"]``
# holds the VIF attached to it.  Rows go with their node (deleted in the
# node's delete transaction).
portgroups = sa.Table(
    "portgroups",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("uuid", sa.String(36), nullable=False, unique=True),
    sa.Column("name", sa.String(255), nullable=True, unique=True),
    sa.Column("node_id", sa.Integer, sa.ForeignKey("nodes.id"), nullable=False),
    sa.Column("address", sa.String(18), nullable=True, unique=True),
    _json("extra"),
    _json("internal_info"),
    sa.Column("standalone_ports_supported", sa.Boolean, nullable=False, default=True),
    sa.Column("mode", sa.String(255), nullable=True),
    _json("properties"),
    sa.Column("physical_network", sa.String(64), nullable=True),
    sa.Column("category", sa.String(80), nullable=True),
    sa.Column("dynamic_portgroup", sa.Boolean, nullable=False, default=False),
    *_timestamps(),
    sa.Index(None, "node_id"),
)

ports = sa.Table(
    "ports",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("uuid", sa.String(36), nullable=False, unique=True),
    sa.Column("address", sa.String(18), nullable=False, unique=True),
    sa.Column("name", sa.String(255), nullable=True, unique=True),
    sa.Column("node_id", sa.Integer, sa.ForeignKey("nodes.id"), nullable=False),
    sa.Column("portgroup_id", sa.Integer, sa.ForeignKey("portgroups.id"), nullable=True),
    _json("extra"),
    _json("local_link_connection"),
    _json("internal_info"),
    sa.Column("pxe_enabled", sa.Boolean, nullable=False, default=True),
    sa.Column("physical_network", sa.String(64), nullable=True),
    sa.Column("is_smartnic", sa.Boolean, nullable=False, default=False),
    sa.Column("description", sa.String(255), nullable=True),
    sa.Column("vendor", sa.String(32), nullable=True),
    sa.Column("category", sa.String(80), nullable=True),
    sa.Column("available_for_dynamic_portgroup", sa.Boolean, nullable=False, default=True),
    *_timestamps(),
    sa.Index(None, "node_id"),
    sa.Index(None, "portgroup_id"),
)

# Boot from volume: the node's initiators (connectors) and the volumes it
# boots from or attaches (targets).  Stored and validated without Cinder.
volume_connectors = sa.Table(
    "volume_connectors",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("uuid", sa.String(36), nullable=False, unique=True),
    sa.Column("node_id", sa.Integer, sa.ForeignKey("nodes.id"), nullable=False),
    sa.Column("type", sa.String(32), nullable=False),
    sa.Column("connector_id", sa.String(255), nullable=False),
    _json("extra"),
    *_timestamps(),
    sa.UniqueConstraint("type", "connector_id"),
    sa.Index(None, "node_id"),
)

volume_targets = sa.Table(
    "volume_targets",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("uuid", sa.String(36), nullable=False, unique=True),
    sa.Column("node_id", sa.Integer, sa.ForeignKey("nodes.id"), nullable=False),
    sa.Column("volume_type", sa.String(64), nullable=False),
    _json("properties"),
    sa.Column("boot_index", sa.Integer, nullable=False),
    sa.Column("volume_id", sa.String(36), nullable=False),
    _json("extra"),
    *_timestamps(),
    sa.UniqueConstraint("node_id", "boot_index"),
)

# What happened to a node (1.78): errors and notable events, newest last.
node_history = sa.Table(
    "node_history",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("uuid", sa.String(36), nullable=False, unique=True),
    sa.Column("node_id", sa.Integer, sa.ForeignKey("nodes.id", ondelete="CASCADE"), nullable=False),
    sa.Column("conductor", sa.String(255), nullable=True),
    sa.Column("event_type", sa.String(255), nullable=True),
    sa.Column("severity", sa.String(255), nullable=True),
    sa.Column("event", sa.Text, nullable=True),
    sa.Column("user", sa.String(64), nullable=True),
    sa.Column("project", sa.String(80), nullable=True),
    sa.Column("state", sa.String(255), nullable=True),
    sa.Column("target_provision_state", sa.String(255), nullable=True),
    sa.Column("duration_seconds", sa.Integer, nullable=True),
    *_timestamps(),
    sa.Index(None, "node_id", "id"),
)

# The hardware inventory inspection found (1.81), one row per node.
node_inventory = sa.Table(
    "node_inventory",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("node_id", sa.Integer, sa.ForeignKey("nodes.id", ondelete="CASCADE"), nullable=False, unique=True),
    _json("inventory_data"),
    _json("plugin_data"),
    *_timestamps(),
)

# Firmware components of a node (1.86) and their versions.
firmware_components = sa.Table(
    "firmware_information",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("node_id", sa.Integer, sa.ForeignKey("nodes.id", ondelete="CASCADE"), nullable=False),
    sa.Column("component", sa.String(255), nullable=False),
    sa.Column("initial_version", sa.String(255), nullable=False),
    sa.Column("current_version", sa.String(255), nullable=True),
    sa.Column("last_version_flashed", sa.String(255), nullable=True),
    sa.Column("vendor", sa.String(255), nullable=True),
    sa.Column("model", sa.String(255), nullable=True),
    sa.Column("serial_number", sa.String(255), nullable=True),
    *_timestamps(),
    sa.UniqueConstraint("node_id", "component"),
)

# Deploy templates (1.55): deploy steps selected by an instance's traits,
# the template's name being the trait.
deploy_templates = sa.Table(
    "deploy_templates",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("uuid", sa.String(36), nullable=False, unique=True),
    sa.Column("name", sa.String(255), nullable=False, unique=True),
    _json("extra"),
    *_timestamps(),
)

deploy_template_steps = sa.Table(
    "deploy_template_steps",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("deploy_template_id", sa.Integer, sa.ForeignKey("deploy_templates.id", ondelete="CASCADE"),
              nullable=False),
    sa.Column("interface", sa.String(255), nullable=False),
    sa.Column("step", sa.String(255), nullable=False),
    _json("args"),
    sa.Column("priority", sa.Integer, nullable=False),
    # Position in the template as given.
    sa.Column("position", sa.Integer, nullable=False, server_default="0"),
    *_timestamps(),
    sa.Index(None, "deploy_template_id"),
)

# Runbooks (1.92): ordered steps for cleaning or servicing, usable on nodes
# carrying one of the runbook's traits.
runbooks = sa.Table(
    "runbooks",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("uuid", sa.String(36), nullable=False, unique=True),
    sa.Column("name", sa.String(255), nullable=False, unique=True),
    sa.Column("description", sa.String(255), nullable=True),
    sa.Column("public", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("owner", sa.String(255), nullable=True),
    sa.Column("disable_ramdisk", sa.Boolean, nullable=False, server_default=sa.false()),
    _json("extra"),
    *_timestamps(),
)

runbook_steps = sa.Table(
    "runbook_steps",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("runbook_id", sa.Integer, sa.ForeignKey("runbooks.id", ondelete="CASCADE"), nullable=False),
    sa.Column("interface", sa.String(255), nullable=False),
    sa.Column("step", sa.String(255), nullable=False),
    _json("args"),
    sa.Column("order", sa.Integer, nullable=False),
    *_timestamps(),
    sa.Index(None, "runbook_id"),
)

runbook_traits = sa.Table(
    "runbook_traits",
    metadata,
    sa.Column("runbook_id", sa.Integer, sa.ForeignKey("runbooks.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("trait", sa.String(255), primary_key=True),
    *_timestamps(),
)

# External events posted to /v1/events (1.54), kept for operators to read.
events = sa.Table(
    "events",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("event", sa.String(64), nullable=False),
    sa.Column("port_id", sa.String(36), nullable=False),
    sa.Column("mac_address", sa.String(32), nullable=False),
    sa.Column("status", sa.String(255), nullable=False),
    sa.Column("device_id", sa.String(36), nullable=True),
    sa.Column("host_id", sa.String(36), nullable=True),
    sa.Column("vnic_type", sa.String(255), nullable=True),
    *_timestamps(),
)

# Inspection rules (1.96): conditions and actions as JSON text, as upstream
# keeps them; ``sensitive`` rules never show them again.
inspection_rules = sa.Table(
    "inspection_rules",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("uuid", sa.String(36), nullable=False, unique=True),
    sa.Column("description", sa.String(255), nullable=True),
    sa.Column("priority", sa.Integer, nullable=False, server_default="0"),
    sa.Column("sensitive", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("phase", sa.String(16), nullable=False, server_default="main"),
    _json("conditions"),
    _json("actions"),
    *_timestamps(),
)
