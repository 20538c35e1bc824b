"""The interoperable import (glance-direct, web-download) and image sharing through members."""

from __future__ import annotations

import hashlib
import http.server
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from corral.image import fetch
from tests.image.conftest import OCTET, ImageServer, create
from tests.support.http import ApiClient

ALICE = "project-alice"
BOB = "project-bob"
CAROL = "project-carol"


def _wait_status(client: ApiClient, image_id: str, *statuses: str) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while True:
        image = client.get(f"/v2/images/{image_id}").json()
        if image["status"] in statuses or time.monotonic() > deadline:
            return image  # type: ignore[no-any-return]
        time.sleep(0.05)


class _Files(http.server.BaseHTTPRequestHandler):
    files: dict[str, bytes] = {}
    redirects: dict[str, str] = {}

    def do_GET(self) -> None:  # noqa: N802 - the standard library's name
        if self.path in self.redirects:
            self.send_response(302)
            self.send_header("Location", self.redirects[self.path])
            self.end_headers()
            return
        body = self.files.get(self.path)
        if body is None:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def web() -> Iterator[tuple[str, type[_Files]]]:
    handler = type("Files", (_Files,), {"files": {}, "redirects": {}})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", handler
    server.shutdown()
    server.server_close()


def test_glance_direct_stage_then_import(image_api: ImageServer) -> None:
    client = image_api.client(ALICE)
    data = b"staged" * 5000
    image = create(client, name="direct")
    assert client.put(f"/v2/images/{image['id']}/stage", data=data, headers=OCTET).status_code == 204
    staged = client.get(f"/v2/images/{image['id']}").json()
    assert (staged["status"], staged["size"], staged["checksum"]) == ("uploading", len(data), None)
    assert image_api.staged_files() == [image["id"]]
    again = client.put(f"/v2/images/{image['id']}/stage", data=data, headers=OCTET)
    assert again.status_code == 409
    response = client.post(f"/v2/images/{image['id']}/import", json={"method": {"name": "glance-direct"}})
    assert response.status_code == 202 and response.content == b""
    done = _wait_status(client, image["id"], "active")
    assert done["status"] == "active"
    assert done["checksum"] == hashlib.md5(data).hexdigest()
    assert (done["os_glance_failed_import"], done["os_glance_importing_to_stores"]) == ("", "")
    assert image_api.staged_files() == []
    assert client.get(f"/v2/images/{image['id']}/file").content == data
    queued = create(client)
    refused = client.post(f"/v2/images/{queued['id']}/import", json={"method": {"name": "glance-direct"}})
    assert refused.status_code == 409
    assert "Image needs to be staged before 'glance-direct' method can be used" in refused.json()["message"]
    for body, message in (({}, "Import request requires a 'method' field."),
                          ({"method": {}}, "Import request requires a 'name' field."),
                          ({"method": {"name": "copy-image"}}, "Unknown import method name 'copy-image'.")):
        bad = client.post(f"/v2/images/{queued['id']}/import", json=body)
        assert bad.status_code == 400 and message in bad.json()["message"]


def test_a_failed_glance_direct_import_goes_back_to_queued(image_api: ImageServer) -> None:
    client = image_api.client(ALICE)
    image = create(client, disk_format="qcow2")
    client.put(f"/v2/images/{image['id']}/stage", data=b"not a qcow2" * 100, headers=OCTET)
    client.post(f"/v2/images/{image['id']}/import", json={"method": {"name": "glance-direct"}})
    failed = _wait_status(client, image["id"], "queued")
    assert failed["status"] == "queued"
    assert failed["os_glance_failed_import"] == "file"
    assert image_api.stored_files() == [] and image_api.staged_files() == []


def test_web_download_refuses_internal_addresses_by_default(image_api: ImageServer,
                                                            web: tuple[str, type[_Files]]) -> None:
    client = image_api.client(ALICE)
    image = create(client)
    for uri in (f"{web[0]}/image.raw", "http://127.0.0.1/image.raw", "http://169.254.169.254/latest/meta-data",
                "http://10.1.2.3/x", "http://[::1]/x", "ftp://example.com/x", "http://localhost/x"):
        response = client.post(f"/v2/images/{image['id']}/import",
                               json={"method": {"name": "web-download", "uri": uri}})
        assert response.status_code == 400, uri
        assert f"URI for web-download does not pass filtering: {uri}" in response.json()["message"]
    assert client.get(f"/v2/images/{image['id']}").json()["status"] == "queued"


def test_the_filter_checks_every_address(image_api: ImageServer) -> None:
    url_filter = fetch.Filter(image_api.conf.import_filtering_opts)
    # (Nothing is fetched: the filter only looks at addresses.)
    url_filter.check_url("http://8.8.8.8/ok")
    url_filter.check_url("https://1.1.1.1/ok")
    for refused in ("http://198.51.100.7/documentation", "http://100.64.0.1/cgnat", "http://0.0.0.0/", "http://224.0.0.1/", "http://[::ffff:127.0.0.1]/",
                    "http://[fe80::1]/", "http://192.168.1.1:8080/"):
        with pytest.raises(fetch.Refused):
            url_filter.check_url(refused)
    with pytest.raises(fetch.Refused):
        url_filter.check_peer("example.com", "127.0.0.1")


