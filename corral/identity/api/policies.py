"""Identity's policy rules: Keystone's names and defaults.

Keystone's targets are nested objects it flattens into dotted keys
(``target.user.id``); handlers pass targets already flattened.  The
``manager`` branches of Keystone's newest defaults are left out: Corral
creates the ``admin``, ``member``, ``reader`` and ``service`` roles.
"""

from __future__ import annotations

from oslo_policy import policy

ADMIN_REQUIRED = "rule:admin_required"
SYSTEM_READER = "(role:reader and system_scope:all)"
ADMIN_OR_SYSTEM_READER = f"{ADMIN_REQUIRED} or {SYSTEM_READER}"
_ALL_SCOPES = ["system", "domain", "project"]

# (rule, default check string, description)
_RULES = [
    ("identity:get_auth_catalog", "", "Get the service catalog of the token."),
    ("identity:get_auth_projects", "", "List the projects the token's user can scope to."),
    ("identity:get_auth_domains", "", "List the domains the token's user can scope to."),
    ("identity:get_auth_system", "", "List the system scopes the token's user can scope to."),
    ("identity:check_token", f"{ADMIN_OR_SYSTEM_READER} or rule:token_subject", "Check a token."),
    ("identity:validate_token", f"{ADMIN_OR_SYSTEM_READER} or rule:service_role or rule:token_subject",
     "Validate a token."),
    ("identity:revoke_token", f"{ADMIN_REQUIRED} or rule:token_subject", "Revoke a token."),
    ("identity:get_domain", f"{ADMIN_OR_SYSTEM_READER} or domain_id:%(target.domain.id)s", "Show a domain."),
    ("identity:list_domains", ADMIN_OR_SYSTEM_READER, "List domains."),
    ("identity:create_domain", ADMIN_REQUIRED, "Create a domain."),
    ("identity:update_domain", ADMIN_REQUIRED, "Update a domain."),
    ("identity:delete_domain", ADMIN_REQUIRED, "Delete a domain."),
    ("identity:get_project",
     f"{ADMIN_OR_SYSTEM_READER} or (role:reader and domain_id:%(target.project.domain_id)s) "
     "or project_id:%(target.project.id)s", "Show a project."),
    ("identity:list_projects", f"{ADMIN_OR_SYSTEM_READER} or (role:reader and domain_id:%(target.domain_id)s)",
     "List projects."),
    ("identity:list_user_projects",
     f"{ADMIN_OR_SYSTEM_READER} or (role:reader and domain_id:%(target.user.domain_id)s) "
     "or user_id:%(target.user.id)s", "List the projects a user has roles on."),
    ("identity:create_project", ADMIN_REQUIRED, "Create a project."),
    ("identity:update_project", ADMIN_REQUIRED, "Update a project."),
    ("identity:delete_project", ADMIN_REQUIRED, "Delete a project."),
    ("identity:get_user",
     f"{ADMIN_OR_SYSTEM_READER} or (role:reader and domain_id:%(target.user.domain_id)s) "
     "or user_id:%(target.user.id)s", "Show a user."),
    ("identity:list_users", f"{ADMIN_OR_SYSTEM_READER} or (role:reader and domain_id:%(target.domain_id)s)",
     "List users."),
    ("identity:create_user", ADMIN_REQUIRED, "Create a user."),
    ("identity:update_user", ADMIN_REQUIRED, "Update a user."),
    ("identity:delete_user", ADMIN_REQUIRED, "Delete a user."),
    ("identity:get_role", ADMIN_OR_SYSTEM_READER, "Show a role."),
    ("identity:list_roles", ADMIN_OR_SYSTEM_READER, "List roles."),
    ("identity:create_role", ADMIN_REQUIRED, "Create a role."),
    ("identity:update_role", ADMIN_REQUIRED, "Update a role."),
    ("identity:delete_role", ADMIN_REQUIRED, "Delete a role."),
    ("identity:get_implied_role", ADMIN_OR_SYSTEM_READER, "Show a role implication."),
    ("identity:list_implied_roles", ADMIN_OR_SYSTEM_READER, "List the roles a role implies."),
    ("identity:list_role_inference_rules", ADMIN_OR_SYSTEM_READER, "List every role implication."),
    ("identity:check_implied_role", ADMIN_OR_SYSTEM_READER, "Check a role implication."),
    ("identity:create_implied_role", ADMIN_REQUIRED, "Create a role implication."),
    ("identity:delete_implied_role", ADMIN_REQUIRED, "Delete a role implication."),
    ("identity:check_grant", ADMIN_OR_SYSTEM_READER, "Check a role assignment."),
    ("identity:list_grants", ADMIN_OR_SYSTEM_READER, "List a user's roles on a project or domain."),
    ("identity:create_grant", ADMIN_REQUIRED, "Assign a role."),
    ("identity:revoke_grant", ADMIN_REQUIRED, "Remove a role assignment."),
    ("identity:list_system_grants_for_user", ADMIN_OR_SYSTEM_READER, "List a user's system roles."),
    ("identity:check_system_grant_for_user", ADMIN_OR_SYSTEM_READER, "Check a user's system role."),
    ("identity:create_system_grant_for_user", ADMIN_REQUIRED, "Assign a system role."),
    ("identity:revoke_system_grant_for_user", ADMIN_REQUIRED, "Remove a system role."),
    ("identity:list_role_assignments",
     f"{ADMIN_OR_SYSTEM_READER} or (role:reader and domain_id:%(target.domain_id)s)", "List role assignments."),
    ("identity:get_application_credential", f"{ADMIN_OR_SYSTEM_READER} or rule:owner",
     "Show an application credential."),
    ("identity:list_application_credentials", f"{ADMIN_OR_SYSTEM_READER} or rule:owner",
     "List application credentials."),
    ("identity:create_application_credential", "user_id:%(user_id)s", "Create an application credential."),
    ("identity:delete_application_credential", "rule:admin_or_owner", "Delete an application credential."),
    ("identity:get_service", ADMIN_OR_SYSTEM_READER, "Show a service."),
    ("identity:list_services", ADMIN_OR_SYSTEM_READER, "List services."),
    ("identity:get_endpoint", ADMIN_OR_SYSTEM_READER, "Show an endpoint."),
    ("identity:list_endpoints", ADMIN_OR_SYSTEM_READER, "List endpoints."),
    ("identity:get_region", "", "Show a region."),
    ("identity:list_regions", "", "List regions."),
]


def rules() -> list[policy.RuleDefault]:
    base = [
        policy.RuleDefault("admin_required", "role:admin or is_admin:1"),
        policy.RuleDefault("service_role", "role:service"),
        policy.RuleDefault("service_or_admin", "rule:admin_required or rule:service_role"),
        policy.RuleDefault("owner", "user_id:%(user_id)s"),
        policy.RuleDefault("admin_or_owner", "rule:admin_required or rule:owner"),
        policy.RuleDefault("token_subject", "user_id:%(target.token.user_id)s"),
    ]
    return base + [
        policy.RuleDefault(name, check, description=description, scope_types=_ALL_SCOPES)
        for name, check, description in _RULES
    ]
