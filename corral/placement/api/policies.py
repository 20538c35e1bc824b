"""Placement's policy rules: upstream names and defaults.

The secure-RBAC defaults are the rules' check strings; the legacy
"admin only" defaults are kept as deprecated rules so oslo.policy applies
them while ``[oslo_policy] enforce_new_defaults`` is False.
"""

from __future__ import annotations

from oslo_policy import policy

from corral.core.policy import LEGACY_ADMIN

ADMIN_API = "admin_api"
# Upstream's current defaults: project-scoped admins and service users;
# project readers may also read their own project's usages.
ADMIN_OR_SERVICE = "rule:admin_or_service_api"
ADMIN_OR_PROJECT_READER_OR_SERVICE = "rule:admin_or_project_reader_or_service_api"
# Reshaping is for services only (nova-compute): an admin without the service role is refused.
SERVICE = "rule:service_api"

_DEPRECATED_ADMIN = policy.DeprecatedRule(
    name=ADMIN_API, check_str=LEGACY_ADMIN, deprecated_reason="Placement now supports scoped RBAC roles.",
    deprecated_since="W",
)


def _rule(name: str, check_str: str, description: str, operations: list[tuple[str, str]]) -> policy.DocumentedRuleDefault:
    return policy.DocumentedRuleDefault(
        name=name,
        check_str=check_str,
        description=description,
        operations=[{"method": method, "path": path} for method, path in operations],
        scope_types=["project"],
        deprecated_rule=_DEPRECATED_ADMIN,
    )


