"""The checks every request passes at the edge, on a small service over real HTTP."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import falcon
import orjson
import pytest

from corral.core import auth, errors
from corral.core.edge import MAX_JSON_DEPTH
from corral.core.http import HttpService, Route, build_app, parse_json, read_body, send_json
from corral.core.microversion import VersionSpec
from corral.core.server import ThreadedServer
from tests.support.http import ApiClient

SPEC = VersionSpec(service_type="toy", versions=("1.0",), legacy_headers=(), response_headers=lambda v, s: [])


def _format_error(req: falcon.Request, error: errors.ApiError) -> tuple[bytes, str]:
    return orjson.dumps({"toyError": {"status": error.status, "message": error.message}}), "application/json"


def _echo(state: list, req: falcon.Request, resp: falcon.Response, name: str = "") -> None:
    body = parse_json(read_body(req, 4096)) if req.method != "GET" else None
    state.append(body)
    send_json(resp, {"name": name, "body": body, "user": req.context.user_id, "project": req.context.project_id})


@pytest.fixture(scope="module")
def toy() -> Iterator[tuple[ApiClient, list]]:
    state: list = []
    service = HttpService(name="toy", versions=SPEC, format_error=_format_error,
                          authenticate=auth.authenticate_noauth2, max_body_size=2048)
    routes = [Route("/things", {"GET": _echo, "POST": _echo}), Route("/things/{name}", {"GET": _echo, "PUT": _echo})]
    server = ThreadedServer(build_app(service, routes, state)).start()
    yield ApiClient(server.url, {"X-Auth-Token": "alice:project-a"}), state
    server.stop()


def _refused(response, where: str) -> None:  # type: ignore[no-untyped-def]
    assert response.status_code == 400, response.text
    error = response.json()["toyError"]
    assert error["status"] == 400 and where in error["message"], error


@pytest.mark.parametrize("path", ["/things/a%00b", "/things/%00"])
def test_nul_in_the_path_is_400(toy, path: str) -> None:
    client, _state = toy
    _refused(client.get(path), "path")


def test_unknown_paths_and_methods_are_404_and_405_whatever_their_values(toy) -> None:
    client, _state = toy
    assert client.get("/things%00").json()["toyError"]["status"] == 404
    assert client.get("/nothing?x=%00").json()["toyError"]["status"] == 404
    assert client.delete("/things/%00").json()["toyError"]["status"] == 405
    assert client.patch("/things/x", json={"a": "\x00"}).json()["toyError"]["status"] == 405


@pytest.mark.parametrize("query", ["name=%00", "a%00=1", "x=1&name=ab%00cd"])
def test_nul_in_the_query_string_is_400(toy, query: str) -> None:
    client, _state = toy
    _refused(client.get(f"/things?{query}"), "query string")


@pytest.mark.parametrize("header", ["X-Auth-Token", "X-OpenStack-Request-Id", "X-Something-Else"])
def test_nul_in_a_header_is_400(toy, header: str) -> None:
    client, state = toy
    state.clear()
    _refused(client.get("/things", headers={header: "alice\x00:project"}), "header")
    assert state == []


@pytest.mark.parametrize("document", [
    {"name": "a\x00b"}, {"a\x00b": 1}, [{"deep": ["x", {"name": "\x00"}]}],
])
def test_nul_in_a_json_body_is_400_and_nothing_reaches_the_handler(toy, document: object) -> None:
    client, state = toy
    state.clear()
    response = client.post("/things", json=document)
    _refused(response, "request body")
    assert state == []


def test_the_body_error_names_where_the_nul_is(toy) -> None:
    client, _state = toy
    response = client.put("/things/x", json={"a": [1, {"b/c": "\x00"}]})
    _refused(response, "at /a/1/b~1c")


def test_an_escaped_backslash_before_u0000_is_plain_text(toy) -> None:
    client, state = toy
    state.clear()
    response = client.post("/things", data=b'{"name": "\\\\u0000"}', headers={"content-type": "application/json"})
    assert response.status_code == 200, response.text
    assert state == [{"name": "\\u0000"}]


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 1000, 1023, 5000])
def test_deeply_nested_json_is_400(toy, depth: int) -> None:
    client, state = toy
    state.clear()
    for body in (b"[" * depth + b"]" * depth, b"[" * depth, b'{"a":' * depth + b"1" + b"}" * depth):
        response = client.post("/things", data=body, headers={"content-type": "application/json"})
        assert response.status_code in (400, 413), response.text
        if response.status_code == 400:
            assert response.json()["toyError"]["status"] == 400
    assert state == []


def test_nesting_up_to_the_limit_is_accepted(toy) -> None:
    client, state = toy
    state.clear()
    depth = MAX_JSON_DEPTH
    response = client.post("/things", data=b"[" * depth + b"]" * depth, headers={"content-type": "application/json"})
    assert response.status_code == 200, response.text
    assert len(state) == 1


def test_bodies_over_the_limit_are_413_even_without_a_json_handler(toy) -> None:
    client, _state = toy
    response = client.post("/things", data=b"[" + b"1," * 2000 + b"1]", headers={"content-type": "application/json"})
    assert response.status_code == 413
    assert response.json()["toyError"]["status"] == 413


def test_chunked_body_through_a_server_that_leaves_the_framing_is_411(toy) -> None:
    """wsgiref hands chunked framing through undecoded: refuse instead of waiting for the end."""
    client, state = toy
    state.clear()
    host, port = client.base_url.removeprefix("http://").split(":")
    request = (
        b"POST /things HTTP/1.1\r\nHost: x\r\nX-Auth-Token: alice\r\nContent-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n7\r\n{\"a\":1}\r\n0\r\n\r\n"
    )
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(request)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.0 411") or answer.startswith(b"HTTP/1.1 411"), answer[:200]
    assert b'"toyError"' in answer
    assert state == []


@pytest.mark.parametrize("number", ["18446744073709551616", "-9223372036854775809", "1" + "0" * 30])
def test_integers_beyond_64_bits_are_400_instead_of_rounded(toy, number: str) -> None:
    client, state = toy
    state.clear()
    response = client.post("/things", data=f'{{"n": {number}}}'.encode(), headers={"content-type": "application/json"})
    _refused(response, "64 bits")
    assert state == []


def test_integers_within_64_bits_and_long_digit_strings_pass(toy) -> None:
    client, state = toy
    state.clear()
    body = b'{"a": 18446744073709551615, "b": -9223372036854775808, "c": "123456789012345678901234", "d": 1e308}'
    response = client.post("/things", data=body, headers={"content-type": "application/json"})
    assert response.status_code == 200, response.text
    assert state == [{"a": 2**64 - 1, "b": -(2**63), "c": "123456789012345678901234", "d": 1e308}]
