"""Replay upstream Ironic 39's recorded wire transcript against Corral.

Every exchange of ``reference/ironic/wire-transcript.md`` is sent in order;
the answer must have the recorded status, microversion headers, Location and
a JSON body with the same keys at every level, the same value types and the
same values, placeholders standing for what Corral answered earlier.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from typing import Any

import requests

from tests.baremetal.conftest import BaremetalServer
from tests.baremetal.wire_transcript import (
    TRANSCRIPT,
    Exchange,
    Placeholders,
    differences,
    parse,
)

_VERSION_HEADERS = ("x-openstack-ironic-api-version", "x-openstack-ironic-api-minimum-version",
                    "x-openstack-ironic-api-maximum-version")
# How long a read may take to show what an asynchronous conductor task left
# (cleaning, allocating): upstream's reads were made after it finished.
_SETTLE_SECONDS = 15.0
# States upstream was seen in while a fake step was still running (its fake
# BIOS step had a delay); Corral's fake steps may be done before the read.
_TRANSIENT = {"cleaning"}


class Replay:
    def __init__(self, server: BaremetalServer) -> None:
        self.server = server
        self.http = requests.Session()
        # Allowed: the conductor's host name is the machine's ("ironic-anchor"
        # where upstream was recorded); it appears as `conductor`, `reservation`
        # and in lock messages.
        self.names = Placeholders(server.url, {"ironic-anchor": server.conf.host})
        # Allowed: Corral's fake hardware keeps a list of what it did in
        # driver_internal_info (tests read it); upstream's fake keeps nothing.
        self.names.extra_keys.add(("driver_internal_info", "fake_actions"))
        self.found: list[str] = []
        self.divergent = 0
        # Whether an action was accepted (202) since the nodes were last seen at rest.
        self.busy = False

    # ----------------------------------------------------------- requests
    def send(self, method: str, path: str, body: str | None = None, version: str | None = "1.115",
             expect: int | None = None) -> requests.Response:
        headers = {"X-Auth-Token": "admin"}  # the fixture's noauth2 wants a token, upstream's noauth none
        if version is not None:
            headers["X-OpenStack-Ironic-API-Version"] = version
        data = None
        if body is not None:
            headers["Content-Type"] = "application/json"
            data = self.names.fill(body, uuid.uuid4).encode()
        resp = self.http.request(method, self.server.url + self.names.fill(path, uuid.uuid4),
                                 headers=headers, data=data, timeout=60)
        assert expect is None or resp.status_code == expect, (method, path, resp.status_code, resp.text)
        self.busy = self.busy or resp.status_code == 202
        return resp

    def replay(self, exchange: Exchange) -> None:
        divergence = DIVERGENCES.get(exchange.request)
        if divergence is not None:
            self.check_divergence(exchange, *divergence)
            return
        if exchange.method != "GET":
            self.quiesce()
        deadline = time.monotonic() + _SETTLE_SECONDS
        while True:
            resp = self.send(exchange.method, exchange.path, exchange.request_body,
                             exchange.request_headers.get("X-OpenStack-Ironic-API-Version"))
            bound = dict(self.names.uuids)
            known = [where for request, where in KNOWN if request == exchange.request]
            found = [one for one in self.compare(exchange, resp, bound)
                     if not any(one.startswith(where) for where in known)]
            if found and exchange.method == "GET" and time.monotonic() < deadline:
                time.sleep(0.1)
                continue
            break
        self.names.uuids = bound
        self.found += [f"line {exchange.line} {exchange.request}: {one}" for one in found]

    def quiesce(self) -> None:
        """Wait for the conductor's work in progress on every node to finish.

        Upstream's conductor waits for a locked node ([conductor]
        node_locked_retry_attempts, 3 x 1 s); the fixture's retries none and
        would answer 409 to a write recorded right after an asynchronous
        action (a deploy, then a backfill on the node).
        """
        if not self.busy:
            return
        deadline = time.monotonic() + _SETTLE_SECONDS
        while any(node["reservation"] or node["provision_state"].endswith("ing")
                  for node in self.send("GET", "/v1/nodes?fields=reservation,provision_state",
                                        expect=200).json()["nodes"]):
            assert time.monotonic() < deadline, "nodes still busy"
            time.sleep(0.05)
        self.busy = False

    def check_divergence(self, exchange: Exchange, status: int, message: str) -> None:
        """Corral's own documented answer where upstream's is a bug."""
        if exchange.method != "GET":
            self.quiesce()
        resp = self.send(exchange.method, exchange.path, exchange.request_body,
                         exchange.request_headers.get("X-OpenStack-Ironic-API-Version"))
        text = resp.text if status < 400 else json.loads(resp.json()["error_message"])["faultstring"]
        if resp.status_code != status or message not in text:
            self.found.append(f"line {exchange.line} {exchange.request}: expected Corral's {status} "
                              f"{message!r}, got {resp.status_code} {text[:300]!r}")
        self.divergent += 1

    # --------------------------------------------------------- comparison
    def compare(self, exchange: Exchange, resp: requests.Response, bound: dict[str, str]) -> list[str]:
        found = []
        if resp.status_code != exchange.status:
            found.append(f"status: expected {exchange.status}, got {resp.status_code} {resp.text[:300]}")
        for name in (*_VERSION_HEADERS, "location"):
            expected, actual = exchange.response_headers.get(name), resp.headers.get(name)
            if expected is None and actual is not None:
                found.append(f"header {name}: not expected, got {actual!r}")
            elif expected is not None and (actual is None or not self.names.match(expected, actual, bound)):
                found.append(f"header {name}: expected {expected!r}, got {actual!r}")
        if exchange.response_body is None:
            if resp.content:
                found.append(f"body: expected none, got {resp.text[:300]!r}")
            return found
        try:
            actual = resp.json()
        except ValueError:
            return [*found, f"body: not JSON: {resp.text[:300]!r}"]
        candidates = [exchange.response_body, *_settled(exchange.response_body)]
        for expected in candidates:
            attempt = dict(bound)
            body_found = differences(expected, actual, self.names, attempt)
            if not body_found:
                bound.update(attempt)
                return found
        return found + differences(exchange.response_body, actual, self.names, dict(bound))


def _settled(body: Any) -> list[Any]:
    """The same state read once the transition in progress has finished."""
    if not isinstance(body, dict) or body.get("provision_state") not in _TRANSIENT:
        return []
    return [{**body, "provision_state": body["target_provision_state"], "target_provision_state": None}]


# ------------------------------------------------------ divergences
# Where upstream answers 500 (its own bugs, listed in WIRE.md) Corral answers
# as docs/baremetal*.md say: request -> (Corral's status, text it contains).
DIVERGENCES: dict[str, tuple[int, str]] = {
    # Bad input is a 4xx and changes nothing.
    "POST /v1/nodes {not json": (400, "Malformed JSON in request body"),
    "GET /v1/nodes?fields=uuid,bogus": (400, 'Field(s) "bogus" are not valid'),
    'PUT /v1/nodes/wp-n1/states/provision {"target": "clean", "clean_steps": [{"interface": "bios"}]}':
        (400, "Invalid clean_steps: 'step' is a required property"),
    # Upstream cannot list nodes with these fields; Corral lists them.
    "GET /v1/nodes?resource_class=wp-rc&fields=uuid,name,provision_state,allocation_uuid,resource_class":
        (200, '"allocation_uuid":null'),
    "GET /v1/nodes?resource_class=wp-rc&fields=name,instance_uuid,allocation_uuid": (200, '"allocation_uuid":"'),
    # The design's clean steps listing, which upstream never shipped.
    "GET /v1/nodes/wp-n1/cleaning/steps": (200, '"step":"factory_reset"'),
    # No route: upstream's router fails with 500.
    "GET /v1/nodes/wp-n1/states/provision": (405, "The method specified is not allowed for this resource."),
    # Corral refuses a backfill it cannot do with 400 and stores nothing
    # (upstream: 500 and an allocation in error): none to read afterwards.
    'POST /v1/allocations {"node": "wp-n1", "name": "wp-bf"}':
        (400, 'Node must be in the "active" state, but the current state is "available".'),
    'POST /v1/allocations {"node": "wp-n5", "name": "wp-bf2", "resource_class": "wp-rc"}':
        (400, "Resource class wp-rc-other does not match the requested resource class wp-rc."),
    "GET /v1/allocations/wp-bf2": (404, "Allocation wp-bf2 could not be found."),
    "GET /v1/allocations/wp-bf": (404, "Allocation wp-bf could not be found."),
}

# Differences not fixed yet: (request, start of the difference's text).
KNOWN: list[tuple[str, str]] = [
]

# ------------------------------------------------- unrecorded setup steps
# The transcript's notes describe state made between recorded exchanges;
# these steps make the same state through the API, unrecorded.

def _node(replay: Replay, name: str, resource_class: str, traits: list[str], power_off: bool) -> str:
    body = {"driver": "fake-hardware", "name": name, "resource_class": resource_class}
    node = replay.send("POST", "/v1/nodes", json.dumps(body), expect=201).json()["uuid"]
    if traits:
        replay.send("PUT", f"/v1/nodes/{name}/traits", json.dumps({"traits": traits}), expect=204)
    _provide(replay, name)
    if power_off:
        replay.send("PUT", f"/v1/nodes/{name}/states/power", '{"target": "power off"}', expect=202)
        _wait(replay, name, lambda node: node["power_state"] == "power off")
    return node


def _provide(replay: Replay, name: str) -> None:
    replay.send("PUT", f"/v1/nodes/{name}/states/provision", '{"target": "manage"}', expect=202)
    _wait(replay, name, lambda node: node["provision_state"] == "manageable")
    replay.send("PUT", f"/v1/nodes/{name}/states/provision", '{"target": "provide"}', expect=202)
    _wait(replay, name, lambda node: node["provision_state"] == "available")


def _wait(replay: Replay, name: str, done: Callable[[dict[str, Any]], bool]) -> None:
    deadline = time.monotonic() + _SETTLE_SECONDS
    while not done(node := replay.send("GET", f"/v1/nodes/{name}", expect=200).json()):
        assert time.monotonic() < deadline, node
        time.sleep(0.05)


def _second_node(replay: Replay) -> None:
    # Listed from here on: created after the name-sorted page that shows wp-n1 first.
    replay.names.uuids["<uuid-6>"] = replay.send(
        "POST", "/v1/nodes", '{"driver": "fake-hardware", "name": "wp-n2", "resource_class": "wp-rc"}',
        expect=201).json()["uuid"]


def _allocation_pool(replay: Replay) -> None:
    # The note before the allocations: n2 available with no power state,
    # n3 (GPU, FAST), n4 and n5 (another resource class) available, powered off.
    _provide(replay, "wp-n2")
    replay.names.uuids["<uuid-11>"] = _node(replay, "wp-n3", "wp-rc", ["CUSTOM_GPU", "CUSTOM_FAST"], True)
    replay.names.uuids["<uuid-12>"] = _node(replay, "wp-n4", "wp-rc", [], True)
    replay.names.uuids["<uuid-8>"] = _node(replay, "wp-n5", "wp-rc-other", [], True)


def _hold_n4(replay: Replay) -> None:
    # Upstream picks among matching candidates at random; wp-a3 could have
    # had wp-n1 or wp-n4 and got wp-n1. Holding wp-n4 in maintenance while
    # wp-a3 is processed makes the same choice here.
    replay.send("PATCH", "/v1/nodes/wp-n4", '[{"op": "replace", "path": "/maintenance", "value": true}]',
                expect=200)


def _release_n4(replay: Replay) -> None:
    replay.send("PATCH", "/v1/nodes/wp-n4", '[{"op": "replace", "path": "/maintenance", "value": false}]',
                expect=200)


def _failed_allocation(replay: Replay) -> None:
    # wp-d1 is read in state error without its creation on record: one
    # asking for the deployed wp-n4 only cannot be fulfilled.
    replay.send("POST", "/v1/allocations",
                '{"resource_class": "wp-rc", "name": "wp-d1", "candidate_nodes": ["<uuid-12>"]}', expect=201)


def _undeploy_n5(replay: Replay) -> None:
    # wp-n5 is deleted (204) at the end and its backfilled allocation is gone
    # after wp-n4's undeploy: it was undeployed too, unrecorded.
    replay.send("PUT", "/v1/nodes/wp-n5/states/provision", '{"target": "deleted"}', expect=202)
    _wait(replay, "wp-n5", lambda node: node["provision_state"] == "available")


# Run before the first exchange with this request (method, path and body).
SETUP: dict[str, Callable[[Replay], None]] = {
    "GET /v1/nodes?associated=false&resource_class=wp-rc&fields=name": _second_node,
    "GET /v1/allocations X-OpenStack-Ironic-API-Version: 1.51": _allocation_pool,
    'POST /v1/allocations {"resource_class": "wp-rc", "name": "wp-a3", '
    '"candidate_nodes": ["wp-n1", "wp-n2", "<uuid-12>"]}': _hold_n4,
    'POST /v1/allocations {"resource_class": "wp-rc", "name": "wp-a4"}': _release_n4,
    "GET /v1/allocations/wp-d1?fields=state,node_uuid": _failed_allocation,
    "GET /v1/allocations/wp-bf2": _undeploy_n5,
}


def _setup_key(exchange: Exchange) -> str:
    if exchange.request == "GET /v1/allocations":
        return f"GET /v1/allocations X-OpenStack-Ironic-API-Version: {exchange.request_headers.get('X-OpenStack-Ironic-API-Version')}"
    return exchange.request


def test_bare_metal_answers_every_recorded_exchange_as_upstream_ironic(baremetal: BaremetalServer) -> None:
    exchanges = parse(TRANSCRIPT.read_text())
    replay = Replay(baremetal)
    pending = dict(SETUP)
    for exchange in exchanges:
        step = pending.pop(_setup_key(exchange), None)
        if step is not None:
            step(replay)
        replay.replay(exchange)
    assert not pending, f"setup steps whose exchange is gone from the transcript: {sorted(pending)}"
    assert (len(exchanges), replay.divergent) == (189, len(DIVERGENCES))
    assert not replay.found, "\n".join(replay.found)