def test_web_download_from_an_allowed_host(image_server: ImageServer, web: tuple[str, type[_Files]]) -> None:
    image_server.reset()
    base, files = web
    port = int(base.rsplit(":", 1)[1])
    conf = image_server.conf
    conf.set_override("allowed_hosts", ["127.0.0.1"], group="import_filtering_opts")
    conf.set_override("allowed_ports", [port], group="import_filtering_opts")
    data = b"downloaded" * 10_000
    files.files["/image.raw"] = data
    files.redirects["/moved"] = "/image.raw"
    files.redirects["/escape"] = "http://169.254.169.254/latest/meta-data"
    client = image_server.client(ALICE)
    try:
        image = create(client)
        response = client.post(f"/v2/images/{image['id']}/import",
                               json={"method": {"name": "web-download", "uri": f"{base}/moved"}})
        assert response.status_code == 202
        done = _wait_status(client, image["id"], "active")
        assert (done["status"], done["size"], done["checksum"]) == ("active", len(data), hashlib.md5(data).hexdigest())
        for path in ("/missing", "/escape"):
            other = create(client)
            client.post(f"/v2/images/{other['id']}/import",
                        json={"method": {"name": "web-download", "uri": f"{base}{path}"}})
            assert _wait_status(client, other["id"], "queued")["status"] == "queued", path
            assert client.get(f"/v2/images/{other['id']}").json()["os_glance_failed_import"] == "file"
    finally:
        conf.clear_override("allowed_hosts", group="import_filtering_opts")
        conf.clear_override("allowed_ports", group="import_filtering_opts")
    assert image_server.stored_files() == [image["id"]]


def test_members_pending_accepted_rejected(image_api: ImageServer) -> None:
    alice, bob, carol = (image_api.client(project) for project in (ALICE, BOB, CAROL))
    image = create(alice, name="to-share")
    members = f"/v2/images/{image['id']}/members"
    added = alice.post(members, json={"member": BOB})
    assert added.status_code == 200
    assert list(added.json()) == ["member_id", "image_id", "status", "created_at", "updated_at", "schema"]
    assert added.json()["status"] == "pending"
    assert alice.post(members, json={"member": BOB}).status_code == 409
    assert alice.post(members, json={"member": CAROL}).status_code == 200
    # Pending: bob can show it by id, but it is not in his lists until he accepts.
    assert bob.get(f"/v2/images/{image['id']}").status_code == 200
    assert [i["name"] for i in bob.get("/v2/images").json()["images"]] == []
    assert [i["name"] for i in bob.get("/v2/images?member_status=pending").json()["images"]] == ["to-share"]
    assert bob.get(members).json()["members"][0]["member_id"] == BOB
    assert len(bob.get(members).json()["members"]) == 1
    assert len(alice.get(members).json()["members"]) == 2
    owner_accepts = alice.put(f"{members}/{BOB}", json={"status": "accepted"})
    assert owner_accepts.status_code == 403
    assert bob.put(f"{members}/{BOB}", json={"status": "maybe"}).status_code == 400
    assert bob.put(f"{members}/{BOB}", json={"status": "accepted"}).json()["status"] == "accepted"
    assert [i["name"] for i in bob.get("/v2/images").json()["images"]] == ["to-share"]
    assert bob.get(f"{members}/{CAROL}").status_code == 404
    assert carol.put(f"{members}/{CAROL}", json={"status": "rejected"}).json()["status"] == "rejected"
    assert carol.get("/v2/images").json()["images"] == []
    assert bob.delete(f"{members}/{BOB}").status_code == 403
    outsider = image_api.client("project-dave")
    assert outsider.get(f"/v2/images/{image['id']}").status_code == 404
    assert outsider.get(members).status_code == 404
    # Members exist only for shared images; making it private hides it, shared again restores it.
    private = create(alice, visibility="private")
    refused = alice.post(f"/v2/images/{private['id']}/members", json={"member": BOB})
    assert refused.status_code == 403
    alice.patch(f"/v2/images/{image['id']}", headers={"Content-Type": "application/openstack-images-v2.1-json-patch"},
                json=[{"op": "replace", "path": "/visibility", "value": "private"}])
    assert bob.get(f"/v2/images/{image['id']}").status_code == 404
    alice.patch(f"/v2/images/{image['id']}", headers={"Content-Type": "application/openstack-images-v2.1-json-patch"},
                json=[{"op": "replace", "path": "/visibility", "value": "shared"}])
    assert bob.get(f"/v2/images/{image['id']}").status_code == 200
    assert alice.delete(f"{members}/{BOB}").status_code == 204
    assert bob.get(f"/v2/images/{image['id']}").status_code == 404
    for body, message in (({}, "Member to be added not specified"), ({"member": ""}, "Member can't be empty")):
        response = alice.post(members, json=body)
        assert response.status_code == 400 and message in response.json()["message"]
