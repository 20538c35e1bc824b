"""POST /reshaper (1.30): move inventories and allocations in one transaction.

A reshape typically moves inventory from a root provider to new children
and the allocations with it.  The consumers' old allocations are removed
first so that the inventories they sat on may shrink or disappear; then
the new inventories are set (generations checked) and the new
allocations written with the usual consumer-generation and capacity
checks.  Any failure leaves everything as it was.
"""

from __future__ import annotations

import falcon
from sqlalchemy.engine import Connection

from corral.core.http import Endpoint, Route, send_empty
from corral.placement.api import errors as codes
from corral.placement.api import util
from corral.placement.api.handlers.allocations import consumer_request, id_cache
from corral.placement.api.handlers.inventories import _replace as replace_inventories
from corral.placement.api.handlers.inventories import from_records
from corral.placement.api.state import PlacementState
from corral.placement.db import allocations as allocation_db
from corral.placement.db import providers
from corral.placement.db.tables import allocations

INTRODUCED = (1, 30)


def reshape(state: PlacementState, req: falcon.Request, resp: falcon.Response) -> None:
    util.authorize(state, req, "placement:reshaper:reshape")
    body = util.json_body(state, req, state.schema("reshaper.post"))
    requests = [
        consumer_request(state, req, consumer_uuid, section) for consumer_uuid, section in body["allocations"].items()
    ]
    new_inventories = {
        uuid: (section["resource_provider_generation"], from_records(section["inventories"]))
        for uuid, section in body["inventories"].items()
    }
    now = util.utcnow()

    def work(conn: Connection) -> None:
        consumer_uuids = sorted(request.consumer_uuid for request in requests)
        if consumer_uuids:
            # DELETE FROM allocations WHERE consumer_id IN (:consumers)
            conn.execute(allocations.delete().where(allocations.c.consumer_id.in_(consumer_uuids)))
        for uuid in sorted(new_inventories):
            generation, inventory = new_inventories[uuid]
            provider = providers.get_or_404(conn, uuid, codes.RESOURCE_PROVIDER_NOT_FOUND)
            replace_inventories(state, conn, req, provider, inventory, generation)
        allocation_db.replace(conn, requests, state.standard_classes, now, id_cache(state))

    state.db.write(work)
    send_empty(resp)


ROUTES = [Route("/reshaper", {"POST": Endpoint(reshape, min_version=INTRODUCED)})]
