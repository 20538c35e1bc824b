"""Compute's configuration options (upstream names where upstream has them).

``[api_database] connection`` is the API database; ``[database]
connection`` is the default cell ("cell1") that ``cell_v2 simple-cell-setup``
maps; cell0 lives in ``[compute] cell0_connection``.  Unset URLs become
SQLite files under ``state_path``.
"""

from __future__ import annotations

from oslo_config import cfg
from oslo_utils import netutils

from corral.core.config import database_opts, sqlite_url
from corral.core.service_client import client_opts, register_client_opts

DEFAULT_OPTS = [
    cfg.StrOpt(
        "compute_driver",
        default="ironic.IronicDriver",
        choices=[
            ("ironic.IronicDriver", "servers on the bare metal nodes of a Bare Metal API ([ironic]); by default "
             "this Corral's own"),
            ("fake.FakeDriver", "a fake hypervisor sized by [fake_driver], for demonstrations and tests"),
            ("", "no compute service on this host"),
        ],
        help="Virt driver of this host's compute service. 'ironic.IronicDriver' (the default) deploys "
        "servers onto bare metal nodes: every node with a resource class is a hypervisor. Empty: the "
        "host runs no compute service. "
        "'fake.FakeDriver' runs one host that pretends to run servers. Drivers live in "
        "corral.compute.virt (module.Class, as upstream names them).",
    ),
    cfg.BoolOpt(
        "force_config_drive",
        default=False,
        help="Give every server a config drive, whether its boot request asked for one or not.",
    ),
    cfg.IntOpt(
        "update_resources_interval",
        default=10,
        min=1,
        help="Seconds between a compute service's refreshes of its nodes: new bare metal nodes become "
        "hypervisors, and each node's Placement inventory (reserved while it cannot take a server) "
        "and traits follow the node.",
    ),
    cfg.IntOpt(
        "sync_power_state_interval",
        default=600,
        help="Seconds between a compute service's comparisons of its servers' power states with "
        "what the virt driver reports (a guest shut down behind Compute's back becomes SHUTOFF). "
        "Negative: never.",
    ),
    cfg.IntOpt(
        "max_concurrent_builds",
        default=10,
        min=1,
        help="Servers a compute service works on at once (spawns, reboots, rebuilds...); "
        "each on a thread of its own.",
    ),
    cfg.IntOpt(
        "shutdown_timeout",
        default=60,
        min=0,
        help="Seconds a stop gives the guest to shut down cleanly before powering it off.",
    ),
]

# This host's address, as a hypervisor's host_ip (upstream's option and default).
MY_IP_OPT = cfg.StrOpt(
    "my_ip",
    default=netutils.get_my_ipv4(),
    sample_default="<host_ipv4>",
    help="IP address of this host, shown as the host_ip of its hypervisors.",
)

API_DATABASE_OPTS = database_opts(
    "Database URL of the Compute API database; "
    "an embedded SQLite file under state_path when unset."
)

DATABASE_OPTS = database_opts(
    "Database URL of the default cell (cell1); "
    "an embedded SQLite file under state_path when unset."
)

CELLS_OPTS = [
    cfg.FloatOpt(
        "timeout",
        default=60.0,
        min=0.01,
        help="Seconds the API waits for each cell in a scatter-gather before treating it as down.",
    ),
    cfg.FloatOpt(
        "down_cell_recheck_interval",
        default=10.0,
        min=0.0,
        help="After a cell failed or timed out, seconds during which it is reported down at once "
        "(without waiting for it again) before the next attempt to reach it.",
    ),
    cfg.IntOpt(
        "worker_pool_size",
        default=32,
        min=1,
        help="Threads running per-cell queries; a hung cell occupies one until its query ends.",
    ),
    cfg.FloatOpt(
        "connect_timeout",
        default=5.0,
        min=0.1,
        help="Seconds to wait when opening a connection to a cell database.",
    ),
]

