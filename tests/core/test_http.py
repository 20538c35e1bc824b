"""The shared HTTP plumbing, exercised through a small service over real HTTP."""

from __future__ import annotations

from collections.abc import Iterator

import falcon
import orjson
import pytest

from corral.core import auth, errors
from corral.core.http import Endpoint, HttpService, Route, build_app, parse_json, read_body, send_json
from corral.core.microversion import VersionSpec
from corral.core.schema import VersionedSchema
from corral.core.server import ThreadedServer
from tests.support.http import ApiClient

SPEC = VersionSpec(
    service_type="toy",
    versions=("1.0", "1.1", "1.2"),
    legacy_headers=("X-Toy-API-Version",),
    response_headers=lambda version, spec: [("toy-version", str(version or spec.min))],
)

ITEM_SCHEMA = VersionedSchema(
    [
        (None, (1, 1), {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}),
        ((1, 2), None, {"type": "object", "properties": {"name": {"type": "string"}, "size": {"type": "integer"}},
                        "required": ["name", "size"], "additionalProperties": False}),
    ]
)


def _format_error(req: falcon.Request, error: errors.ApiError) -> tuple[bytes, str]:
    body = {"status": error.status, "message": error.message, "code": error.code, "request_id": req.context.request_id}
    return orjson.dumps(body), "application/json"


def _home(state: dict, req: falcon.Request, resp: falcon.Response) -> None:
    send_json(resp, {"service": "toy"})


def _whoami(state: dict, req: falcon.Request, resp: falcon.Response) -> None:
    ctx = req.context
    send_json(resp, {"user": ctx.user_id, "project": ctx.project_id, "admin": ctx.is_admin, "version": str(ctx.version)})


def _create(state: dict, req: falcon.Request, resp: falcon.Response) -> None:
    body = parse_json(read_body(req, 1024))
    ITEM_SCHEMA.validate(body, req.context.version)
    state.setdefault("items", []).append(body)
    send_json(resp, body, status=201)


def _old_feature(state: dict, req: falcon.Request, resp: falcon.Response) -> None:
    send_json(resp, {"band": "old"})


def _new_feature(state: dict, req: falcon.Request, resp: falcon.Response) -> None:
    send_json(resp, {"band": "new"})


def _boom(state: dict, req: falcon.Request, resp: falcon.Response) -> None:
    raise RuntimeError("internal detail")


ROUTES = [
    Route("/", {"GET": _home}, public=True),
    Route("/whoami", {"GET": _whoami}),
    Route("/items", {"POST": _create}),
    Route("/feature", {"GET": [Endpoint(_old_feature, max_version=(1, 0)), Endpoint(_new_feature, min_version=(1, 1))]}),
    Route("/since", {"GET": Endpoint(_new_feature, min_version=(1, 2))}),
    Route("/boom", {"GET": _boom}),
]


@pytest.fixture(scope="module")
def toy() -> Iterator[tuple[ApiClient, dict]]:
    state: dict = {}
    service = HttpService(
        name="toy", versions=SPEC, format_error=_format_error,
        authenticate=auth.authenticate_noauth2, max_body_size=2048,
    )
    server = ThreadedServer(build_app(service, ROUTES, state)).start()
    yield ApiClient(server.url, {"X-Auth-Token": "alice:p1"}), state
    server.stop()


def test_public_route_and_version_headers(toy) -> None:
    client, _ = toy
    response = client.with_headers(X_Auth_Token=None).get("/")
    assert response.status_code == 200
    assert response.headers["toy-version"] == "1.0"
    assert response.headers["x-openstack-request-id"].startswith("req-")


def test_negotiation_standard_legacy_and_latest(toy) -> None:
    client, _ = toy
    assert client.get("/whoami", headers={"OpenStack-API-Version": "toy 1.1"}).json()["version"] == "1.1"
    assert client.get("/whoami", headers={"X-Toy-API-Version": "1.2"}).json()["version"] == "1.2"
    assert client.get("/whoami", headers={"OpenStack-API-Version": "toy latest"}).json()["version"] == "1.2"
    # another service's entry in the standard header is ignored
    assert client.get("/whoami", headers={"OpenStack-API-Version": "other 1.2"}).json()["version"] == "1.0"


@pytest.mark.parametrize("value", ["toy 1.3", "toy 2.0", "toy 0.9", "toy 1.x", "toy banana"])
def test_unacceptable_versions_are_406_with_headers(toy, value: str) -> None:
    client, _ = toy
    response = client.get("/whoami", headers={"OpenStack-API-Version": value})
    assert response.status_code == 406
    assert response.json()["status"] == 406
    assert response.headers["toy-version"] == "1.0"


def test_noauth2_identity_and_missing_token(toy) -> None:
    client, _ = toy
    assert client.get("/whoami").json() == {"user": "alice", "project": "p1", "admin": False, "version": "1.0"}
    assert client.with_headers(X_Auth_Token="admin").get("/whoami").json()["admin"] is True
    response = client.with_headers(X_Auth_Token=None).get("/whoami")
    assert response.status_code == 401
    assert response.json()["status"] == 401


def test_version_bounded_endpoints(toy) -> None:
    client, _ = toy
    assert client.get("/feature").json() == {"band": "old"}
    assert client.get("/feature", headers={"OpenStack-API-Version": "toy 1.1"}).json() == {"band": "new"}
    response = client.get("/since", headers={"OpenStack-API-Version": "toy 1.1"})
    assert response.status_code == 404
    assert client.get("/since", headers={"OpenStack-API-Version": "toy 1.2"}).status_code == 200


def test_routing_errors_use_the_service_body(toy) -> None:
    client, _ = toy
    missing = client.get("/nowhere")
    assert missing.status_code == 404 and missing.json()["status"] == 404
    wrong_method = client.delete("/items")
    assert wrong_method.status_code == 405 and "POST" in wrong_method.headers["allow"]
    assert wrong_method.json()["status"] == 405


def test_body_validation_per_version_and_nothing_stored(toy) -> None:
    client, state = toy
    before = len(state.get("items", []))
    assert client.post("/items", json={"name": "a"}).status_code == 201
    bad = client.post("/items", json={"name": "b"}, headers={"OpenStack-API-Version": "toy 1.2"})
    assert bad.status_code == 400 and "size" in bad.json()["message"]
    malformed = client.post("/items", data=b"{not json", headers={"Content-Type": "application/json"})
    assert malformed.status_code == 400 and "Malformed JSON" in malformed.json()["message"]
    assert len(state["items"]) == before + 1


def test_oversized_bodies_are_413(toy) -> None:
    client, state = toy
    before = len(state.get("items", []))
    response = client.post("/items", json={"name": "x" * 4096})
    assert response.status_code == 413
    assert len(state.get("items", [])) == before


def test_unexpected_exceptions_are_500_in_the_service_body(toy) -> None:
    client, _ = toy
    response = client.get("/boom")
    assert response.status_code == 500
    assert response.json()["message"] and "internal detail" not in response.json()["message"]
