"""/allocations/{consumer}, POST /allocations and /resource_providers/{uuid}/allocations."""

from __future__ import annotations

import uuid as uuidlib
from typing import Any

import falcon
from sqlalchemy.engine import Connection

from corral.core import errors
from corral.core.http import Endpoint, Route, send_empty
from corral.placement.api import util
from corral.placement.api.state import PlacementState
from corral.placement.db import allocations as allocation_db
from corral.placement.db import consumers, providers
from corral.placement.domain import allocations as rules
from corral.placement.domain.allocations import ConsumerAllocations

POST_INTRODUCED = (1, 13)


def _version(req: falcon.Request) -> tuple[int, int]:
    return (req.context.version.major, req.context.version.minor)


def _canonical_consumer_uuid(value: str) -> str:
    """The dashed lower-case form of a consumer uuid given in a path; 400 when it is none."""
    try:
        return str(uuidlib.UUID(value))
    except ValueError:
        raise errors.BadRequest(f"Malformed consumer_uuid: {value}") from None


def _is_uuid(value: str) -> bool:
    try:
        uuidlib.UUID(value)
    except ValueError:
        return False
    return True


def consumer_request(state: PlacementState, req: falcon.Request, consumer_uuid: str, body: dict) -> ConsumerAllocations:
    conf = state.conf.placement
    return rules.consumer_from_body(
        consumer_uuid,
        body,
        _version(req),
        default_project=conf.incomplete_consumer_project_id,
        default_user=conf.incomplete_consumer_user_id,
    )


def id_cache(state: PlacementState) -> consumers.IdCache:
    """Project, user and consumer type ids shared by every request of this process."""
    return state.cache.setdefault("consumer_ids", consumers.IdCache())


def _write(state: PlacementState, requests: list[ConsumerAllocations], unknown_class_prefix: str) -> None:
    now = util.utcnow()
    try:
        state.db.write(allocation_db.replace, requests, state.standard_classes, now, id_cache(state))
    except rules.UnknownResourceClass as problem:
        raise errors.BadRequest(f"{unknown_class_prefix}{problem.message}") from None


def show_allocations(state: PlacementState, req: falcon.Request, resp: falcon.Response, consumer_uuid: str) -> None:
    util.authorize(state, req, "placement:allocations:list")
    # Like upstream, any consumer id is looked up as given: one that is not
    # a uuid simply has no allocations.
    found: dict[str, Any] = {}
    consumer = None
    if _is_uuid(consumer_uuid):
        with state.db.read() as conn:
            found = allocation_db.for_consumer(conn, consumer_uuid)
            consumer = consumers.get(conn, consumer_uuid) if found else None
    body: dict[str, Any] = {"allocations": found}
    if found and req.context.at_least(*rules.DICT_ALLOCATIONS):
        conf = state.conf.placement
        body["project_id"] = consumer.project_id if consumer else conf.incomplete_consumer_project_id
        body["user_id"] = consumer.user_id if consumer else conf.incomplete_consumer_user_id
        if req.context.at_least(*rules.CONSUMER_GENERATION):
            body["consumer_generation"] = consumer.generation if consumer else None
        if req.context.at_least(*rules.CONSUMER_TYPES):
            body["consumer_type"] = (consumer.consumer_type if consumer else None) or "unknown"
    util.send_cacheable(req, resp, body, None)


def put_allocations(state: PlacementState, req: falcon.Request, resp: falcon.Response, consumer_uuid: str) -> None:
    util.authorize(state, req, "placement:allocations:update")
    consumer_uuid = _canonical_consumer_uuid(consumer_uuid)
    body = util.json_body(state, req, state.schema("allocations.put"))
    _write(state, [consumer_request(state, req, consumer_uuid, body)],
           f"Unable to allocate inventory for consumer {consumer_uuid}: ")
    send_empty(resp)


def post_allocations(state: PlacementState, req: falcon.Request, resp: falcon.Response) -> None:
    util.authorize(state, req, "placement:allocations:manage")
    body = util.json_body(state, req, state.schema("allocations.post"))
    requests = []
    for consumer_uuid, section in body.items():
        consumer_uuid = _canonical_consumer_uuid(consumer_uuid)
        requests.append(consumer_request(state, req, consumer_uuid, section))
    _write(state, requests, "Unable to allocate inventory ")
    send_empty(resp)


def delete_allocations(state: PlacementState, req: falcon.Request, resp: falcon.Response, consumer_uuid: str) -> None:
    util.authorize(state, req, "placement:allocations:delete")
    if not _is_uuid(consumer_uuid) or not state.db.write(allocation_db.delete_for_consumer, consumer_uuid):
        raise errors.NotFound(f"No allocations for consumer '{consumer_uuid}'")
    send_empty(resp)


def provider_allocations(state: PlacementState, req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
    util.authorize(state, req, "placement:resource_providers:allocations:list")

    def read(conn: Connection) -> tuple[Any, dict[str, dict[str, int]], dict[str, consumers.Consumer]]:
        provider = providers.get_or_404(conn, uuid, context="Resource provider '{uuid}' not found")
        found = allocation_db.for_provider(conn, provider.id)
        records = consumers.get_many(conn, list(found)) if req.context.at_least(*rules.CONSUMER_GENERATION) else {}
        return provider, found, records

    with state.db.read() as conn:
        provider, found, records = read(conn)
    body_allocations: dict[str, Any] = {}
    for consumer_uuid, resources in found.items():
        entry: dict[str, Any] = {"resources": resources}
        if req.context.at_least(*rules.CONSUMER_GENERATION):
            record = records.get(consumer_uuid)
            entry["consumer_generation"] = record.generation if record else None
        body_allocations[consumer_uuid] = entry
    body = {"allocations": body_allocations, "resource_provider_generation": provider.generation}
    util.send_cacheable(req, resp, body, provider.modified)


ROUTES = [
    Route("/allocations", {"POST": Endpoint(post_allocations, min_version=POST_INTRODUCED)}),
    Route(
        "/allocations/{consumer_uuid}",
        {"GET": show_allocations, "PUT": put_allocations, "DELETE": delete_allocations},
    ),
    Route("/resource_providers/{uuid}/allocations", {"GET": provider_allocations}),
]