API_OPTS = [
    cfg.BoolOpt(
        "enable_instance_password",
        default=True,
        help="Return the administrative password in the answers to boot, rebuild and rescue.",
    ),
    cfg.BoolOpt(
        "list_records_by_skipping_down_cells",
        default=True,
        help="When a cell cannot be reached and minimal records cannot be returned (before "
        "microversion 2.69, or with filters, sorting or paging), leave its records out of lists "
        "instead of failing the request with 500.",
    ),
]

COMPUTE_OPTS = [
    cfg.StrOpt(
        "cell0_connection",
        secret=True,
        help="Database URL of cell0, where instances that could not be scheduled are kept; "
        "an embedded SQLite file under state_path when unset.",
    ),
    cfg.IntOpt(
        "reclaim_instance_interval",
        default=0,
        min=0,
        help="Seconds a DELETE keeps a server soft-deleted (restorable) before it is reclaimed; "
        "0 deletes at once.",
    ),
    cfg.StrOpt(
        "default_availability_zone",
        default="nova",
        help="Availability zone of compute hosts that are in no zone-carrying aggregate.",
    ),
    cfg.StrOpt(
        "internal_service_availability_zone",
        default="internal",
        help="Availability zone shown for services other than compute.",
    ),
    cfg.IntOpt(
        "service_down_time",
        default=60,
        min=1,
        help="Seconds since a service's last heartbeat after which it is reported down.",
    ),
    cfg.IntOpt(
        "report_interval",
        default=10,
        min=1,
        help="Seconds between a compute service's heartbeats.",
    ),
    cfg.StrOpt(
        "public_endpoint",
        help="Public URL prefix of the Compute API used in links instead of the request's own host.",
    ),
    cfg.FloatOpt(
        "poll_interval",
        default=1.0,
        min=0.01,
        help="Seconds between a compute service's passes over the instances assigned to its host "
        "(spawning new ones, reclaiming soft-deleted ones).",
    ),
    cfg.BoolOpt(
        "auto_map_hosts",
        default=True,
        help="A compute service maps its own host to its cell on start-up (instead of waiting "
        "for 'corral compute cell_v2 discover-hosts').",
    ),
    cfg.BoolOpt(
        "auto_map_cells",
        default=True,
        help="When the API database has no cells, map cell0 and cell1 from the configured "
        "connections on start-up (as 'corral compute cell_v2 simple-cell-setup' does).",
    ),
]

# Used with [DEFAULT] compute_driver = fake.FakeDriver.
FAKE_DRIVER_OPTS = [
    cfg.IntOpt("vcpus", default=64, min=1, help="vCPUs the fake virt driver reports per host."),
    cfg.IntOpt("memory_mb", default=131072, min=1, help="RAM (MiB) the fake virt driver reports per host."),
    cfg.IntOpt("local_gb", default=2048, min=1, help="Disk (GiB) the fake virt driver reports per host."),
    cfg.FloatOpt("spawn_delay", default=0.0, min=0.0, help="Seconds the fake driver takes to spawn."),
    cfg.BoolOpt("console_log", default=True,
                help="The fake guests have a console log (false: none, as a driver without one)."),
]

QUOTA_OPTS = [
    cfg.IntOpt("instances", default=10, min=-1, help="Default number of servers per project."),
    cfg.IntOpt("cores", default=20, min=-1, help="Default number of vCPUs per project."),
    cfg.IntOpt("ram", default=51200, min=-1, help="Default MiB of RAM per project."),
    cfg.IntOpt("metadata_items", default=128, min=-1, help="Default metadata items per server."),
    cfg.IntOpt("key_pairs", default=100, min=-1, help="Default key pairs per user."),
    cfg.IntOpt("server_groups", default=10, min=-1, help="Default server groups per project."),
    cfg.IntOpt("server_group_members", default=10, min=-1, help="Default servers per server group."),
]

