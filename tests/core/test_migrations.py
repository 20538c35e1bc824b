"""Every service's migrations build exactly the schema its tables describe."""

from __future__ import annotations

import pytest

from corral.core import config, migrations
from corral.core import services
from corral.core.db import create_engine
from tests.support.databases import DatabaseFactory


def _trees() -> list[migrations.MigrationTree]:
    conf = config.make_conf(state_path="/nonexistent-corral-state")
    return [tree for module in services.load() for tree, _url in module.migration_targets(conf)]


@pytest.mark.parametrize("tree", _trees(), ids=lambda tree: tree.name)
def test_migrations_match_tables(tree: migrations.MigrationTree, database_factory: DatabaseFactory) -> None:
    engine = create_engine(database_factory.new_url(tree.name))
    try:
        assert migrations.check(engine, tree) != []  # nothing applied yet
        migrations.upgrade(engine, tree)
        assert migrations.current_revision(engine, tree) == migrations.head_revision(tree)
        assert migrations.drift(engine, tree) == []
        assert migrations.check(engine, tree) == []
        migrations.upgrade(engine, tree)  # idempotent at head
    finally:
        engine.dispose()
