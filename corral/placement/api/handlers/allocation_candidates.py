"""GET /allocation_candidates (1.10 and later).

The query is parsed by :mod:`corral.placement.api.query`, the search runs
in one read transaction (:func:`corral.placement.db.candidates.find_candidates`)
and the answer is rendered here in the shape of the request's microversion:

* allocation requests: a list of ``{"resource_provider", "resources"}``
  before 1.12, a dict keyed by provider UUID from 1.12, with ``mappings``
  (request-group suffix -> provider UUIDs) from 1.34;
* provider summaries: ``resources`` (capacity, used) of the requested
  classes only before 1.27 and of every class from 1.27, ``traits`` from
  1.17, ``parent_provider_uuid`` / ``root_provider_uuid`` from 1.29.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator
from typing import Any

import falcon

from corral.core import errors, memory
from corral.core.http import Endpoint, Route
from corral.placement.api import query, util
from corral.placement.api.state import PlacementState
from corral.placement.db.candidates import Answer, UnknownNames, find_candidates
from corral.placement.domain.candidates import CandidateRequest

INTRODUCED = (1, 10)
DICT_ALLOCATIONS = (1, 12)
SUMMARY_TRAITS = (1, 17)
ALL_RESOURCES = (1, 27)
NESTED_SUMMARIES = (1, 29)
MAPPINGS = (1, 34)


_gc_lock = threading.Lock()
_gc_pausers = 0
_gc_was_enabled = True


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic garbage collection while a large answer is assembled.

    The search creates hundreds of thousands of small acyclic tuples and
    dicts (freed by reference counting); the cyclic collector would scan
    them again and again as they survive generation after generation, which
    costs more than the search itself.  Collection resumes when the last
    concurrent search ends.
    """
    global _gc_pausers, _gc_was_enabled
    with _gc_lock:
        _gc_pausers += 1
        if _gc_pausers == 1:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
    try:
        yield
    finally:
        with _gc_lock:
            _gc_pausers -= 1
            if _gc_pausers == 0 and _gc_was_enabled:
                gc.enable()


def unknown_names_error(error: UnknownNames) -> errors.BadRequest:
    if error.resource_classes:
        return errors.BadRequest(
            f"Invalid resource class in resources parameter: No such resource class {error.resource_classes[0]}."
        )
    return errors.BadRequest(f"No such trait(s): {', '.join(error.traits)}.")


def list_candidates(state: PlacementState, req: falcon.Request, resp: falcon.Response) -> None:
    util.authorize(state, req, "placement:allocation_candidates:list")
    version = req.context.version
    request = query.parse_candidate_request(query.query_pairs(req.query_string), version)
    with gc_paused():
        # The answer is built and freed in a call of its own, before the
        # collector resumes: the collector's first pass would otherwise
        # walk every object of the answer once more.
        _answer(state, req, resp, request, version)


def _answer(
    state: PlacementState, req: falcon.Request, resp: falcon.Response, request: CandidateRequest, version: tuple[int, int]
) -> None:
    try:
        with state.db.read() as conn:
            answer = find_candidates(
                conn,
                request,
                standard_classes=state.standard_classes,
                standard_traits=state.standard_traits,
                randomize=state.conf.placement.randomize_allocation_candidates,
                all_classes_in_summaries=version >= ALL_RESOURCES,
                with_traits=version >= SUMMARY_TRAITS,
                topology_cache=state.topology,
            )
    except UnknownNames as error:
        raise unknown_names_error(error) from None
    util.send_cacheable(req, resp, render(answer, version), None)


def render(answer: Answer, version: tuple[int, int]) -> dict[str, Any]:
    return {
        "allocation_requests": _render_requests(answer, version),
        "provider_summaries": _render_summaries(answer, version),
    }


def _render_requests(answer: Answer, version: tuple[int, int]) -> list[dict[str, Any]]:
    if version < DICT_ALLOCATIONS:
        return _listed_requests(answer)
    uuid_of = answer.uuids
    names = answer.class_names
    with_mappings = version >= MAPPINGS
    # Candidates share their per-provider resource tuples (the same objects,
    # hence keyed by identity); so do the rendered dicts, serialised as many
    # times as they appear.
    wrapped: dict[int, dict[str, Any]] = {}
    rendered = []
    append = rendered.append
    # No comprehension per candidate (each one is a call): at this scale each one counts.
    for _anchor, allocations, mappings, _used in answer.candidates:
        if with_mappings and len(allocations) == 1 and len(mappings) == 1:
            # The most common shape: one provider serving one group.
            ((rp, resources),) = allocations
            ((suffix, members),) = mappings
            if len(members) == 1:
                (member,) = members
                wrapper = wrapped.get(id(resources)) or _wrap(resources, names, wrapped)
                append({"allocations": {uuid_of[rp]: wrapper}, "mappings": {suffix: [uuid_of[member]]}})
                continue
        by_provider: dict[str, Any] = {}
        for rp, resources in allocations:
            by_provider[uuid_of[rp]] = wrapped.get(id(resources)) or _wrap(resources, names, wrapped)
        if not with_mappings:
            append({"allocations": by_provider})
            continue
        mapped: dict[str, list[str]] = {}
        for suffix, members in mappings:
            if len(members) == 1:
                (member,) = members
                mapped[suffix] = [uuid_of[member]]
            else:
                mapped[suffix] = sorted([uuid_of[rp] for rp in members])
        append({"allocations": by_provider, "mappings": mapped})
    return rendered


