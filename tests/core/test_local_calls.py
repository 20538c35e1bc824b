"""Calls to this process's own APIs answered in the calling thread."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import requests

from corral.core import local_calls


def _app(environ: dict[str, Any], start_response: Any) -> Any:
    seen = {"thread": threading.get_ident(), "path": environ["PATH_INFO"], "query": environ["QUERY_STRING"],
            "token": environ.get("HTTP_X_AUTH_TOKEN"), "body": environ["wsgi.input"].read().decode(),
            "type": environ.get("CONTENT_TYPE")}
    if environ["PATH_INFO"] == "/stream":
        closed = environ["test.closed"]

        class Chunks:
            def __iter__(self) -> Iterator[bytes]:
                for index in range(5):
                    yield f"chunk-{index};".encode()

            def close(self) -> None:
                closed.set()

        start_response("200 OK", [("Content-Type", "application/octet-stream")])
        return Chunks()
    start_response("201 Created", [("Content-Type", "application/json"), ("X-Seen", "yes")])
    return [repr(seen).encode()]


def test_a_call_runs_the_application_in_the_calling_thread() -> None:
    session = requests.Session()
    session.mount("http://127.0.0.1:6385/image", local_calls.LocalAdapter(_app))
    response = session.post("http://127.0.0.1:6385/image/v2/images?x=1", json={"a": 1},
                            headers={"X-Auth-Token": "secret"})
    assert (response.status_code, response.reason, response.headers["X-Seen"]) == (201, "Created", "yes")
    seen = eval(response.text)  # noqa: S307 - the test's own repr
    assert seen == {"thread": threading.get_ident(), "path": "/image/v2/images", "query": "x=1",
                    "token": "secret", "body": '{"a": 1}', "type": "application/json"}


def test_answers_stream_when_asked_and_are_closed() -> None:
    closed = threading.Event()

    def app(environ: dict[str, Any], start_response: Any) -> Any:
        environ["test.closed"] = closed
        return _app(environ, start_response)

    session = requests.Session()
    session.mount("http://local", local_calls.LocalAdapter(app))
    with session.get("http://local/stream", stream=True) as response:
        parts = list(response.iter_content(7))
    assert b"".join(parts) == b"".join(f"chunk-{index};".encode() for index in range(5))
    assert closed.is_set()
    assert session.get("http://local/stream").content.endswith(b"chunk-4;")


def test_the_registry_follows_the_configuration_object() -> None:
    class Conf:
        pass

    conf, other = Conf(), Conf()
    local_calls.register(conf, _app)
    assert local_calls.app_for(conf) is _app
    assert local_calls.app_for(other) is None
    del conf
    assert local_calls.app_for(Conf()) is None
