"""Everything the Image service's handlers share, built once per application."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from oslo_config import cfg

from corral.core.db import Database
from corral.core.policy import Enforcer
from corral.image.api.schemas import Schemas
from corral.image.store import ImageStore, Staging


@dataclass
class ImageState:
    conf: cfg.ConfigOpts
    db: Database
    policy: Enforcer
    schemas: Schemas
    store: ImageStore
    staging: Staging
    # Runs imports (glance-direct, web-download) after the request that asked for them.
    imports: Any
