"""Everything Compute's handlers share, built once per application."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from oslo_config import cfg

from corral.core.db import Database
from corral.core.policy import Enforcer


@dataclass
class ComputeState:
    conf: cfg.ConfigOpts
    api_db: Database
    policy: Enforcer
    # corral.compute.cells.CellRegistry (filled in by the app builder).
    cells: Any = None
    # corral.compute.scheduler.SchedulerClient.
    scheduler: Any = None
    # corral.compute.glance.GlanceClient: where boots find their images.
    images: Any = None
