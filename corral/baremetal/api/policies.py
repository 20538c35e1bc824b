"""Bare Metal policy rules: upstream's names and project-scoped defaults.

Corral's operator is a user with the ``admin`` role (any scope) or a
system-scoped reader/member; projects reach the nodes they own or lease
through the owner/lessee checks upstream's secure-RBAC defaults use:
a node's owner project may manage it (members act, admins and managers
also change its interfaces and traits), a lessee project may use it
(readers see it, members and admins provision it), anyone else gets 404.
"""

from __future__ import annotations

from oslo_policy import policy

SYSTEM_ADMIN = "role:admin"
SYSTEM_MEMBER = "role:admin or (role:member and system_scope:all) or (role:service and system_scope:all)"
SYSTEM_READER = "role:admin or (role:reader and system_scope:all) or (role:service and system_scope:all)"

PROJECT_OWNER_ADMIN = "role:admin and project_id:%(node.owner)s"
PROJECT_OWNER_MANAGER = "role:manager and project_id:%(node.owner)s"
PROJECT_OWNER_MEMBER = "role:member and project_id:%(node.owner)s"
PROJECT_OWNER_READER = "role:reader and project_id:%(node.owner)s"
PROJECT_LESSEE_ADMIN = "role:admin and project_id:%(node.lessee)s"
PROJECT_LESSEE_MANAGER = "role:manager and project_id:%(node.lessee)s"
PROJECT_MEMBER = "role:member and (project_id:%(node.owner)s or project_id:%(node.lessee)s)"
PROJECT_READER = "role:reader and (project_id:%(node.owner)s or project_id:%(node.lessee)s)"
PROJECT_SERVICE = "role:service and project_id:%(node.owner)s"


def _any(*checks: str) -> str:
    return " or ".join(f"({check})" for check in checks)


SYSTEM_OR_PROJECT_MEMBER = _any(SYSTEM_MEMBER, PROJECT_MEMBER)
SYSTEM_OR_PROJECT_READER = _any(SYSTEM_READER, PROJECT_READER, PROJECT_SERVICE)
SYSTEM_OR_OWNER_MEMBER_AND_LESSEE_ADMIN = _any(SYSTEM_MEMBER, PROJECT_OWNER_MEMBER, PROJECT_LESSEE_ADMIN,
                                               PROJECT_LESSEE_MANAGER, PROJECT_SERVICE)
SYSTEM_MEMBER_OR_OWNER_ADMIN = _any(SYSTEM_MEMBER, PROJECT_OWNER_ADMIN, PROJECT_OWNER_MANAGER, PROJECT_SERVICE)
SYSTEM_MEMBER_OR_OWNER_MEMBER = _any(SYSTEM_MEMBER, PROJECT_OWNER_MEMBER, PROJECT_SERVICE)
SYSTEM_OR_OWNER_READER = _any(SYSTEM_READER, PROJECT_OWNER_READER, PROJECT_SERVICE)
API_READER = "role:reader or role:service"

ALLOCATION_MEMBER = _any(SYSTEM_MEMBER, "role:member and project_id:%(allocation.owner)s")
ALLOCATION_READER = _any(SYSTEM_READER, "role:reader and project_id:%(allocation.owner)s")
ALLOCATION_CREATOR = _any(SYSTEM_MEMBER, "role:member")

RUNBOOK_ADMIN = _any(SYSTEM_MEMBER, "role:manager and project_id:%(runbook.owner)s", "role:service")
RUNBOOK_READER = _any(SYSTEM_READER, "role:reader and project_id:%(runbook.owner)s", "role:service")
RUNBOOK_CREATOR = _any(SYSTEM_MEMBER, "role:manager", "role:service")

