"""Bare Metal policy rules (upstream names).

Defaults are admin-only; projects reach nodes they own or lease through
the owner/lessee rules, as upstream's project-scoped defaults allow.
"""

from __future__ import annotations

from oslo_policy import policy

ADMIN = "role:admin"
OWNER_OR_LESSEE = "role:admin or project_id:%(node.owner)s or project_id:%(node.lessee)s"


def _rule(name: str, check_str: str, description: str) -> policy.RuleDefault:
    return policy.RuleDefault(name=name, check_str=check_str, description=description)


def rules() -> list[policy.RuleDefault]:
    return [
        _rule("baremetal:node:create", ADMIN, "Create a node."),
        _rule("baremetal:node:list", "role:admin or role:reader", "List nodes."),
        _rule("baremetal:node:get", OWNER_OR_LESSEE, "Show a node."),
        _rule("baremetal:node:update", ADMIN, "Update a node."),
        _rule("baremetal:node:delete", ADMIN, "Delete a node."),
        _rule("baremetal:node:set_provision_state", ADMIN, "Change a node's provision state."),
        _rule("baremetal:node:set_power_state", ADMIN, "Change a node's power state."),
        _rule("baremetal:node:set_maintenance", ADMIN, "Put a node in or out of maintenance."),
        _rule("baremetal:node:traits:list", OWNER_OR_LESSEE, "List a node's traits."),
        _rule("baremetal:node:traits:set", ADMIN, "Set a node's traits."),
        _rule("baremetal:node:traits:delete", ADMIN, "Remove a node's traits."),
        _rule("baremetal:node:get_states", OWNER_OR_LESSEE, "Show a node's states."),
        _rule("baremetal:node:clean_steps:get", ADMIN, "List a node's clean steps."),
        _rule("baremetal:node:get_console", ADMIN, "Show a node's console."),
        _rule("baremetal:node:set_console_state", ADMIN, "Enable or disable a node's console."),
        _rule("baremetal:node:vif:list", OWNER_OR_LESSEE, "List a node's VIFs."),
        _rule("baremetal:node:vif:attach", ADMIN, "Attach a VIF to a node."),
        _rule("baremetal:node:vif:detach", ADMIN, "Detach a VIF from a node."),
        _rule("baremetal:node:bios:get", OWNER_OR_LESSEE, "Show a node's BIOS settings."),
        _rule("baremetal:driver:get", ADMIN, "List and show drivers."),
        _rule("baremetal:port:get", OWNER_OR_LESSEE, "Show a port."),
        _rule("baremetal:port:list", "role:admin or role:reader", "List ports."),
        _rule("baremetal:port:create", ADMIN, "Create a port."),
        _rule("baremetal:port:update", ADMIN, "Update a port."),
        _rule("baremetal:port:delete", ADMIN, "Delete a port."),
        _rule("baremetal:portgroup:get", OWNER_OR_LESSEE, "Show a port group."),
        _rule("baremetal:portgroup:list", "role:admin or role:reader", "List port groups."),
        _rule("baremetal:portgroup:create", ADMIN, "Create a port group."),
        _rule("baremetal:portgroup:update", ADMIN, "Update a port group."),
        _rule("baremetal:portgroup:delete", ADMIN, "Delete a port group."),
        _rule("baremetal:chassis:get", ADMIN, "List and show chassis."),
        _rule("baremetal:chassis:create", ADMIN, "Create a chassis."),
        _rule("baremetal:chassis:update", ADMIN, "Update a chassis."),
        _rule("baremetal:chassis:delete", ADMIN, "Delete a chassis."),
        _rule("baremetal:volume:get", "role:admin or role:reader", "List and show volume connectors and targets."),
        _rule("baremetal:volume:create", ADMIN, "Create a volume connector or target."),
        _rule("baremetal:volume:update", ADMIN, "Update a volume connector or target."),
        _rule("baremetal:volume:delete", ADMIN, "Delete a volume connector or target."),
        _rule("baremetal:volume:view_target_properties", ADMIN, "See the properties of volume targets."),
        _rule("baremetal:conductor:get", ADMIN, "List and show conductors."),
        _rule("baremetal:allocation:create", "role:admin or role:member", "Create an allocation."),
        _rule("baremetal:allocation:list", "role:admin or role:reader or role:member", "List allocations."),
        _rule("baremetal:allocation:get", "role:admin or project_id:%(allocation.owner)s", "Show an allocation."),
        _rule("baremetal:allocation:delete", "role:admin or project_id:%(allocation.owner)s",
              "Delete an allocation."),
    ]
