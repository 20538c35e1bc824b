"""Boots from images of a real Image service, and Nova's refusals, on every backend.

The compute fixtures run Corral's Image service in-process on the same
backend (``[glance] endpoint_override`` points at it). Compute asks it
with the caller's own noauth2 token, so what one project may see decides.
"""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import falcon.testing
import pytest
import requests

from corral.compute.api.handlers.servers import forwarded_credentials
from corral.compute.db import api_queries as q
from corral.compute.domain.images import check_flavor_image
from corral.compute.glance import Credentials, GlanceClient
from corral.core import errors
from tests.compute.conftest import IMAGE, ComputeServer
from tests.image.conftest import active, create
from tests.support.ports import free_port

USER_A = "user-a:project-a"
USER_B = "user-b:project-b"
GIB = 1024 ** 3


def _boot(cloud: ComputeServer, image_ref: str, token: str = USER_A, version: str = "2.73",
          **server: Any) -> requests.Response:
    body = {"name": "vm", "flavorRef": "1", "imageRef": image_ref, "networks": "none", **server}
    return cloud.client(version, token=token).post("/v2.1/servers", json={"server": body})


def _refused(response: requests.Response, status: int = 400) -> str:
    assert response.status_code == status, response.text
    fault = {400: "badRequest", 500: "computeFault"}[status]
    body = response.json()
    assert list(body) == [fault] and body[fault]["code"] == status
    return str(body[fault]["message"])


def _servers_of(cloud: ComputeServer, token: str) -> list[str]:
    listed = cloud.client("2.73", token=token).get("/v2.1/servers")
    assert listed.status_code == 200
    return [server["id"] for server in listed.json()["servers"]]


def _project_a_image(cloud: ComputeServer, **body: Any) -> dict[str, Any]:
    """A private image of project-a, active (4 KiB)."""
    return active(cloud.images.client("project-a", user="user-a"), visibility="private", **body)


def test_boot_from_an_active_image_of_the_callers_project(cloud: ComputeServer) -> None:
    image = _project_a_image(cloud, name="own")
    resp = _boot(cloud, image["id"])
    assert resp.status_code == 202, resp.text
    server_id = resp.json()["server"]["id"]
    with cloud.state.api_db.read() as conn:
        assert q.request_spec(conn, server_id)["image"] == {"id": image["id"]}
    cloud.run_computes()
    server = cloud.client("2.73", token=USER_A).get(f"/v2.1/servers/{server_id}").json()["server"]
    assert server["status"] == "ACTIVE"
    assert server["image"] == {
        "id": image["id"], "links": [{"rel": "bookmark", "href": f"{cloud.url}/images/{image['id']}"}]}
    # An image URL whose last segment is the id works too.
    by_url = _boot(cloud, f"http://images.example/v2/images/{image['id']}", name="by-url")
    assert by_url.status_code == 202, by_url.text
    listed = cloud.client("2.73", token=USER_A).get(f"/v2.1/servers?image={image['id']}").json()["servers"]
    assert len(listed) == 2


def test_a_shared_image_boots_for_a_member_project(cloud: ComputeServer) -> None:
    owner = cloud.images.client("project-a", user="user-a")
    image = active(owner, visibility="shared", name="shared")
    assert _refused(_boot(cloud, image["id"], token=USER_B)) == "Can not find requested image"
    added = owner.post(f"/v2/images/{image['id']}/members", json={"member": "project-b"})
    assert added.status_code == 200, added.text
    # Glance shows a shared image to its members in any member status.
    assert _boot(cloud, image["id"], token=USER_B).status_code == 202


@pytest.mark.parametrize("version", ["2.1", "2.37", "2.73"])
def test_an_image_that_does_not_exist_is_400(cloud: ComputeServer, version: str) -> None:
    missing = "0c0ffee0-0000-4000-8000-000000000000"
    assert _refused(_boot(cloud, missing, version=version)) == "Can not find requested image"
    assert _refused(_boot(cloud, "not-an-image", version=version)) == "Can not find requested image"
    assert _servers_of(cloud, USER_A) == []