_RULES: tuple[tuple[str, str, str], ...] = (
    # Secrets in answers: "!" lets nobody, operators included, read them back.
    ("show_password", "!", "Show or mask secrets within node driver information in API responses."),
    ("show_instance_secrets", "!", "Show or mask secrets within instance information in API responses."),
    ("baremetal:node:create", SYSTEM_ADMIN, "Create a node."),
    ("baremetal:node:list", API_READER, "List the nodes a project owns or leases."),
    ("baremetal:node:list_all", SYSTEM_READER, "List every node."),
    ("baremetal:node:get", SYSTEM_OR_PROJECT_READER, "Show a node."),
    ("baremetal:node:get:last_error", SYSTEM_OR_OWNER_READER, "Show a node's last_error."),
    ("baremetal:node:get:reservation", SYSTEM_OR_OWNER_READER, "Show a node's reservation."),
    ("baremetal:node:get:driver_internal_info", SYSTEM_OR_OWNER_READER, "Show a node's driver_internal_info."),
    ("baremetal:node:get:driver_info", SYSTEM_OR_OWNER_READER, "Show a node's driver_info."),
    ("baremetal:node:update", SYSTEM_OR_PROJECT_MEMBER, "Update a node (fields without a rule of their own)."),
    ("baremetal:node:update:driver_info", SYSTEM_MEMBER_OR_OWNER_MEMBER, "Change driver_info."),
    ("baremetal:node:update:properties", SYSTEM_MEMBER_OR_OWNER_MEMBER, "Change properties."),
    ("baremetal:node:update:chassis_uuid", SYSTEM_ADMIN, "Change chassis_uuid."),
    ("baremetal:node:update:instance_uuid", SYSTEM_MEMBER_OR_OWNER_MEMBER, "Change instance_uuid."),
    ("baremetal:node:update:lessee", SYSTEM_MEMBER_OR_OWNER_MEMBER, "Change lessee."),
    ("baremetal:node:update:owner", SYSTEM_MEMBER, "Change owner."),
    ("baremetal:node:update:driver_interfaces", SYSTEM_MEMBER_OR_OWNER_ADMIN, "Change driver and interfaces."),
    ("baremetal:node:update:network_data", SYSTEM_MEMBER_OR_OWNER_MEMBER, "Change network_data."),
    ("baremetal:node:update:conductor_group", SYSTEM_MEMBER, "Change conductor_group."),
    ("baremetal:node:update:name", SYSTEM_MEMBER_OR_OWNER_MEMBER, "Change name."),
    ("baremetal:node:update:retired", SYSTEM_MEMBER_OR_OWNER_MEMBER, "Change retired and retired_reason."),
    ("baremetal:node:update:shard", SYSTEM_ADMIN, "Change shard."),
    ("baremetal:node:update:parent_node", SYSTEM_MEMBER, "Change parent_node."),
    ("baremetal:node:update:disable_power_off", SYSTEM_ADMIN, "Change disable_power_off."),
    ("baremetal:node:update_extra", SYSTEM_OR_PROJECT_MEMBER, "Change extra."),
    ("baremetal:node:update_instance_info", SYSTEM_OR_OWNER_MEMBER_AND_LESSEE_ADMIN, "Change instance_info."),
    ("baremetal:node:update_owner_provisioned", SYSTEM_ADMIN, "Change the owner of a provisioned node."),
    ("baremetal:node:delete", SYSTEM_ADMIN, "Delete a node."),
    ("baremetal:node:validate", SYSTEM_OR_OWNER_MEMBER_AND_LESSEE_ADMIN, "Validate a node's interfaces."),
    ("baremetal:node:set_maintenance", SYSTEM_OR_OWNER_MEMBER_AND_LESSEE_ADMIN, "Put a node in maintenance."),
    ("baremetal:node:clear_maintenance", SYSTEM_OR_OWNER_MEMBER_AND_LESSEE_ADMIN, "Take a node out of maintenance."),
    ("baremetal:node:get_boot_device", SYSTEM_MEMBER_OR_OWNER_ADMIN, "Show a node's boot device."),
    ("baremetal:node:set_boot_device", SYSTEM_MEMBER_OR_OWNER_ADMIN, "Change a node's boot device."),
    ("baremetal:node:get_indicator_state", SYSTEM_OR_PROJECT_READER, "Show a node's indicators."),
    ("baremetal:node:set_indicator_state", SYSTEM_MEMBER_OR_OWNER_MEMBER, "Change a node's indicators."),
    ("baremetal:node:inject_nmi", SYSTEM_MEMBER_OR_OWNER_ADMIN, "Inject an NMI."),
    ("baremetal:node:get_states", SYSTEM_OR_PROJECT_READER, "Show a node's states."),
    ("baremetal:node:set_power_state", SYSTEM_OR_PROJECT_MEMBER, "Change a node's power state."),
    ("baremetal:node:set_boot_mode", SYSTEM_OR_PROJECT_MEMBER, "Change a node's boot mode."),
    ("baremetal:node:set_secure_boot", SYSTEM_OR_PROJECT_MEMBER, "Change a node's secure boot."),
    ("baremetal:node:set_provision_state", SYSTEM_OR_OWNER_MEMBER_AND_LESSEE_ADMIN,
     "Change a node's provision state."),
    ("baremetal:node:set_provision_state:clean_steps", SYSTEM_OR_OWNER_MEMBER_AND_LESSEE_ADMIN,
     "Clean a node with given steps."),
    ("baremetal:node:set_provision_state:service_steps", SYSTEM_OR_OWNER_MEMBER_AND_LESSEE_ADMIN,
     "Service a node with given steps."),
    ("baremetal:node:set_raid_state", SYSTEM_MEMBER_OR_OWNER_MEMBER, "Set a node's target RAID configuration."),
    ("baremetal:node:clean_steps:get", SYSTEM_OR_OWNER_READER, "List a node's clean steps."),
    ("baremetal:node:get_console", SYSTEM_MEMBER_OR_OWNER_MEMBER, "Show a node's console."),
    ("baremetal:node:set_console_state", SYSTEM_MEMBER_OR_OWNER_MEMBER, "Enable or disable a node's console."),
    ("baremetal:node:vif:list", SYSTEM_OR_PROJECT_READER, "List a node's VIFs."),
    ("baremetal:node:vif:attach", SYSTEM_OR_OWNER_MEMBER_AND_LESSEE_ADMIN, "Attach a VIF to a node."),
    ("baremetal:node:vif:detach", SYSTEM_OR_OWNER_MEMBER_AND_LESSEE_ADMIN, "Detach a VIF from a node."),
    ("baremetal:node:traits:list", SYSTEM_OR_PROJECT_READER, "List a node's traits."),
    ("baremetal:node:traits:set", SYSTEM_MEMBER_OR_OWNER_ADMIN, "Set a node's traits."),
    ("baremetal:node:traits:delete", SYSTEM_MEMBER_OR_OWNER_ADMIN, "Remove a node's traits."),
    ("baremetal:node:bios:get", SYSTEM_OR_PROJECT_READER, "Show a node's BIOS settings."),
    ("baremetal:node:history:get", SYSTEM_OR_OWNER_READER, "Show a node's history."),
    ("baremetal:node:inventory:get", SYSTEM_OR_OWNER_READER, "Show a node's inventory."),
    ("baremetal:node:firmware:get", SYSTEM_OR_PROJECT_READER, "List a node's firmware components."),
    ("baremetal:node:vmedia:attach", SYSTEM_OR_PROJECT_MEMBER, "Attach virtual media."),
    ("baremetal:node:vmedia:detach", SYSTEM_OR_PROJECT_MEMBER, "Detach virtual media."),
    ("baremetal:node:vmedia:get", SYSTEM_OR_PROJECT_READER, "Show attached virtual media."),
    ("baremetal:shards:get", SYSTEM_READER, "List shards."),
    ("baremetal:driver:get", SYSTEM_READER, "List and show drivers."),
    ("baremetal:conductor:get", SYSTEM_READER, "List and show conductors."),
    ("baremetal:allocation:get", ALLOCATION_READER, "Show an allocation."),
    ("baremetal:allocation:list", API_READER, "List a project's allocations."),
    ("baremetal:allocation:list_all", SYSTEM_READER, "List every allocation."),
    ("baremetal:allocation:create", ALLOCATION_CREATOR, "Create an allocation."),
    ("baremetal:allocation:create_restricted", SYSTEM_MEMBER, "Create an allocation for another project."),
    ("baremetal:allocation:delete", ALLOCATION_MEMBER, "Delete an allocation."),
    ("baremetal:allocation:update", ALLOCATION_MEMBER, "Change an allocation's name and extra."),
    ("baremetal:port:get", SYSTEM_OR_PROJECT_READER, "Show a port."),
    # A project's list holds only the ports of nodes it owns or leases.
    ("baremetal:port:list", API_READER, "List ports."),
    ("baremetal:port:create", SYSTEM_MEMBER_OR_OWNER_ADMIN, "Create a port."),
    ("baremetal:port:update", SYSTEM_MEMBER_OR_OWNER_ADMIN, "Update a port."),
    ("baremetal:port:delete", SYSTEM_MEMBER_OR_OWNER_ADMIN, "Delete a port."),
    ("baremetal:portgroup:get", SYSTEM_OR_PROJECT_READER, "Show a port group."),
    ("baremetal:portgroup:list", API_READER, "List port groups."),
    ("baremetal:portgroup:create", SYSTEM_MEMBER_OR_OWNER_ADMIN, "Create a port group."),
    ("baremetal:portgroup:update", SYSTEM_MEMBER_OR_OWNER_ADMIN, "Update a port group."),
    ("baremetal:portgroup:delete", SYSTEM_MEMBER_OR_OWNER_ADMIN, "Delete a port group."),
    ("baremetal:chassis:get", SYSTEM_READER, "List and show chassis."),
    ("baremetal:chassis:create", SYSTEM_MEMBER, "Create a chassis."),
    ("baremetal:chassis:update", SYSTEM_MEMBER, "Update a chassis."),
    ("baremetal:chassis:delete", SYSTEM_MEMBER, "Delete a chassis."),
    ("baremetal:volume:get", SYSTEM_OR_PROJECT_READER, "List and show volume connectors and targets."),
    ("baremetal:volume:create", SYSTEM_MEMBER_OR_OWNER_ADMIN, "Create a volume connector or target."),
    ("baremetal:volume:update", SYSTEM_MEMBER_OR_OWNER_ADMIN, "Update a volume connector or target."),
    ("baremetal:volume:delete", SYSTEM_MEMBER_OR_OWNER_ADMIN, "Delete a volume connector or target."),
    ("baremetal:volume:view_target_properties", SYSTEM_READER, "See the properties of volume targets."),
    ("baremetal:events:post", SYSTEM_ADMIN, "Post external events."),
    # The agent holds no Keystone token: like upstream's rule:public_api,
    # these pass on the (unauthenticated) lookup and heartbeat routes; the
    # agent token guards what a heartbeat may do.
    ("baremetal:driver:ipa_lookup", "", "Look up a node by its MAC addresses or UUID (the agent)."),
    ("baremetal:node:ipa_heartbeat", "", "Receive heartbeats from the agent."),
    ("baremetal:node:ipa_continue_inspection", "", "Receive the inventory the agent collected (inspection)."),
    ("baremetal:deploy_template:get", SYSTEM_READER, "List and show deploy templates."),
    ("baremetal:deploy_template:create", SYSTEM_ADMIN, "Create a deploy template."),
    ("baremetal:deploy_template:update", SYSTEM_ADMIN, "Update a deploy template."),
    ("baremetal:deploy_template:delete", SYSTEM_ADMIN, "Delete a deploy template."),
    ("baremetal:inspection_rule:get", SYSTEM_READER, "List and show inspection rules."),
    ("baremetal:inspection_rule:create", SYSTEM_ADMIN, "Create an inspection rule."),
    ("baremetal:inspection_rule:update", SYSTEM_ADMIN, "Update an inspection rule."),
    ("baremetal:inspection_rule:delete", SYSTEM_ADMIN, "Delete an inspection rule."),
    ("baremetal:runbook:get", RUNBOOK_READER, "Show a runbook."),
    ("baremetal:runbook:list", API_READER, "List a project's and the public runbooks."),
    ("baremetal:runbook:list_all", SYSTEM_READER, "List every runbook."),
    ("baremetal:runbook:create", RUNBOOK_CREATOR, "Create a runbook."),
    ("baremetal:runbook:update", RUNBOOK_ADMIN, "Update a runbook."),
    ("baremetal:runbook:update:public", SYSTEM_MEMBER, "Make a runbook public or private."),
    ("baremetal:runbook:update:owner", SYSTEM_MEMBER, "Change a runbook's owner."),
    ("baremetal:runbook:delete", RUNBOOK_ADMIN, "Delete a runbook."),
    ("baremetal:runbook:use", RUNBOOK_ADMIN, "Clean or service a node with a runbook."),
)


def rules() -> list[policy.RuleDefault]:
    return [policy.RuleDefault(name=name, check_str=check, description=description)
            for name, check, description in _RULES]
