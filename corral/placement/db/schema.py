"""Placement's migration tree."""

from corral.core.migrations import MigrationTree
from corral.placement.db.tables import metadata

TREE = MigrationTree(name="placement", script_location="corral.placement.db:migrations", metadata=metadata)
