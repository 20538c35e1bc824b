"""Bare Metal's parts for ``GET /healthcheck`` (see corral.core.health)."""

from __future__ import annotations

from oslo_config import cfg

from corral.core import health


def checks(conf: cfg.ConfigOpts) -> list[health.Check]:
    from corral.baremetal import conf as baremetal_conf
    from corral.baremetal.db.schema import TREE

    url = baremetal_conf.database_url(conf)
    return [health.database_check("baremetal.database", url, TREE), _conductors(conf, url)]


def _conductors(conf: cfg.ConfigOpts, url: str) -> health.Check:
    """At least one conductor has sent a heartbeat within [conductor] heartbeat_timeout."""
    import sqlalchemy as sa

    from corral.baremetal.db import conductors
    from corral.core.db import create_engine

    engine: list[sa.engine.Engine] = []

    def check() -> list[health.Part]:
        if not engine:
            engine.append(create_engine(url, pool_size=1, max_overflow=1, connect_timeout=3))
        try:
            with engine[0].connect() as conn:
                alive = len(conductors.alive(conn, conf.conductor.heartbeat_timeout))
        except sa.exc.SQLAlchemyError:
            return [health.Part("baremetal.conductors", health.DOWN, "cannot be read from the database")]
        if not alive:
            return [health.Part("baremetal.conductors", health.DOWN, "no conductor has sent a heartbeat recently")]
        return [health.Part("baremetal.conductors", health.OK, f"{alive} alive")]

    return check