# (rule, default check string, description, operations): upstream's names and defaults.
_RULES = [
    ("placement:resource_providers:list", ADMIN_OR_SERVICE, "List resource providers.",
     [("GET", "/resource_providers")]),
    ("placement:resource_providers:create", ADMIN_OR_SERVICE, "Create resource provider.",
     [("POST", "/resource_providers")]),
    ("placement:resource_providers:show", ADMIN_OR_SERVICE, "Show resource provider.",
     [("GET", "/resource_providers/{uuid}")]),
    ("placement:resource_providers:update", ADMIN_OR_SERVICE, "Update resource provider.",
     [("PUT", "/resource_providers/{uuid}")]),
    ("placement:resource_providers:delete", ADMIN_OR_SERVICE, "Delete resource provider.",
     [("DELETE", "/resource_providers/{uuid}")]),
    ("placement:resource_providers:inventories:list", ADMIN_OR_SERVICE, "List resource provider inventories.",
     [("GET", "/resource_providers/{uuid}/inventories")]),
    ("placement:resource_providers:inventories:create", ADMIN_OR_SERVICE, "Create one resource provider inventory.",
     [("POST", "/resource_providers/{uuid}/inventories")]),
    ("placement:resource_providers:inventories:show", ADMIN_OR_SERVICE, "Show resource provider inventory.",
     [("GET", "/resource_providers/{uuid}/inventories/{resource_class}")]),
    ("placement:resource_providers:inventories:update", ADMIN_OR_SERVICE, "Update resource provider inventory.",
     [("PUT", "/resource_providers/{uuid}/inventories"),
      ("PUT", "/resource_providers/{uuid}/inventories/{resource_class}")]),
    ("placement:resource_providers:inventories:delete", ADMIN_OR_SERVICE, "Delete resource provider inventory.",
     [("DELETE", "/resource_providers/{uuid}/inventories"),
      ("DELETE", "/resource_providers/{uuid}/inventories/{resource_class}")]),
    ("placement:resource_classes:list", ADMIN_OR_SERVICE, "List resource classes.", [("GET", "/resource_classes")]),
    ("placement:resource_classes:create", ADMIN_OR_SERVICE, "Create resource class.", [("POST", "/resource_classes")]),
    ("placement:resource_classes:show", ADMIN_OR_SERVICE, "Show resource class.",
     [("GET", "/resource_classes/{name}")]),
    ("placement:resource_classes:update", ADMIN_OR_SERVICE, "Update resource class.",
     [("PUT", "/resource_classes/{name}")]),
    ("placement:resource_classes:delete", ADMIN_OR_SERVICE, "Delete resource class.",
     [("DELETE", "/resource_classes/{name}")]),
    ("placement:resource_providers:aggregates:list", ADMIN_OR_SERVICE, "List resource provider aggregates.",
     [("GET", "/resource_providers/{uuid}/aggregates")]),
    ("placement:resource_providers:aggregates:update", ADMIN_OR_SERVICE, "Update resource provider aggregates.",
     [("PUT", "/resource_providers/{uuid}/aggregates")]),
    ("placement:resource_providers:usages", ADMIN_OR_SERVICE, "List resource provider usages.",
     [("GET", "/resource_providers/{uuid}/usages")]),
    ("placement:usages", ADMIN_OR_PROJECT_READER_OR_SERVICE, "List total resource usages for a given project.",
     [("GET", "/usages")]),
    ("placement:traits:list", ADMIN_OR_SERVICE, "List traits.", [("GET", "/traits")]),
    ("placement:traits:show", ADMIN_OR_SERVICE, "Show trait.", [("GET", "/traits/{name}")]),
    ("placement:traits:update", ADMIN_OR_SERVICE, "Update trait.", [("PUT", "/traits/{name}")]),
    ("placement:traits:delete", ADMIN_OR_SERVICE, "Delete trait.", [("DELETE", "/traits/{name}")]),
    ("placement:resource_providers:traits:list", ADMIN_OR_SERVICE, "List resource provider traits.",
     [("GET", "/resource_providers/{uuid}/traits")]),
    ("placement:resource_providers:traits:update", ADMIN_OR_SERVICE, "Update resource provider traits.",
     [("PUT", "/resource_providers/{uuid}/traits")]),
    ("placement:resource_providers:traits:delete", ADMIN_OR_SERVICE, "Remove any traits from a resource provider.",
     [("DELETE", "/resource_providers/{uuid}/traits")]),
    ("placement:allocations:manage", ADMIN_OR_SERVICE, "Manage allocations.", [("POST", "/allocations")]),
    ("placement:allocations:list", ADMIN_OR_SERVICE, "List allocations.", [("GET", "/allocations/{consumer_uuid}")]),
    ("placement:allocations:update", ADMIN_OR_SERVICE, "Update allocations.",
     [("PUT", "/allocations/{consumer_uuid}")]),
    ("placement:allocations:delete", ADMIN_OR_SERVICE, "Delete allocations.",
     [("DELETE", "/allocations/{consumer_uuid}")]),
    ("placement:resource_providers:allocations:list", ADMIN_OR_SERVICE, "List resource provider allocations.",
     [("GET", "/resource_providers/{uuid}/allocations")]),
    ("placement:allocation_candidates:list", ADMIN_OR_SERVICE, "List allocation candidates.",
     [("GET", "/allocation_candidates")]),
    ("placement:reshaper:reshape", SERVICE, "Reshape Inventory and Allocations.", [("POST", "/reshaper")]),
]


def _base_rules() -> list[policy.RuleDefault]:
    return [
        policy.RuleDefault(ADMIN_API, LEGACY_ADMIN, description="Default rule for most placement APIs.",
                           scope_types=["project"]),
        policy.RuleDefault("service_api", "role:service", scope_types=["project"], deprecated_rule=_DEPRECATED_ADMIN,
                           description="Default rule for service-to-service placement APIs."),
        policy.RuleDefault("admin_or_service_api", "role:admin or role:service", scope_types=["project"],
                           deprecated_rule=_DEPRECATED_ADMIN, description="Default rule for most placement APIs."),
        policy.RuleDefault("project_reader_api", "role:reader and project_id:%(project_id)s",
                           deprecated_rule=_DEPRECATED_ADMIN, description="Default rule for Project level reader APIs."),
        policy.RuleDefault("admin_or_project_reader_or_service_api",
                           "role:admin or rule:project_reader_api or role:service", scope_types=["project"],
                           deprecated_rule=_DEPRECATED_ADMIN, description="Default rule for project level reader APIs."),
    ]


def rules() -> list[policy.RuleDefault]:
    return [
        *_base_rules(),
        *(
            _rule(name, check_str, description, operations)
            for name, check_str, description, operations in _RULES
        ),
    ]
