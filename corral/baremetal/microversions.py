"""Bare Metal microversions: the one canonical list.

Every version this service implements, oldest first, with what it
changed.  Requests without a version header get the oldest (1.1), as
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
    "1.22",  # (ramdisk lookup and heartbeat)
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
    "1.36",  # (agent version in heartbeats)
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
