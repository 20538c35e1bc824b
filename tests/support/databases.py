"""Throw-away databases on SQLite, PostgreSQL and MariaDB/MySQL for tests.

Every database a test run creates is named ``corral_t_<time>_<random>``
and dropped at the end of the run; ones left behind by a killed run are
dropped by the next run once they are a few hours old.
"""

from __future__ import annotations

import os
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import sqlalchemy as sa

from corral.core.db import normalize_url

BACKENDS = ("sqlite", "postgresql", "mysql")

SERVER_URLS = {
    "postgresql": os.environ.get(
        "CORRAL_TEST_POSTGRESQL_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
    ),
    "mysql": os.environ.get("CORRAL_TEST_MYSQL_URL", "mysql+pymysql://root@127.0.0.1:3306/"),
}

PREFIX = "corral_t_"
STALE_AFTER = 6 * 3600
# Databases dropped at once at the end of a run.  A drop mostly waits on
# the disk (PostgreSQL checkpoints, MariaDB removes a file per table), and
# concurrent drops share those waits: 40 databases of 30 tables went in a
# third to a half of the time with four at once (more did no better).
DROPS_AT_ONCE = 4


def server_unavailable_reason(backend: str) -> str | None:
    """Why ``backend`` cannot be used here, or None when it can."""
    if backend == "sqlite":
        return None
    url = SERVER_URLS[backend]
    engine = sa.create_engine(normalize_url(url), poolclass=sa.pool.NullPool, connect_args=_timeout(backend))
    try:
        with engine.connect() as conn:
            conn.execute(sa.text("SELECT 1"))
    except sa.exc.SQLAlchemyError as error:
        first_line = str(error.orig if hasattr(error, "orig") else error).splitlines()[0]
        variable = f"CORRAL_TEST_{backend.upper()}_URL"
        return f"{backend} server not reachable at {url} ({first_line}); set {variable}"
    finally:
        engine.dispose()
    return None


def _timeout(backend: str) -> dict[str, int]:
    return {"connect_timeout": 5}


@dataclass
class DatabaseFactory:
    """Creates fresh, empty databases on one backend."""

    backend: str
    workdir: Path
    created: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.backend != "sqlite":
            self._admin = sa.create_engine(
                normalize_url(SERVER_URLS[self.backend]),
                isolation_level="AUTOCOMMIT",
                poolclass=sa.pool.NullPool,
                connect_args=_timeout(self.backend),
            )
            self._drop_stale()

    def new_url(self, label: str = "db") -> str:
        name = f"{PREFIX}{int(time.time())}_{uuid.uuid4().hex[:10]}"
        if self.backend == "sqlite":
            path = self.workdir / f"{label}-{name}.sqlite"
            self.created.append(str(path))
            return f"sqlite:///{path}"
        with self._admin.connect() as conn:
            if self.backend == "postgresql":
                conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
            else:
                conn.execute(sa.text(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"))
        self.created.append(name)
        url = sa.engine.make_url(normalize_url(SERVER_URLS[self.backend])).set(database=name)
        return url.render_as_string(hide_password=False)

    def all_in_one_sections(self, baremetal_url: str | None = None) -> dict[str, dict[str, object]]:
        """A fresh database for each service of an all-in-one ``corral serve``, as configuration sections."""
        return {
            "identity_database": {"connection": self.new_url("identity")},
            "placement_database": {"connection": self.new_url("placement")},
            "image_database": {"connection": self.new_url("image")},
            "baremetal_database": {"connection": baremetal_url or self.new_url("baremetal")},
            "api_database": {"connection": self.new_url("compute_api")},
            "database": {"connection": self.new_url("cell1")},
            "corral_database": {"max_pool_size": 4, "max_overflow": 8},
        }

    def _drop(self, name: str) -> None:
        with self._admin.connect() as conn:
            if self.backend == "postgresql":
                conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
            else:
                conn.execute(sa.text(f"DROP DATABASE IF EXISTS `{name}`"))

    def _drop_stale(self) -> None:
        with self._admin.connect() as conn:
            if self.backend == "postgresql":
                rows = conn.execute(sa.text("SELECT datname FROM pg_database WHERE datname LIKE 'corral_t_%'"))
            else:
                rows = conn.execute(sa.text("SHOW DATABASES LIKE 'corral\\_t\\_%'"))
            names = [row[0] for row in rows]
        now = time.time()
        for name in names:
            try:
                stamp = int(name[len(PREFIX):].split("_", 1)[0])
            except ValueError:
                continue
            if now - stamp > STALE_AFTER:
                self._drop(name)

    def cleanup(self) -> None:
        if self.backend == "sqlite":
            return
        with ThreadPoolExecutor(DROPS_AT_ONCE) as pool:
            list(pool.map(self._drop_quietly, self.created))
        self._admin.dispose()

    def _drop_quietly(self, name: str) -> None:
        try:
            self._drop(name)
        except sa.exc.SQLAlchemyError:
            pass
