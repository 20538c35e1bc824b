"""One log line per request, and each service's request-id headers as upstream sends them."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from corral.core.wsgi import RequestLog
from tests.support.process import CorralProcess, write_config

REQUEST_ID = re.compile(r"^req-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
TOKEN = {"X-Auth-Token": "admin"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CorralProcess]:
    root = tmp_path_factory.mktemp("request-log")
    (root / "state").mkdir()
    config = write_config(root / "corral.conf", {"api": {"auth_strategy": "noauth2"}})
    process = CorralProcess(config, root / "state").start()
    yield process
    process.stop()


def _logged(server: CorralProcess, request_id: str) -> list[str]:
    for _ in range(100):  # the line may reach the file a moment after the answer
        lines = [line for line in server.log().splitlines() if request_id in line]
        if lines:
            return lines
        time.sleep(0.1)
    return []


def test_each_request_is_one_log_line(server: CorralProcess) -> None:
    response = requests.get(server.url + "/placement/resource_providers?name=x", headers=TOKEN, timeout=30)
    request_id = response.headers["x-openstack-request-id"]
    (line,) = _logged(server, request_id)
    assert re.search(r'"GET /placement/resource_providers" 200 [0-9.]+ ms ' + request_id, line)
    assert "name=x" not in line and "admin" not in line

    missing = requests.get(server.url + "/baremetal/v1/nodes/nope", headers=TOKEN, timeout=30)
    (line,) = _logged(server, missing.headers["x-openstack-request-id"])
    assert '"GET /baremetal/v1/nodes/nope" 404 ' in line


def test_a_path_cannot_forge_log_lines(server: CorralProcess) -> None:
    response = requests.get(server.url + "/placement/resource_providers/a%0Afake%20line", headers=TOKEN,
                            timeout=30)
    (line,) = _logged(server, response.headers["x-openstack-request-id"])
    assert "a\\x0afake line" in line
    assert not any(entry.startswith("fake line") for entry in server.log().splitlines())


@pytest.mark.parametrize(("path", "names"), [
    ("/placement/resource_providers", ["x-openstack-request-id"]),
    ("/baremetal/v1/nodes", ["x-openstack-request-id", "openstack-request-id"]),
    ("/compute/v2.1/flavors", ["x-openstack-request-id", "x-compute-request-id"]),
    ("/compute/v2.1/no-such-thing", ["x-openstack-request-id", "x-compute-request-id"]),
])
def test_request_id_headers_as_upstream(server: CorralProcess, path: str, names: list[str]) -> None:
    response = requests.get(server.url + path, headers={**TOKEN, "X-OpenStack-Request-Id": "req-" + "0" * 36},
                            timeout=30)
    values = {response.headers.get(name) for name in names}
    assert len(values) == 1
    (value,) = values
    assert value is not None and REQUEST_ID.match(value)
    # An incoming id is the caller's global id: the answer carries a new local one.
    assert value != "req-" + "0" * 36


def test_a_streamed_answer_is_logged_once_sent(caplog: pytest.LogCaptureFixture) -> None:
    def app(environ: dict[str, Any], start_response: Any) -> Iterator[bytes]:
        start_response("206 Partial Content", [("X-OpenStack-Request-Id", "req-streamed")])
        yield b"part"

    with caplog.at_level(logging.INFO, logger="corral.access"):
        answer = RequestLog(app)({"REQUEST_METHOD": "GET", "PATH_INFO": "/image", "REMOTE_ADDR": "192.0.2.1"},
                                 lambda status, headers, exc_info=None: None)
        assert list(answer) == [b"part"] and not caplog.records
        answer.close()  # type: ignore[attr-defined]
    assert [record.getMessage().rsplit(" ", 3)[0] for record in caplog.records] == ['192.0.2.1 "GET /image" 206']
    assert caplog.records[0].getMessage().endswith(" req-streamed")
