"""Everything the identity service's handlers share, built once per application."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import jsonschema
from oslo_config import cfg

from corral.core.db import Database
from corral.core.policy import Enforcer
from corral.identity.domain.passwords import PasswordHasher
from corral.identity.keys import KeyRing
from corral.identity.validator import TokenValidator


@dataclass
class IdentityState:
    conf: cfg.ConfigOpts
    db: Database
    policy: Enforcer
    hasher: PasswordHasher
    keys: KeyRing
    validator: TokenValidator
    # Request-body validators, compiled when the application is built.
    schemas: dict[str, jsonschema.protocols.Validator] = field(default_factory=dict)
    cache: dict[str, Any] = field(default_factory=dict)

    @property
    def token_lifetime(self) -> int:
        """Longest a token can be accepted: its lifetime plus the allowed-expired window."""
        return self.conf.token.expiration + self.conf.token.allow_expired_window
