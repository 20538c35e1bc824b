"""Queries the agent's lookup needs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from corral.baremetal.db.nodes import decode
from corral.baremetal.db.tables import nodes, ports


def nodes_with_port_addresses(conn: Connection, addresses: Sequence[str]) -> list[dict[str, Any]]:
    """Every node that has a port with one of ``addresses`` (lower-case MACs)."""
    # SELECT * FROM nodes WHERE id IN (SELECT node_id FROM ports WHERE address IN (:addresses))
    node_ids = sa.select(ports.c.node_id).where(ports.c.address.in_(list(addresses)))
    rows = conn.execute(sa.select(nodes).where(nodes.c.id.in_(node_ids))).all()
    return [decode(row) for row in rows]


def nodes_in_states(conn: Connection, provision_states: Sequence[str]) -> list[dict[str, Any]]:
    """Every node in one of ``provision_states`` (the few being inspected, matched by BMC address)."""
    # SELECT * FROM nodes WHERE provision_state IN (:states)
    rows = conn.execute(sa.select(nodes).where(nodes.c.provision_state.in_(list(provision_states)))).all()
    return [decode(row) for row in rows]
