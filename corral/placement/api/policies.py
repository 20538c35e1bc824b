"""Placement's policy rules: upstream names and defaults.

The secure-RBAC defaults are the rules' check strings; the legacy
"admin only" defaults are kept as deprecated rules so oslo.policy applies
them while ``[oslo_policy] enforce_new_defaults`` is False.
"""

from __future__ import annotations

from oslo_policy import policy

from corral.core.policy import LEGACY_ADMIN, SYSTEM_ADMIN, SYSTEM_READER

ADMIN_API = "admin_api"

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
        scope_types=["system", "project"] if "project" in check_str else ["system"],
        deprecated_rule=_DEPRECATED_ADMIN,
    )


def rules() -> list[policy.RuleDefault]:
    return [
        policy.RuleDefault(ADMIN_API, LEGACY_ADMIN, description="Default rule for most placement APIs."),
        _rule(
            "placement:resource_providers:list",
            SYSTEM_READER,
            "List resource providers.",
            [("GET", "/resource_providers")],
        ),
        _rule(
            "placement:resource_providers:create",
            SYSTEM_ADMIN,
            "Create resource provider.",
            [("POST", "/resource_providers")],
        ),
    ]
