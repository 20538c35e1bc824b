"""Everything Placement's handlers share, built once per application."""

from __future__ import annotations

from dataclasses import dataclass

from oslo_config import cfg

from corral.core.db import Database
from corral.core.policy import Enforcer


@dataclass
class PlacementState:
    conf: cfg.ConfigOpts
    db: Database
    policy: Enforcer
