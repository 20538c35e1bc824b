"""The Image service's migration tree."""

from corral.core.migrations import MigrationTree
from corral.image.db.tables import metadata

TREE = MigrationTree(name="image", script_location="corral.image.db:migrations", metadata=metadata)
