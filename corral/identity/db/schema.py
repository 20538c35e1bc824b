"""Identity's migration tree."""

from corral.core.migrations import MigrationTree
from corral.identity.db.tables import metadata

TREE = MigrationTree(name="identity", script_location="corral.identity.db:migrations", metadata=metadata)
