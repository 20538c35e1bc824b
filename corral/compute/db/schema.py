"""Compute's two migration trees: the API database and the cell databases.

Every cell database (cell0 included) is migrated with the same cell tree.
"""

from corral.core.migrations import MigrationTree
from corral.compute.db import api_tables, cell_tables

API_TREE = MigrationTree(
    name="compute_api", script_location="corral.compute.db:api_migrations", metadata=api_tables.metadata
)
CELL_TREE = MigrationTree(
    name="compute_cell", script_location="corral.compute.db:cell_migrations", metadata=cell_tables.metadata
)