def test_another_projects_private_image_is_not_found(cloud: ComputeServer) -> None:
    image = _project_a_image(cloud, name="private")
    # Asked with project-b's own token: the Image service does not show it.
    assert _refused(_boot(cloud, image["id"], token=USER_B)) == "Can not find requested image"
    assert _servers_of(cloud, USER_B) == []
    # The owner and an admin see it.
    assert _boot(cloud, image["id"], token=USER_A).status_code == 202
    assert _boot(cloud, image["id"], token="admin:project-b").status_code == 202


def test_a_noauth2_callers_project_header_counts_for_the_image_too(cloud: ComputeServer) -> None:
    image = _project_a_image(cloud, name="by-header")
    client = cloud.client("2.73", token="user-c").with_headers(X_Project_Id="project-a")
    resp = client.post("/v2.1/servers", json={"server": {
        "name": "vm", "flavorRef": "1", "imageRef": image["id"], "networks": "none"}})
    assert resp.status_code == 202, resp.text
    # Without the header the same token has no project-a, and no view of its private image.
    alone = cloud.client("2.73", token="user-c").post("/v2.1/servers", json={"server": {
        "name": "vm", "flavorRef": "1", "imageRef": image["id"], "networks": "none"}})
    assert _refused(alone) == "Can not find requested image"


def test_a_queued_image_is_not_active(cloud: ComputeServer) -> None:
    queued = create(cloud.images.client("project-a", user="user-a"), name="queued")
    assert queued["status"] == "queued"
    assert _refused(_boot(cloud, queued["id"])) == f"Image {queued['id']} is not active."
    deactivated = _project_a_image(cloud, name="deactivated")
    admin = cloud.images.admin()
    assert admin.post(f"/v2/images/{deactivated['id']}/actions/deactivate").status_code == 204
    assert _refused(_boot(cloud, deactivated["id"])) == f"Image {deactivated['id']} is not active."
    assert _servers_of(cloud, USER_A) == []


def test_min_disk_above_the_flavors_root_disk(cloud: ComputeServer) -> None:
    image = _project_a_image(cloud, name="big-min-disk", min_disk=2)
    assert _refused(_boot(cloud, image["id"])) == (
        "Flavor's disk is smaller than the minimum size specified in image metadata. "
        f"Flavor disk is {GIB} bytes, minimum size is {2 * GIB} bytes.")
    assert _servers_of(cloud, USER_A) == []
    fits = _project_a_image(cloud, name="fits", min_disk=1)
    assert _boot(cloud, fits["id"]).status_code == 202
    # A flavor with a 0 GB root disk is not checked, as upstream's legacy rule has it.
    flavor = {"name": "zero-disk", "ram": 512, "vcpus": 1, "disk": 0, "id": "zero"}
    assert cloud.client("2.73").post("/v2.1/flavors", json={"flavor": flavor}).status_code == 200
    assert _boot(cloud, image["id"], flavorRef="zero").status_code == 202


def test_min_ram_above_the_flavors_ram(cloud: ComputeServer) -> None:
    image = _project_a_image(cloud, name="hungry", min_ram=1024)
    assert _refused(_boot(cloud, image["id"])) == "Flavor's memory is too small for requested image."
    assert _servers_of(cloud, USER_A) == []
    exact = _project_a_image(cloud, name="exact", min_ram=512)
    assert _boot(cloud, exact["id"]).status_code == 202


