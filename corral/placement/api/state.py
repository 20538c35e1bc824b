"""Everything Placement's handlers share, built once per application."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from oslo_config import cfg

from corral.core.db import Database
from corral.core.policy import Enforcer
from corral.core.schema import VersionedSchema
from corral.placement.db.topology_cache import TopologyCache


@dataclass
class PlacementState:
    conf: cfg.ConfigOpts
    db: Database
    policy: Enforcer
    # Request-body validators, compiled when the application is built.
    schemas: dict[str, VersionedSchema] = field(default_factory=dict)
    # Names and ids of the standard resource classes and traits (they never
    # change while the service runs), filled at start-up.
    standard_classes: dict[str, int] = field(default_factory=dict)
    standard_traits: dict[str, int] = field(default_factory=dict)
    # The provider topology as last read, for the allocation-candidate search.
    topology: TopologyCache = field(default_factory=TopologyCache)
    # Anything else a module wants to build once (query-string validators).
    cache: dict[str, Any] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def schema(self, name: str) -> VersionedSchema:
        return self.schemas[name]
