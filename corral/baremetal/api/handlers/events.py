"""External events (1.54): POST /v1/events, validated and stored.

Networking services report port binding changes here.  Each event is
checked against upstream's schema (event type, port UUID, MAC address,
status ...) and kept in the ``events`` table for operators to read.
"""

from __future__ import annotations

from typing import Any

import falcon

from corral.baremetal.api import common, schemas
from corral.baremetal.api.state import BaremetalState
from corral.baremetal.db.nodes import utcnow
from corral.baremetal.db.tables import events
from corral.core.http import Endpoint, Route, send_empty

VERSION = (1, 54)
EVENT_TYPES = ("network.bind_port", "network.unbind_port", "network.delete_port")

SCHEMA = {
    "type": "object",
    "properties": {
        "events": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "properties": {
                    "event": {"type": "string", "enum": list(EVENT_TYPES)},
                    "port_id": {"type": "string", "format": "uuid"},
                    "mac_address": {"type": "string", "format": "mac-address"},
                    "status": {"type": "string"},
                    "device_id": {"type": ["string", "null"], "format": "uuid"},
                    "binding:host_id": {"type": ["string", "null"], "format": "uuid"},
                    "binding:vnic_type": {"type": ["string", "null"]},
                },
                "required": ["event", "port_id", "mac_address", "status"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["events"],
    "additionalProperties": False,
}


def _row(event: dict[str, Any]) -> dict[str, Any]:
    return {
        "event": event["event"],
        "port_id": event["port_id"],
        "mac_address": event["mac_address"].lower(),
        "status": event["status"][:255],
        "device_id": event.get("device_id"),
        "host_id": event.get("binding:host_id"),
        "vnic_type": (event.get("binding:vnic_type") or None),
        "created_at": utcnow(),
    }


def post(state: BaremetalState, req: falcon.Request, resp: falcon.Response) -> None:
    common.authorize(state, req, "baremetal:events:post")
    body = common.json_body(state, req)
    schemas.validate(SCHEMA, body, None)
    rows = [_row(event) for event in body["events"]]
    # INSERT INTO events (event, port_id, mac_address, status, device_id, host_id, vnic_type, created_at) VALUES ...
    state.db.write(lambda conn: conn.execute(events.insert(), rows))
    send_empty(resp, 204)


ROUTES = [Route("/v1/events", {"POST": Endpoint(post, min_version=VERSION)})]
