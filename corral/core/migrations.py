"""Alembic migrations: one migration tree per database.

Each tree lives in a package directory holding ``env.py`` and
``versions/``; its ``env.py`` only calls :func:`run_env`.  Every tree
records its revision in its own version table (``alembic_version_<name>``),
so two trees may share one database when an operator points them there.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Connection, Engine


@dataclass(frozen=True)
class MigrationTree:
    name: str
    # "package.module:directory" form understood by Alembic.
    script_location: str
    metadata: sa.MetaData

    @property
    def version_table(self) -> str:
        return f"alembic_version_{self.name}"

    def config(self, connection: Connection | None = None) -> Config:
        config = Config()
        config.set_main_option("script_location", self.script_location)
        config.attributes["tree"] = self
        if connection is not None:
            config.attributes["connection"] = connection
        return config


def run_env(context: object) -> None:
    """Body of every tree's ``env.py``: run online against the given connection."""
    config = context.config  # type: ignore[attr-defined]
    tree: MigrationTree = config.attributes["tree"]
    connection: Connection = config.attributes["connection"]
    context.configure(  # type: ignore[attr-defined]
        connection=connection,
        target_metadata=tree.metadata,
        version_table=tree.version_table,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():  # type: ignore[attr-defined]
        context.run_migrations()  # type: ignore[attr-defined]


def upgrade(engine: Engine, tree: MigrationTree, revision: str = "head") -> None:
    with engine.begin() as connection:
        command.upgrade(tree.config(connection), revision)


def current_revision(engine: Engine, tree: MigrationTree) -> str | None:
    with engine.connect() as connection:
        context = MigrationContext.configure(
            connection, opts={"version_table": tree.version_table}
        )
        return context.get_current_revision()


def head_revision(tree: MigrationTree) -> str | None:
    return ScriptDirectory.from_config(tree.config()).get_current_head()


def drift(engine: Engine, tree: MigrationTree) -> list[object]:
    """Differences between the migrated schema and the table definitions."""
    with engine.connect() as connection:
        context = MigrationContext.configure(
            connection,
            opts={
                "version_table": tree.version_table,
                "compare_type": True,
                "include_name": _skip_version_tables,
            },
        )
        return list(compare_metadata(context, tree.metadata))


def _skip_version_tables(name: str | None, type_: str, _parent: object) -> bool:
    return not (type_ == "table" and name is not None and name.startswith("alembic_version"))


def check(engine: Engine, tree: MigrationTree) -> list[str]:
    """Problems that stop this database being used: empty when all is well."""
    problems = []
    current, head = current_revision(engine, tree), head_revision(tree)
    if current != head:
        problems.append(f"{tree.name}: at revision {current}, expected {head}; run 'corral db upgrade'")
        return problems
    problems.extend(f"{tree.name}: schema differs: {diff}" for diff in drift(engine, tree))
    return problems
