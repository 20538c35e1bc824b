"""Policy enforcement through oslo.policy.

Each service registers its rules (upstream's names, with the secure-RBAC
check strings as defaults and the legacy ones as ``deprecated_rule``) and
gets an :class:`Enforcer`.  oslo.policy itself then implements the switch
between the two sets of defaults: with ``[oslo_policy]
enforce_new_defaults = False`` a request passes if either the new or the
deprecated rule allows it; with ``True`` only the new rule counts.
``[oslo_policy] policy_file`` overrides any rule.
"""

from __future__ import annotations

import threading
import time
import warnings
from collections.abc import Iterable, Mapping
from typing import Any

from oslo_config import cfg
from oslo_policy import policy as oslo_policy

from corral.core.context import RequestContext
from corral.core.errors import Forbidden

# Shared building blocks for check strings, as upstream spells them.
SYSTEM_ADMIN = "role:admin and system_scope:all"
SYSTEM_READER = "role:reader and system_scope:all"
PROJECT_ADMIN = "role:admin and project_id:%(project_id)s"
PROJECT_MEMBER = "role:member and project_id:%(project_id)s"
PROJECT_READER = "role:reader and project_id:%(project_id)s"
LEGACY_ADMIN = "role:admin"


# How often the policy file is looked at for changes, in seconds.
RULES_CHECK_INTERVAL = 1.0
# Remembered decisions, at most (one per rule and distinct caller, usually few).
MAX_DECISIONS = 10_000


def _decision_key(context: RequestContext, rule: str, target: dict[str, Any]) -> tuple[Any, ...] | None:
    """What a decision depends on, or None when a target value cannot be a key."""
    try:
        frozen_target = tuple(sorted(target.items()))
        hash(frozen_target)
    except TypeError:
        return None
    return (
        rule, context.user_id, context.project_id, context.roles, context.system_scope, context.domain_id,
        frozen_target,
    )


class Enforcer:
    def __init__(
        self,
        conf: cfg.ConfigOpts,
        rules: Iterable[oslo_policy.RuleDefault],
        *,
        forbidden_message: str = "Policy does not allow {rule} to be performed.",
    ) -> None:
        self._enforcer = oslo_policy.Enforcer(conf, use_conf=True)
        self._enforcer.register_defaults(list(rules))
        self._forbidden_message = forbidden_message
        # Decisions already taken, by rule, credentials and target.  A rule
        # is a pure function of those, and evaluating one through
        # oslo.policy costs more than many a request's database work.  The
        # cache is emptied whenever oslo.policy loads changed rules (it
        # looks at the policy file at most once per RULES_CHECK_INTERVAL).
        self._decisions: dict[tuple[Any, ...], bool] = {}
        self._rules_seen: Any = None
        self._checked_at = -RULES_CHECK_INTERVAL
        self._lock = threading.Lock()

    def _load(self) -> None:
        now = time.monotonic()
        if now - self._checked_at < RULES_CHECK_INTERVAL:
            return
        with self._lock:
            # Deprecation notices for rules whose defaults changed are meant
            # for operators reading logs, not for every request.
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                self._enforcer.load_rules()
            if self._enforcer.rules is not self._rules_seen:
                self._rules_seen = self._enforcer.rules
                self._decisions = {}
            self._checked_at = now

    def allows(
        self, context: RequestContext, rule: str, target: Mapping[str, Any] | None = None
    ) -> bool:
        self._load()
        full_target = {"project_id": context.project_id, "user_id": context.user_id}
        if target:
            full_target.update(target)
        key = _decision_key(context, rule, full_target)
        decisions = self._decisions
        if key is not None and (known := decisions.get(key)) is not None:
            return known
        allowed = self._evaluate(context, rule, full_target)
        if key is not None:
            if len(decisions) > MAX_DECISIONS:
                decisions.clear()
            decisions[key] = allowed
        return allowed

    def _evaluate(self, context: RequestContext, rule: str, full_target: dict[str, Any]) -> bool:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return bool(
                    self._enforcer.authorize(rule, full_target, context.policy_credentials(), do_raise=False)
                )
        except oslo_policy.InvalidScope:
            return False

    def authorize(
        self, context: RequestContext, rule: str, target: Mapping[str, Any] | None = None
    ) -> None:
        if not self.allows(context, rule, target):
            raise Forbidden(self._forbidden_message.format(rule=rule))

    @property
    def rules(self) -> Mapping[str, oslo_policy.RuleDefault]:
        return self._enforcer.registered_rules
