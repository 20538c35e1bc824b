"""Compute's microversions: the one canonical list.

Every supported version, oldest first, with what it changed.  Versions
that only touch APIs Corral does not serve (volumes, migrations, consoles,
server actions...) are listed for completeness: a client may ask for them
and gets the representations of the versions before.
"""

from __future__ import annotations

from microversion_parse import Version

from corral.core.microversion import VersionSpec

SERVICE_TYPE = "compute"
LEGACY_HEADER = "x-openstack-nova-api-version"

VERSIONS = (
    "2.1",   # the v2.1 API: servers, flavors, os-services, limits, os-quota-sets, os-aggregates, os-keypairs,
             # os-server-groups, os-hypervisors, os-availability-zone, os-simple-tenant-usage
    "2.2",   # keypair type (ssh, x509); create 201, delete 204
    "2.3",   # extended server attributes: reservation_id, launch_index, hostname, ...
    "2.4",   # reserved hosts for volumes
    "2.5",   # ip6 filter on server lists
    "2.6",   # remote consoles
    "2.7",   # flavor access checks on public flavors
    "2.8",   # mks consoles
    "2.9",   # 'locked' in servers
    "2.10",  # keypairs of other users
    "2.11",  # os-services: forced_down (PUT /os-services/force-down)
    "2.12",  # virtual interfaces net_id
    "2.13",  # server groups: project_id and user_id
    "2.14",  # evacuate without on_shared_storage
    "2.15",  # soft-affinity policies
    "2.16",  # host_status in servers (admin)
    "2.17",  # trigger crash dump
    "2.18",  # project id optional in URLs
    "2.19",  # server 'description'
    "2.20",  # volume actions on shelved servers
    "2.21",  # deleted instance actions
    "2.22",  # force live migration completion
    "2.23",  # migration ids and types
    "2.24",  # abort live migrations
    "2.25",  # live migration block_migration auto
    "2.26",  # server tags
    "2.27",  # standard OpenStack-API-Version header
    "2.28",  # hypervisor cpu_info as a JSON object
    "2.29",  # force evacuate
    "2.30",  # force live migrate
    "2.31",  # serial console URL fix
    "2.32",  # device tags on boot
    "2.33",  # paging hypervisors
    "2.34",  # async live migration checks
    "2.35",  # paging keypairs
    "2.36",  # proxy APIs removed; limits without network/security group quotas
    "2.37",  # networks 'auto' and 'none' on boot (required)
    "2.38",  # 400 for invalid server status filters
    "2.39",  # image limits removed from /limits
    "2.40",  # simple tenant usage paging
    "2.41",  # aggregate uuid
    "2.42",  # device tags on boot restored
    "2.43",  # os-hosts removed
    "2.44",  # network proxy actions removed
    "2.45",  # createImage returns image_id only
    "2.46",  # request id in instance actions
    "2.47",  # embedded flavor in server representations
    "2.48",  # standard diagnostics
    "2.49",  # tagged volume attach
    "2.50",  # quota classes: server groups
    "2.51",  # volume-extended events
    "2.52",  # tags on boot
    "2.53",  # service and hypervisor ids are UUIDs; PUT /os-services/{id}; hypervisor_hostname_pattern and
             # with_servers replace /os-hypervisors/{pattern}/search and /servers
    "2.54",  # key pair on rebuild
    "2.55",  # flavor description
    "2.56",  # target host on cold migration
    "2.57",  # personality removed; user_data on rebuild; quota files removed
    "2.58",  # instance actions paging
    "2.59",  # migrations paging
    "2.60",  # multiattach volumes
    "2.61",  # flavor extra_specs in flavor representations
    "2.62",  # host and hostId in instance action events
    "2.63",  # trusted image certificates
    "2.64",  # server group policy and rules
    "2.65",  # abort queued live migrations
    "2.66",  # changes-before filter
    "2.67",  # volume_type in block device mapping
    "2.68",  # force live migration/evacuate removed
    "2.69",  # minimal records for servers and services in cells that cannot be reached
    "2.70",  # device tags in interface and volume attachments
    "2.71",  # server_groups in GET /servers/{id} (minimal records too)
    "2.72",  # ports with resource requests on boot
    "2.73",  # locked_reason in servers; 'locked' filter on server lists
)


def _response_headers(version: Version | None, spec: VersionSpec) -> list[tuple[str, str]]:
    if version is None:
        # A malformed version string is answered without version headers.
        return []
    shown = f"{version.major}.{version.minor}"
    return [
        ("openstack-api-version", f"{SERVICE_TYPE} {shown}"),
        ("x-openstack-nova-api-version", shown),
        ("vary", "OpenStack-API-Version, X-OpenStack-Nova-API-Version"),
    ]


SPEC = VersionSpec(
    service_type=SERVICE_TYPE,
    versions=VERSIONS,
    legacy_headers=(LEGACY_HEADER,),
    response_headers=_response_headers,
)
