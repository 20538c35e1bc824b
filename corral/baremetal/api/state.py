"""Everything Bare Metal's handlers share, built once per application."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from oslo_config import cfg

from corral.core.db import Database
from corral.core.policy import Enforcer


@dataclass
class BaremetalState:
    conf: cfg.ConfigOpts
    db: Database
    policy: Enforcer
    # How the API reaches conductors (corral.baremetal.conductor.rpcapi.ConductorAPI).
    rpc: Any
    # Hardware types, to check and default a node's interfaces.
    drivers: Any