def _wrap(resources: Any, names: dict[int, str], wrapped: dict[int, dict[str, Any]]) -> dict[str, Any]:
    wrapper = wrapped[id(resources)] = {"resources": {names[rc]: amount for rc, amount in resources}}
    return wrapper


def _listed_requests(answer: Answer) -> list[dict[str, Any]]:
    """Before 1.12: each request's allocations as a list."""
    uuid_of = answer.uuids
    names = answer.class_names
    rendered: dict[int, dict[str, int]] = {}

    def resources_of(resources: Any) -> dict[str, int]:
        found = rendered.get(id(resources))
        if found is None:
            found = rendered[id(resources)] = {names[rc]: amount for rc, amount in resources}
        return found

    return [
        {
            "allocations": [
                {"resource_provider": {"uuid": uuid_of[rp]}, "resources": resources_of(resources)}
                for rp, resources in allocations
            ]
        }
        for _anchor, allocations, _mappings, _used in answer.candidates
    ]


def _render_summaries(answer: Answer, version: tuple[int, int]) -> dict[str, Any]:
    uuid_of = answer.uuids
    with_traits = version >= SUMMARY_TRAITS
    nested = version >= NESTED_SUMMARIES
    inventories = answer.inventories
    no_rows: tuple[tuple[int, int, int], ...] = ()
    # Providers built alike report the same capacities and usage: their
    # ``resources`` dicts are one and the same.
    same_rows: dict[tuple[tuple[int, int, int], ...], dict[str, Any]] = {}
    # From 1.27 the summary of a provider with nothing used changes only with
    # the topology: it is kept and reused, with what it was made from (its
    # capacities, traits and provider row: the very objects of the snapshot,
    # which later snapshots share while they do not change).  A summary made
    # from other objects than this answer's is made again.
    kept: dict[int, tuple[Any, Any, Any, dict[str, Any]]] | None = None
    if version >= ALL_RESOURCES:
        kept = answer.derived.setdefault(("provider summaries", nested, with_traits), {})
    unused = answer.unused_rows
    traits_of = answer.traits
    providers = answer.providers
    summaries: dict[str, Any] = {}
    made = 0
    for rp in answer.summarised:
        rows = inventories.get(rp, no_rows)
        if kept is not None and rows is unused.get(rp):
            entry = kept.get(rp)
            traits = traits_of.get(rp)
            row = providers[rp]
            if entry is None or entry[0] is not rows or entry[1] is not traits or entry[2] is not row:
                entry = kept[rp] = (rows, traits, row, _summary(rp, rows, answer, same_rows, nested, with_traits))
                made += 1
            summaries[uuid_of[rp]] = entry[3]
        else:
            summaries[uuid_of[rp]] = _summary(rp, rows, answer, same_rows, nested, with_traits)
    # Kept summaries live as long as the snapshot's topology: out of the
    # cyclic collector's way once there are many new ones.
    memory.settle(made)
    return summaries


def _summary(
    rp: int,
    rows: tuple[tuple[int, int, int], ...],
    answer: Answer,
    same_rows: dict[tuple[tuple[int, int, int], ...], dict[str, Any]],
    nested: bool,
    with_traits: bool,
) -> dict[str, Any]:
    resources = same_rows.get(rows)
    if resources is None:
        names = answer.class_names
        resources = same_rows[rows] = {names[rc]: {"capacity": capacity, "used": used} for rc, capacity, used in rows}
    if not with_traits:
        return {"resources": resources}
    traits = answer.traits.get(rp, _NO_TRAITS)
    if not nested:
        return {"resources": resources, "traits": traits}
    _uuid, parent_id, root_id = answer.providers[rp]
    uuid_of = answer.uuids
    return {
        "resources": resources,
        "traits": traits,
        "parent_provider_uuid": uuid_of[parent_id] if parent_id is not None else None,
        "root_provider_uuid": uuid_of[root_id],
    }


_NO_TRAITS: list[str] = []


ROUTES = [
    Route("/allocation_candidates", {"GET": Endpoint(list_candidates, min_version=INTRODUCED)}),
]
