"""Bare Metal's parts for ``GET /healthcheck`` (see corral.core.health)."""

from __future__ import annotations

from oslo_config import cfg
from sqlalchemy.engine import Connection

from corral.core import health


def checks(conf: cfg.ConfigOpts) -> list[health.Check]:
    from corral.baremetal import conf as baremetal_conf
    from corral.baremetal.db.schema import TREE

    # The conductors' heartbeats are read in the database check's one
    # statement: one round trip tells both parts.
    check = health.database_check("baremetal.database", baremetal_conf.database_url(conf), TREE, conf,
                                  query=_conductors(conf), query_names=("baremetal.conductors",))
    return [check]


def _conductors(conf: cfg.ConfigOpts) -> health.Query:
    """At least one conductor has sent a heartbeat within [conductor] heartbeat_timeout.

    None is "degraded", not "down": the API host still answers every
    request (those that need a conductor say so themselves), so a load
    balancer must not take every API host out because the conductors,
    elsewhere, are gone.
    """
    from corral.baremetal.db import conductors

    def query(conn: Connection) -> list[health.Part]:
        alive = len(conductors.alive(conn, conf.conductor.heartbeat_timeout))
        if not alive:
            return [health.Part("baremetal.conductors", health.DEGRADED,
                                "no conductor has sent a heartbeat recently")]
        return [health.Part("baremetal.conductors", health.OK, f"{alive} alive")]

    return query
