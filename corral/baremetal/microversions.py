"""Bare Metal microversions: the one canonical list.

Every version this service implements, oldest first, with what it
changed (upstream Ironic's history).  Entries in parentheses belong to
resources or agent endpoints other modules serve; the version still counts
for negotiation.  Requests without a version header get the oldest (1.1), as
upstream answers.  The newest listed version is the maximum advertised;
clients negotiate down to it.
"""

from __future__ import annotations

from microversion_parse import Version

from corral.core.microversion import VersionSpec

SERVICE_TYPE = "baremetal"
LEGACY_HEADER = "X-OpenStack-Ironic-API-Version"

VERSIONS = (
    "1.1",   # nodes, drivers; the initial API
    "1.2",   # 'available' replaces the empty provision state
    "1.3",   # driver_internal_info on nodes
    "1.4",   # 'manageable' state and the manage verb
    "1.5",   # node names (GET/PATCH/DELETE by name)
    "1.6",   # inspection fields on nodes
    "1.7",   # clean_step on nodes
    "1.8",   # ?fields= on node show and list
    "1.9",   # ?provision_state= filter on the node list
    "1.10",  # node names may use - . _ ~
    "1.11",  # new nodes start in enroll
    "1.12",  # raid_config / target_raid_config on nodes
    "1.13",  # the abort verb
    "1.14",  # PUT /v1/nodes/{node}/states/raid
    "1.15",  # manual cleaning: clean verb with clean_steps; GET .../cleaning/steps
    "1.16",  # ?driver= filter on the node list
    "1.17",  # the adopt verb
    "1.18",  # ports: internal_info
    "1.19",  # ports: local_link_connection and pxe_enabled
    "1.20",  # network_interface on nodes
    "1.21",  # resource_class on nodes and its filter
    "1.22",  # GET /v1/lookup and POST /v1/heartbeat/{node} for the agent
    "1.23",  # port groups: /v1/portgroups
    "1.24",  # node portgroups links and sub-collection, a group's ports, portgroup_uuid on ports
    "1.25",  # chassis_uuid of a node may be unset
    "1.26",  # port group mode and properties
    "1.27",  # soft power off / soft reboot and power timeouts
    "1.28",  # VIFs: /v1/nodes/{node}/vifs
    "1.29",  # PUT /v1/nodes/{node}/management/inject_nmi
    "1.30",  # dynamic drivers: type and interface details on /v1/drivers
    "1.31",  # boot/console/deploy/inspect/management/power/raid/vendor_interface on nodes
    "1.32",  # volume connectors and targets: /v1/volume, volume links on nodes
    "1.33",  # storage_interface on nodes
    "1.34",  # ports: physical_network
    "1.35",  # configdrive with rebuild
    "1.36",  # agent_version in heartbeats
    "1.37",  # node traits
    "1.38",  # rescue / unrescue; rescue_interface
    "1.39",  # abort from inspect wait
    "1.40",  # bios_interface; GET /v1/nodes/{node}/bios
    "1.41",  # (inspection abort)
    "1.42",  # fault on nodes and its filter
    "1.43",  # ?detail= on the node list
    "1.44",  # deploy_step on nodes
    "1.45",  # (reset_interfaces on PATCH)
    "1.46",  # conductor_group on nodes and its filter
    "1.47",  # automated_clean on nodes
    "1.48",  # protected / protected_reason on nodes
    "1.49",  # conductor on nodes; /v1/conductors
    "1.50",  # owner on nodes and its filter
    "1.51",  # description on nodes; ?description_contains=
    "1.52",  # allocations: /v1/allocations, /v1/nodes/{node}/allocation, allocation_uuid on nodes
    "1.53",  # (ports: is_smartnic)
    "1.54",  # POST /v1/events (network events, validated and stored)
    "1.55",  # deploy templates: /v1/deploy_templates
    "1.56",  # configdrive may be a JSON object (meta_data, network_data, user_data)
    "1.57",  # PATCH /v1/allocations/{allocation} (name, extra)
    "1.58",  # allocation backfill: "node" on allocation create
    "1.59",  # configdrive object may carry vendor_data
    "1.60",  # owner on allocations and its filter
    "1.61",  # retired / retired_reason on nodes; ?retired= filter
    "1.62",  # agent token handed out by lookup, required by heartbeats
    "1.63",  # /v1/nodes/{node}/management/indicators
    "1.64",  # (ports: network_type in local_link_connection)
    "1.65",  # lessee on nodes and its filter
    "1.66",  # network_data on nodes
    "1.67",  # (VIF attach names a port or port group)
    "1.68",  # agent_verify_ca in heartbeats
    "1.69",  # deploy_steps with the deploy and rebuild verbs
    "1.70",  # disable_ramdisk with manual cleaning
    "1.71",  # (scope-based roles: a marker, no wire change)
    "1.72",  # agent_status and agent_status_message in heartbeats
    "1.73",  # the deploy and undeploy verbs (aliases of active and deleted)
    "1.74",  # BIOS registry fields on /v1/nodes/{node}/bios (detail)
    "1.75",  # boot_mode / secure_boot on nodes and node states
    "1.76",  # PUT /v1/nodes/{node}/states/boot_mode and .../states/secure_boot
    "1.77",  # ?fields= on the driver list and driver detail
    "1.78",  # node history: /v1/nodes/{node}/history
    "1.79",  # allocations prefer the node named like the allocation
    "1.80",  # projects may create and delete their own nodes (policy marker)
    "1.81",  # node inventory: /v1/nodes/{node}/inventory
    "1.82",  # shard on nodes, ?shard= / ?sharded= filters, /v1/shards
    "1.83",  # parent_node on nodes, /v1/nodes/{node}/children, ?parent_node= / ?include_children=
    "1.84",  # (ramdisk callback to continue inspection: POST /v1/continue_inspection)
    "1.85",  # the unhold verb
    "1.86",  # firmware_interface on nodes; /v1/nodes/{node}/firmware
    "1.87",  # servicing: the service verb with service_steps; service_step on nodes
    "1.88",  # (ports: name)
    "1.89",  # virtual media attach/detach: /v1/nodes/{node}/vmedia
    "1.90",  # (ports: OVN VTEP switch in local_link_connection)
    "1.91",  # a trailing .json is part of the resource name
    "1.92",  # runbooks: /v1/runbooks, "runbook" with clean and service
    "1.93",  # GET /v1/nodes/{node}/vmedia
    "1.94",  # (ports: node given by name)
    "1.95",  # disable_power_off on nodes
    "1.96",  # inspection rules: /v1/inspection_rules
    "1.97",  # (ports: description)
    "1.98",  # patch paths may escape ~ and / in keys (~0, ~1)
    "1.99",  # (ports and port groups: conductor_group filter)
    "1.100", # (ports: vendor)
    "1.101", # (ports: category)
    "1.102", # (port groups: physical_network)
    "1.103", # (port groups: category)
    "1.104", # instance_name on nodes and its filter
    "1.105", # (ports: OVN VTEP switch removed)
    "1.106", # (port groups: shard filter)
    "1.107", # X-OpenStack-Request-Id accepted from clients (no body change)
    "1.108", # disable_ramdisk with servicing
    "1.109", # health on nodes
    "1.110", # abort from wait call-back (deploying)
    "1.111", # (ports and port groups: dynamic port groups)
    "1.112", # runbook traits: /v1/runbooks/{runbook}/traits, description on runbooks
    "1.113", # node history visible to node owners and lessees
    "1.114", # vendor, model, serial_number on firmware components
    "1.115", # provision_state, target_provision_state, duration_seconds on node history
)


def _no_headers(_version: Version | None, _spec: VersionSpec) -> list[tuple[str, str]]:
    # Ironic's headers depend on the request (a malformed version header
    # gets none), so corral.baremetal.api.app adds them per request.
    return []


SPEC = VersionSpec(
    service_type=SERVICE_TYPE,
    versions=VERSIONS,
    legacy_headers=(LEGACY_HEADER,),
    response_headers=_no_headers,
)

MIN_VERSION = VERSIONS[0]
MAX_VERSION = VERSIONS[-1]
