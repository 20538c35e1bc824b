"""Compute's policy rules: upstream names and (secure-RBAC) defaults.

``os_compute_api:servers:create:cell_down`` is not an upstream rule: it
comes from the down-cell design (refuse a boot while the project has live
servers in a cell that cannot be reached) and defaults to admins only.
"""

from __future__ import annotations

from oslo_policy import policy

ADMIN_API = "admin_api"
ADMIN = "role:admin"
PROJECT_READER_OR_ADMIN = "(role:reader and project_id:%(project_id)s) or role:admin"
PROJECT_MEMBER_OR_ADMIN = "(role:member and project_id:%(project_id)s) or role:admin"
ANY = "@"

# Rule names used by the handlers.
SERVERS_INDEX = "os_compute_api:servers:index"
SERVERS_DETAIL = "os_compute_api:servers:detail"
SERVERS_INDEX_ALL_TENANTS = "os_compute_api:servers:index:get_all_tenants"
SERVERS_DETAIL_ALL_TENANTS = "os_compute_api:servers:detail:get_all_tenants"
SERVERS_ALLOW_ALL_FILTERS = "os_compute_api:servers:allow_all_filters"
SERVERS_SHOW = "os_compute_api:servers:show"
SERVERS_SHOW_HOST_STATUS = "os_compute_api:servers:show:host_status"
SERVERS_SHOW_FLAVOR_EXTRA_SPECS = "os_compute_api:servers:show:flavor-extra-specs"
SERVERS_CREATE = "os_compute_api:servers:create"
SERVERS_CREATE_CELL_DOWN = "os_compute_api:servers:create:cell_down"
SERVERS_CREATE_FORCED_HOST = "os_compute_api:servers:create:forced_host"
SERVERS_DELETE = "os_compute_api:servers:delete"
EXTENDED_SERVER_ATTRIBUTES = "os_compute_api:os-extended-server-attributes"
DEFERRED_DELETE_RESTORE = "os_compute_api:os-deferred-delete:restore"
DEFERRED_DELETE_FORCE = "os_compute_api:os-deferred-delete:force"
SERVICES_LIST = "os_compute_api:os-services:list"
SERVICES_UPDATE = "os_compute_api:os-services:update"
SERVICES_DELETE = "os_compute_api:os-services:delete"
FLAVOR_CREATE = "os_compute_api:os-flavor-manage:create"
FLAVOR_UPDATE = "os_compute_api:os-flavor-manage:update"
FLAVOR_DELETE = "os_compute_api:os-flavor-manage:delete"
FLAVOR_EXTRA_SPECS_INDEX = "os_compute_api:os-flavor-extra-specs:index"
FLAVOR_EXTRA_SPECS_SHOW = "os_compute_api:os-flavor-extra-specs:show"
FLAVOR_EXTRA_SPECS_CREATE = "os_compute_api:os-flavor-extra-specs:create"
FLAVOR_EXTRA_SPECS_UPDATE = "os_compute_api:os-flavor-extra-specs:update"
FLAVOR_EXTRA_SPECS_DELETE = "os_compute_api:os-flavor-extra-specs:delete"
LIMITS = "os_compute_api:limits"
LIMITS_OTHER_PROJECT = "os_compute_api:limits:other_project"
QUOTA_SHOW = "os_compute_api:os-quota-sets:show"
QUOTA_DETAIL = "os_compute_api:os-quota-sets:detail"
QUOTA_DEFAULTS = "os_compute_api:os-quota-sets:defaults"
QUOTA_UPDATE = "os_compute_api:os-quota-sets:update"
QUOTA_DELETE = "os_compute_api:os-quota-sets:delete"
AGGREGATES_INDEX = "os_compute_api:os-aggregates:index"
AGGREGATES_CREATE = "os_compute_api:os-aggregates:create"
AGGREGATES_SHOW = "os_compute_api:os-aggregates:show"
AGGREGATES_UPDATE = "os_compute_api:os-aggregates:update"
AGGREGATES_DELETE = "os_compute_api:os-aggregates:delete"
AGGREGATES_ADD_HOST = "os_compute_api:os-aggregates:add_host"
AGGREGATES_REMOVE_HOST = "os_compute_api:os-aggregates:remove_host"
AGGREGATES_SET_METADATA = "os_compute_api:os-aggregates:set_metadata"
HYPERVISORS_LIST = "os_compute_api:os-hypervisors:list"
HYPERVISORS_LIST_DETAIL = "os_compute_api:os-hypervisors:list-detail"
HYPERVISORS_STATISTICS = "os_compute_api:os-hypervisors:statistics"
HYPERVISORS_SHOW = "os_compute_api:os-hypervisors:show"
HYPERVISORS_UPTIME = "os_compute_api:os-hypervisors:uptime"
HYPERVISORS_SEARCH = "os_compute_api:os-hypervisors:search"
HYPERVISORS_SERVERS = "os_compute_api:os-hypervisors:servers"
KEYPAIRS_INDEX = "os_compute_api:os-keypairs:index"
KEYPAIRS_CREATE = "os_compute_api:os-keypairs:create"
KEYPAIRS_DELETE = "os_compute_api:os-keypairs:delete"
KEYPAIRS_SHOW = "os_compute_api:os-keypairs:show"
SERVER_GROUPS_CREATE = "os_compute_api:os-server-groups:create"
SERVER_GROUPS_DELETE = "os_compute_api:os-server-groups:delete"
SERVER_GROUPS_INDEX = "os_compute_api:os-server-groups:index"
SERVER_GROUPS_INDEX_ALL_PROJECTS = "os_compute_api:os-server-groups:index:all_projects"
SERVER_GROUPS_SHOW = "os_compute_api:os-server-groups:show"
AVAILABILITY_ZONE_LIST = "os_compute_api:os-availability-zone:list"
AVAILABILITY_ZONE_DETAIL = "os_compute_api:os-availability-zone:detail"
USAGE_SHOW = "os_compute_api:os-simple-tenant-usage:show"
USAGE_LIST = "os_compute_api:os-simple-tenant-usage:list"
SERVERS_START = "os_compute_api:servers:start"
SERVERS_STOP = "os_compute_api:servers:stop"
SERVERS_REBOOT = "os_compute_api:servers:reboot"
SERVERS_REBUILD = "os_compute_api:servers:rebuild"
SERVERS_CREATE_IMAGE = "os_compute_api:servers:create_image"
RESCUE = "os_compute_api:os-rescue"
UNRESCUE = "os_compute_api:os-unrescue"
LOCK = "os_compute_api:os-lock-server:lock"
UNLOCK = "os_compute_api:os-lock-server:unlock"
UNLOCK_OVERRIDE = "os_compute_api:os-lock-server:unlock:unlock_override"
CONSOLE_OUTPUT = "os_compute_api:os-console-output"
METADATA_INDEX = "os_compute_api:server-metadata:index"
METADATA_SHOW = "os_compute_api:server-metadata:show"
METADATA_CREATE = "os_compute_api:server-metadata:create"
METADATA_UPDATE_ALL = "os_compute_api:server-metadata:update_all"
METADATA_UPDATE = "os_compute_api:server-metadata:update"
METADATA_DELETE = "os_compute_api:server-metadata:delete"
TAGS_INDEX = "os_compute_api:os-server-tags:index"
TAGS_SHOW = "os_compute_api:os-server-tags:show"
TAGS_UPDATE = "os_compute_api:os-server-tags:update"
TAGS_UPDATE_ALL = "os_compute_api:os-server-tags:update_all"
TAGS_DELETE = "os_compute_api:os-server-tags:delete"
TAGS_DELETE_ALL = "os_compute_api:os-server-tags:delete_all"
ACTIONS_LIST = "os_compute_api:os-instance-actions:list"
ACTIONS_SHOW = "os_compute_api:os-instance-actions:show"
ACTIONS_EVENTS = "os_compute_api:os-instance-actions:events"

