"""Bare Metal's migration tree."""

from corral.baremetal.db.tables import metadata
from corral.core.migrations import MigrationTree

TREE = MigrationTree(name="baremetal", script_location="corral.baremetal.db:migrations", metadata=metadata)