def test_flavor_disk_checks_in_nova_order() -> None:
    """An image larger than the root disk (no 1 GiB upload needed): size first, then min_disk."""
    flavor = {"memory_mb": 512, "root_gb": 1}
    image = {"id": "i", "status": "active", "size": GIB + 1, "min_disk": 5, "min_ram": 0}
    with pytest.raises(errors.BadRequest) as raised:
        check_flavor_image(image, flavor)
    assert raised.value.message == (
        f"Flavor's disk is too small for requested image. Flavor disk is {GIB} bytes, image is {GIB + 1} bytes.")
    check_flavor_image({**image, "size": GIB, "min_disk": 1}, flavor)
    check_flavor_image(image, {**flavor, "root_gb": 0})
    # Status before memory, memory before disk.
    with pytest.raises(errors.BadRequest, match="is not active"):
        check_flavor_image({**image, "status": "queued", "min_ram": 4096}, flavor)
    with pytest.raises(errors.BadRequest, match="memory is too small"):
        check_flavor_image({**image, "min_ram": 4096}, flavor)


@pytest.mark.parametrize(("strategy", "expected"), [
    ("corral", Credentials("tok", {})),
    ("keystone", Credentials("tok", {})),
    ("noauth2", Credentials("tok", {"X-Project-Id": "p", "X-Roles": "member"})),
    ("http_basic", Credentials("tok", {"Authorization": "Basic YTpi"})),
    ("noauth", Credentials("tok", {})),
])
def test_the_callers_own_credentials_are_forwarded(strategy: str, expected: Credentials) -> None:
    req = falcon.testing.create_req(headers={
        "X-Auth-Token": "tok", "X-Project-Id": "p", "X-Roles": "member", "Authorization": "Basic YTpi"})
    state: Any = SimpleNamespace(conf=SimpleNamespace(api=SimpleNamespace(auth_strategy=strategy)))
    assert forwarded_credentials(state, req) == expected
    # Without a token the Image service client uses its own ([glance] token, under noauth).
    assert forwarded_credentials(state, falcon.testing.create_req()).token is None


# ------------------------------------------------------------ service down


class _Unavailable(http.server.BaseHTTPRequestHandler):
    """An Image service that answers every request 503 and counts them."""

    requests: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 - the standard library's name
        self.requests.append(self.path)
        body = b"503 Service Unavailable"
        self.send_response(503)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def image_service_at(cloud: ComputeServer) -> Iterator[Any]:
    """Point Compute's image client at another URL for the test."""
    original = cloud.state.images

    def point(url: str) -> None:
        cloud.conf.set_override("endpoint_override", url, group="glance")
        cloud.state.images = GlanceClient(cloud.conf)

    yield point
    cloud.state.images = original
    cloud.conf.set_override("endpoint_override", cloud.images.url, group="glance")


UNREACHABLE = "Unexpected API Error. Please contact the administrator\n<class 'nova.exception.GlanceConnectionFailed'>"


def test_an_unreachable_image_service_is_nova_s_500(cloud: ComputeServer, image_service_at: Any) -> None:
    image_service_at(f"http://127.0.0.1:{free_port()}")
    assert _refused(_boot(cloud, IMAGE), 500) == UNREACHABLE
    assert _servers_of(cloud, USER_A) == []
    # Boots from a block device mapping alone ask the Image service nothing.
    bdm = [{"boot_index": 0, "uuid": IMAGE, "source_type": "image", "destination_type": "local"}]
    resp = _boot(cloud, "", block_device_mapping_v2=bdm)
    assert resp.status_code == 202, resp.text
    cloud.run_computes()
    server = cloud.client("2.73", token=USER_A).get(f"/v2.1/servers/{resp.json()['server']['id']}").json()
    assert server["server"]["status"] == "ACTIVE"


def test_an_image_service_answering_503_is_retried_then_nova_s_500(cloud: ComputeServer,
                                                                   image_service_at: Any) -> None:
    handler = type("Unavailable", (_Unavailable,), {"requests": []})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        image_service_at(f"http://127.0.0.1:{server.server_address[1]}")
        image_id = IMAGE
        assert _refused(_boot(cloud, image_id), 500) == UNREACHABLE
        # One request and [glance] num_retries (3) retries.
        assert handler.requests == [f"/v2/images/{image_id}"] * 4
    finally:
        server.shutdown()
        server.server_close()
    assert _servers_of(cloud, USER_A) == []