# The owner of a key pair (user-scoped, unlike every other resource here).
ADMIN_OR_USER = "(" + ADMIN + ") or user_id:%(user_id)s"

_DEFAULTS: list[tuple[str, str, str]] = [
    (SERVERS_INDEX, PROJECT_READER_OR_ADMIN, "List servers."),
    (SERVERS_DETAIL, PROJECT_READER_OR_ADMIN, "List servers with details."),
    (SERVERS_INDEX_ALL_TENANTS, ADMIN, "List servers of all projects."),
    (SERVERS_DETAIL_ALL_TENANTS, ADMIN, "List servers of all projects with details."),
    (SERVERS_ALLOW_ALL_FILTERS, ADMIN, "Use every filter when listing servers."),
    (SERVERS_SHOW, PROJECT_READER_OR_ADMIN, "Show a server."),
    (SERVERS_SHOW_HOST_STATUS, ADMIN, "Show host_status in servers."),
    (SERVERS_SHOW_FLAVOR_EXTRA_SPECS, PROJECT_READER_OR_ADMIN, "Show flavor extra specs in servers."),
    (SERVERS_CREATE, PROJECT_MEMBER_OR_ADMIN, "Create a server."),
    (SERVERS_CREATE_CELL_DOWN, "rule:" + ADMIN_API,
     "Create a server while the project has servers in a cell that cannot be reached "
     "(their usage cannot be counted against quota)."),
    (SERVERS_CREATE_FORCED_HOST, ADMIN, "Create a server on a given host."),
    (SERVERS_DELETE, PROJECT_MEMBER_OR_ADMIN, "Delete a server."),
    (EXTENDED_SERVER_ATTRIBUTES, ADMIN, "Show OS-EXT-SRV-ATTR attributes in servers."),
    (DEFERRED_DELETE_RESTORE, PROJECT_MEMBER_OR_ADMIN, "Restore a soft-deleted server."),
    (DEFERRED_DELETE_FORCE, PROJECT_MEMBER_OR_ADMIN, "Delete a soft-deleted server at once."),
    (SERVICES_LIST, ADMIN, "List services."),
    (SERVICES_UPDATE, ADMIN, "Enable, disable or force down services."),
    (SERVICES_DELETE, ADMIN, "Delete a service."),
    (FLAVOR_CREATE, ADMIN, "Create a flavor."),
    (FLAVOR_UPDATE, ADMIN, "Update a flavor's description."),
    (FLAVOR_DELETE, ADMIN, "Delete a flavor."),
    (FLAVOR_EXTRA_SPECS_INDEX, PROJECT_READER_OR_ADMIN, "List a flavor's extra specs."),
    (FLAVOR_EXTRA_SPECS_SHOW, PROJECT_READER_OR_ADMIN, "Show one extra spec."),
    (FLAVOR_EXTRA_SPECS_CREATE, ADMIN, "Create extra specs."),
    (FLAVOR_EXTRA_SPECS_UPDATE, ADMIN, "Update an extra spec."),
    (FLAVOR_EXTRA_SPECS_DELETE, ADMIN, "Delete an extra spec."),
    (LIMITS, ANY, "Show rate and absolute limits of the caller's project."),
    (LIMITS_OTHER_PROJECT, ADMIN, "Show the limits of another project."),
    (QUOTA_SHOW, PROJECT_READER_OR_ADMIN, "Show a project's quotas."),
    (QUOTA_DETAIL, PROJECT_READER_OR_ADMIN, "Show a project's quotas with usage."),
    (QUOTA_DEFAULTS, ANY, "Show the default quotas."),
    (QUOTA_UPDATE, ADMIN, "Update a project's quotas."),
    (QUOTA_DELETE, ADMIN, "Revert a project's quotas to the defaults."),
    (AGGREGATES_INDEX, ADMIN, "List aggregates."),
    (AGGREGATES_CREATE, ADMIN, "Create an aggregate."),
    (AGGREGATES_SHOW, ADMIN, "Show an aggregate."),
    (AGGREGATES_UPDATE, ADMIN, "Update an aggregate."),
    (AGGREGATES_DELETE, ADMIN, "Delete an aggregate."),
    (AGGREGATES_ADD_HOST, ADMIN, "Add a host to an aggregate."),
    (AGGREGATES_REMOVE_HOST, ADMIN, "Remove a host from an aggregate."),
    (AGGREGATES_SET_METADATA, ADMIN, "Set an aggregate's metadata."),
    (HYPERVISORS_LIST, ADMIN, "List hypervisors."),
    (HYPERVISORS_LIST_DETAIL, ADMIN, "List hypervisors with details."),
    (HYPERVISORS_STATISTICS, ADMIN, "Show summary statistics of all hypervisors."),
    (HYPERVISORS_SHOW, ADMIN, "Show a hypervisor."),
    (HYPERVISORS_UPTIME, ADMIN, "Show a hypervisor's uptime."),
    (HYPERVISORS_SEARCH, ADMIN, "Search hypervisors by hostname pattern."),
    (HYPERVISORS_SERVERS, ADMIN, "List the servers of hypervisors matching a hostname pattern."),
    (KEYPAIRS_INDEX, ADMIN_OR_USER, "List key pairs."),
    (KEYPAIRS_CREATE, ADMIN_OR_USER, "Create or import a key pair."),
    (KEYPAIRS_DELETE, ADMIN_OR_USER, "Delete a key pair."),
    (KEYPAIRS_SHOW, ADMIN_OR_USER, "Show a key pair."),
    (SERVER_GROUPS_CREATE, PROJECT_MEMBER_OR_ADMIN, "Create a server group."),
    (SERVER_GROUPS_DELETE, PROJECT_MEMBER_OR_ADMIN, "Delete a server group."),
    (SERVER_GROUPS_INDEX, PROJECT_READER_OR_ADMIN, "List the project's server groups."),
    (SERVER_GROUPS_INDEX_ALL_PROJECTS, ADMIN, "List the server groups of every project."),
    (SERVER_GROUPS_SHOW, PROJECT_READER_OR_ADMIN, "Show a server group."),
    (AVAILABILITY_ZONE_LIST, ANY, "List availability zones."),
    (AVAILABILITY_ZONE_DETAIL, ADMIN, "List availability zones with their hosts and services."),
    (USAGE_SHOW, PROJECT_READER_OR_ADMIN, "Show a project's usage."),
    (USAGE_LIST, ADMIN, "List the usage of every project."),
    (SERVERS_START, PROJECT_MEMBER_OR_ADMIN, "Start a server."),
    (SERVERS_STOP, PROJECT_MEMBER_OR_ADMIN, "Stop a server."),
    (SERVERS_REBOOT, PROJECT_MEMBER_OR_ADMIN, "Reboot a server."),
    (SERVERS_REBUILD, PROJECT_MEMBER_OR_ADMIN, "Rebuild a server."),
    (SERVERS_CREATE_IMAGE, PROJECT_MEMBER_OR_ADMIN, "Create an image from a server."),
    (RESCUE, PROJECT_MEMBER_OR_ADMIN, "Rescue a server."),
    (UNRESCUE, PROJECT_MEMBER_OR_ADMIN, "Unrescue a server."),
    (LOCK, PROJECT_MEMBER_OR_ADMIN, "Lock a server."),
    (UNLOCK, PROJECT_MEMBER_OR_ADMIN, "Unlock a server."),
    (UNLOCK_OVERRIDE, ADMIN, "Unlock a server locked by someone else (an admin's lock)."),
    (CONSOLE_OUTPUT, PROJECT_MEMBER_OR_ADMIN, "Show a server's console output."),
    (METADATA_INDEX, PROJECT_READER_OR_ADMIN, "List a server's metadata."),
    (METADATA_SHOW, PROJECT_READER_OR_ADMIN, "Show one metadata item of a server."),
    (METADATA_CREATE, PROJECT_MEMBER_OR_ADMIN, "Add or update metadata items of a server."),
    (METADATA_UPDATE_ALL, PROJECT_MEMBER_OR_ADMIN, "Replace a server's metadata."),
    (METADATA_UPDATE, PROJECT_MEMBER_OR_ADMIN, "Set one metadata item of a server."),
    (METADATA_DELETE, PROJECT_MEMBER_OR_ADMIN, "Delete one metadata item of a server."),
    (TAGS_INDEX, PROJECT_READER_OR_ADMIN, "List a server's tags."),
    (TAGS_SHOW, PROJECT_READER_OR_ADMIN, "Check a server's tag."),
    (TAGS_UPDATE, PROJECT_MEMBER_OR_ADMIN, "Add a tag to a server."),
    (TAGS_UPDATE_ALL, PROJECT_MEMBER_OR_ADMIN, "Replace a server's tags."),
    (TAGS_DELETE, PROJECT_MEMBER_OR_ADMIN, "Delete a tag of a server."),
    (TAGS_DELETE_ALL, PROJECT_MEMBER_OR_ADMIN, "Delete every tag of a server."),
    (ACTIONS_LIST, PROJECT_READER_OR_ADMIN, "List a server's actions."),
    (ACTIONS_SHOW, PROJECT_READER_OR_ADMIN, "Show a server's action."),
    (ACTIONS_EVENTS, ADMIN, "Show the events of an action with their tracebacks and hosts."),
]


def rules() -> list[policy.RuleDefault]:
    return [
        policy.RuleDefault(ADMIN_API, ADMIN, description="Default rule for most admin APIs."),
        *(
            policy.RuleDefault(name, check_str, description=description, scope_types=["project"])
            for name, check_str, description in _DEFAULTS
        ),
    ]


FORBIDDEN_MESSAGE = "Policy doesn't allow {rule} to be performed."