SCHEDULER_OPTS = [
    cfg.IntOpt(
        "max_placement_results",
        default=1000,
        min=1,
        help="Limit on the allocation candidates requested from Placement.",
    ),
    cfg.IntOpt(
        "max_attempts",
        default=3,
        min=1,
        help="Hosts tried for one server before it is put in ERROR (in cell0).",
    ),
    cfg.StrOpt(
        "placement_req_required_member_prefix",
        default="",
        help="Flavor extra spec keys that start with this prefix name an aggregate metadata "
        "key; hosts must be in an aggregate whose metadata has the same key and value "
        "(turned into member_of on the allocation candidates query). Empty disables it.",
    ),
    cfg.StrOpt(
        "placement_req_default_forbidden_member_prefix",
        default="",
        help="Aggregates with a metadata key starting with this prefix are reserved: hosts in "
        "them are excluded (member_of=!in:) unless the flavor asks for that key and value. "
        "Empty disables it.",
    ),
]

# Upstream's weigher multipliers for the soft server group policies.
FILTER_SCHEDULER_OPTS = [
    cfg.FloatOpt(
        "soft_affinity_weight_multiplier",
        default=1.0,
        min=0.0,
        help="Weight of the number of a soft-affinity group's members a host has (more is better), "
        "against the free RAM weight (multiplier 1).",
    ),
    cfg.FloatOpt(
        "soft_anti_affinity_weight_multiplier",
        default=1.0,
        min=0.0,
        help="Weight of the number of a soft-anti-affinity group's members a host has (fewer is better), "
        "against the free RAM weight (multiplier 1).",
    ),
]

PLACEMENT_OPTS = [
    cfg.StrOpt(
        "endpoint",
        help="URL of the Placement API. Unset: the Placement served by this Corral "
        "(http://127.0.0.1:<port>/placement, see [placement] local_port).",
    ),
    cfg.IntOpt(
        "local_port",
        default=6385,
        help="Port of this Corral's own API server, used when [placement] endpoint is unset.",
    ),
    cfg.StrOpt(
        "token",
        default="admin",
        secret=True,
        help="X-Auth-Token sent to Placement under the noauth2 strategy (form 'user[:project]'). "
        "Under 'corral' Compute mints tokens for Corral's service user; under 'keystone' it "
        "authenticates with this group's keystoneauth options (auth_type, auth_url, username...).",
    ),
    cfg.FloatOpt("request_timeout", default=30.0, min=0.1, help="Seconds per Placement request."),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_opts(DEFAULT_OPTS)
    if "my_ip" not in conf:
        conf.register_opt(MY_IP_OPT)
    conf.register_opts(API_DATABASE_OPTS, group="api_database")
    conf.register_opts(DATABASE_OPTS, group="database")
    conf.register_opts(CELLS_OPTS, group="cells")
    conf.register_opts(API_OPTS, group="api")
    conf.register_opts(COMPUTE_OPTS, group="compute")
    conf.register_opts(FAKE_DRIVER_OPTS, group="fake_driver")
    conf.register_opts(QUOTA_OPTS, group="quota")
    conf.register_opts(SCHEDULER_OPTS, group="scheduler")
    conf.register_opts(FILTER_SCHEDULER_OPTS, group="filter_scheduler")
    _register_placement_client_opts(conf)
    # [glance]: the Image service, where boots find their images (as nova.conf
    # names the group). Bare Metal registers the same group; only what is
    # missing is registered. Nova's num_retries default is 3.
    register_client_opts(conf, "glance", client_opts("Image", "/image", retries=3))
    # [ironic]: the Bare Metal API of the ironic virt driver (nova.conf's group).
    from corral.compute.virt import ironic

    ironic.register_opts(conf)


def _register_placement_client_opts(conf: cfg.ConfigOpts) -> None:
    # [placement] is shared with the Placement service's own options; only
    # register what is not there yet.
    existing = set(conf["placement"].keys()) if "placement" in conf else set()
    conf.register_opts([opt for opt in PLACEMENT_OPTS if opt.dest not in existing], group="placement")


def api_database_url(conf: cfg.ConfigOpts) -> str:
    return conf.api_database.connection or sqlite_url(conf, "compute_api.sqlite")


def cell1_database_url(conf: cfg.ConfigOpts) -> str:
    return conf.database.connection or sqlite_url(conf, "compute_cell1.sqlite")


def cell0_database_url(conf: cfg.ConfigOpts) -> str:
    return conf.compute.cell0_connection or sqlite_url(conf, "compute_cell0.sqlite")
