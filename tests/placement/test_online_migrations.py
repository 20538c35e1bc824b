"""corral placement online-data-migrations creates missing consumer records."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import sqlalchemy as sa

from corral.core import config, migrations
from corral.core.db import Database
from corral.placement.db.schema import TREE
from corral.placement.db.tables import allocations, consumers, projects, resource_classes, resource_providers


def _run(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "corral", "placement", "online-data-migrations", "--data-dir", str(data_dir), *args],
        capture_output=True, text=True, timeout=120,
    )


def test_creates_incomplete_consumers_in_batches(data_dir: Path) -> None:
    conf = config.make_conf(state_path=str(data_dir))
    db = Database.from_url("sqlite:///" + str(data_dir / "placement.sqlite"))
    migrations.upgrade(db.engine, TREE)
    old_consumers = [str(uuid.uuid4()) for _ in range(3)]

    def seed(conn):
        conn.execute(resource_classes.insert().values(id=1, name="VCPU"))
        conn.execute(resource_providers.insert().values(id=1, uuid=str(uuid.uuid4()), name="rp", generation=0, root_provider_id=None))
        for consumer in old_consumers:
            conn.execute(allocations.insert().values(resource_provider_id=1, consumer_id=consumer, resource_class_id=1, used=1))

    db.write(seed)
    first = _run(data_dir, "--max-count", "2")
    assert first.returncode == 1, first.stderr
    rest = _run(data_dir)
    assert rest.returncode == 0, rest.stderr
    assert "1 migrated" in rest.stdout
    with db.read() as conn:
        rows = conn.execute(
            sa.select(consumers.c.uuid, projects.c.external_id).join(projects, projects.c.id == consumers.c.project_id)
        ).all()
    assert sorted(uuid for uuid, _ in rows) == sorted(old_consumers)
    assert {project for _, project in rows} == {conf.placement.incomplete_consumer_project_id}
    assert _run(data_dir).returncode == 0
    db.dispose()
