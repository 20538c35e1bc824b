"""Bare Metal takes images from the Image service, as upstream Ironic takes them from Glance.

A real Image service (its app in-process, on the same database backend)
serves the images; the conductor finds it at ``[glance] endpoint_override``.
Nodes use the fake-hardware driver with the ``direct`` deploy (the real
agent writes the disk in one test), and the ``ramdisk`` deploy behind
sushy-tools' fake BMC.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from corral.baremetal.db import nodes as node_db
from corral.baremetal.db.tables import metadata
from corral.baremetal.drivers import glance, images
from corral.baremetal.drivers.base import InvalidParameterValue
from corral.core.db import is_duplicate, truncate_all
from tests.baremetal.agent_support import TestMachine, raw_image
from tests.baremetal.support import faultstring, wait_for_state
from tests.baremetal.test_agent import PAYLOAD, AgentServer, enroll, wait_settled
from tests.baremetal.test_provisioning import provision
from tests.baremetal.test_vmedia import SYSTEM_ID, bmc, fake_bmc  # noqa: F401 - fixtures
from tests.image.conftest import ImageServer, active, create
from tests.support.databases import DatabaseFactory
from tests.support.http import ApiClient

OWNER = "demo"
OTHER = "other"

# ------------------------------------------------------------------ units


def test_image_references_as_upstream_reads_them() -> None:
    image_id = str(uuid.uuid4())
    assert glance.is_glance_image(image_id) and glance.is_glance_image(f"glance://{image_id}")
    for other in ("http://example.com/a.img", "file:///var/lib/ironic/a.img", "", None, 5, "not-a-uuid"):
        assert not glance.is_glance_image(other)
    assert glance.parse_image_id(image_id.upper(), "image_source") == image_id
    assert glance.parse_image_id(f"glance://{image_id}", "image_source") == image_id
    assert glance.parse_image_id(f"glance://glance.example.com/{image_id}", "boot_iso") == image_id
    with pytest.raises(InvalidParameterValue, match=r"instance_info/boot_iso 'glance://nope' is not a valid image"):
        glance.parse_image_id("glance://nope", "boot_iso")


def test_instance_info_fields_are_upstreams() -> None:
    image = {"id": "i", "status": "active", "visibility": "public", "owner": "p", "checksum": "c" * 32,
             "os_hash_algo": "sha512", "os_hash_value": "d" * 128, "disk_format": "qcow2",
             "container_format": "bare", "tags": ["a"], "size": 4, "virtual_size": 8, "min_disk": 0, "min_ram": 0,
             "protected": False, "os_hidden": False, "name": "n", "created_at": "t", "updated_at": "t",
             "self": "/v2/images/i", "file": "/v2/images/i/file", "schema": "/v2/schemas/image",
             "hw_firmware_type": "uefi", "kernel_id": "k"}
    assert glance.instance_info_fields(image) == {
        "image_checksum": "c" * 32, "image_os_hash_algo": "sha512", "image_os_hash_value": "d" * 128,
        "image_disk_format": "qcow2", "image_container_format": "bare", "image_tags": ["a"],
        "image_properties": {"hw_firmware_type": "uefi", "kernel_id": "k"}}
    assert glance.image_checksum(image) == images.Checksum("sha512", "d" * 128)
    assert glance.image_checksum({**image, "os_hash_algo": None, "os_hash_value": None}) == \
        images.Checksum("md5", "c" * 32)


def _chunks(data: bytes, calls: list[str]) -> Any:
    @contextlib.contextmanager
    def open_data() -> Iterator[Iterator[bytes]]:
        calls.append("download")
        yield iter([data[:3], data[3:]])

    return open_data


def test_cache_keeps_image_service_images_by_id_and_hash(tmp_path: Path) -> None:
    cache = images.ImageCache(str(tmp_path / "cache"), 1 << 20, 3600, 10)
    data, calls = b"image data", []
    checksum = images.Checksum("sha512", hashlib.sha512(data).hexdigest())
    path = cache.fetch_image("abc", checksum, _chunks(data, calls))
    assert path == cache.image_entry("abc", checksum)
    assert Path(path).read_bytes() == data
    # Reused while it still matches its hash.
    assert cache.fetch_image("abc", checksum, _chunks(b"unused", calls)) == path
    assert calls == ["download"]
    # Another version of the image (another hash) is another entry.
    newer = b"newer data"
    other = images.Checksum("sha512", hashlib.sha512(newer).hexdigest())
    assert cache.fetch_image("abc", other, _chunks(newer, calls)) != path
    assert Path(path).read_bytes() == data and calls == ["download", "download"]


def test_cache_fetches_a_damaged_entry_again(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    cache = images.ImageCache(str(tmp_path / "cache"), 1 << 20, 3600, 10)
    data, calls = b"image data", []
    checksum = images.Checksum("sha256", hashlib.sha256(data).hexdigest())
    path = cache.fetch_image("abc", checksum, _chunks(data, calls))
    Path(path).write_bytes(b"image dat!")
    assert cache.fetch_image("abc", checksum, _chunks(data, calls)) == path
    assert Path(path).read_bytes() == data and calls == ["download", "download"]
    assert "no longer matches its sha256 checksum" in caplog.text


def test_cache_refuses_data_that_does_not_match_the_hash(tmp_path: Path) -> None:
    cache = images.ImageCache(str(tmp_path / "cache"), 1 << 20, 3600, 10)
    checksum = images.Checksum("sha512", hashlib.sha512(b"the real data").hexdigest())
    with pytest.raises(images.ImageChecksumError,
                       match=f"The checksum of image glance://abc does not match: expected sha512 {checksum.value}"):
        cache.fetch_image("abc", checksum, _chunks(b"other data", []))
    assert not os.path.exists(cache.image_entry("abc", checksum))
    assert [name for name in os.listdir(cache.directory) if not name.endswith(".lock")] == []


# ------------------------------------------------------------ fixtures


@pytest.fixture(scope="module")
def image_server(database_factory: DatabaseFactory, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ImageServer]:
    server = ImageServer(database_factory, tmp_path_factory.mktemp("image"))
    yield server
    server.stop()


@pytest.fixture
def image_api(image_server: ImageServer) -> ImageServer:
    image_server.reset()
    return image_server


@pytest.fixture(scope="module")
def glance_baremetal(database_factory: DatabaseFactory, image_server: ImageServer,
                     tmp_path_factory: pytest.TempPathFactory) -> Iterator[AgentServer]:
    """Bare Metal with the agent's test settings, taking images from ``image_server``."""
    server = AgentServer(database_factory, tmp_path_factory.mktemp("corral"),
                         groups={"glance": {"endpoint_override": image_server.url}},
                         deploy_callback_timeout=90, clean_callback_timeout=90)
    yield server
    server.stop()


@pytest.fixture
def server(glance_baremetal: AgentServer, image_api: ImageServer) -> AgentServer:
    """The module's Bare Metal server with every table emptied (and its Image service's too)."""
    truncate_all(glance_baremetal.state.db, metadata)
    conductor = glance_baremetal.conductor.conductor
    try:
        conductor.register()
    except Exception as error:
        # The conductor's heartbeat may have registered it again first.
        if not is_duplicate(error):
            raise
        conductor.register()
    return glance_baremetal


@pytest.fixture
def machines() -> Iterator[list[TestMachine]]:
    made: list[TestMachine] = []
    yield made
    for machine in made:
        machine.dispose()


# ------------------------------------------------------------ helpers


def available(client: ApiClient, name: str, mac: str, owner: str | None = OWNER) -> dict[str, Any]:
    node = enroll(client, name, mac, automated_clean=False, **({"owner": owner} if owner else {}))
    assert provision(client, name, "provide").status_code == 202
    wait_for_state(client, name, "available")
    return node


def set_source(client: ApiClient, name: str, source: str) -> None:
    patch = [{"op": "add", "path": "/instance_info", "value": {"image_source": source}}]
    assert client.patch(f"/v1/nodes/{name}", json=patch).status_code == 200


def stored_instance_info(server: AgentServer, node_uuid: str) -> dict[str, Any]:
    """instance_info as stored (the API masks image_url for everybody)."""
    with server.state.db.read() as conn:
        node = node_db.get(conn, uuid=node_uuid)
    assert node is not None
    return dict(node["instance_info"] or {})


def cached_copy(server: AgentServer, image: dict[str, Any]) -> str:
    cache = images.ImageCache.from_conf(server.conf)
    return cache.image_entry(image["id"], images.Checksum(image["os_hash_algo"], image["os_hash_value"]))


def agent_image_url(server: AgentServer, node_uuid: str) -> str:
    return f"{server.conductor.conductor.file_server_url}/agent_images/{node_uuid}"


def shared_with_owner(image_api: ImageServer, status: str, data: bytes = b"\1" * 4096) -> dict[str, Any]:
    """An image of another project shared with the node's owner, whose membership is ``status``."""
    image = active(image_api.client(OTHER), data, visibility="shared")
    members = f"/v2/images/{image['id']}/members"
    assert image_api.client(OTHER).post(members, json={"member": OWNER}).status_code == 200
    if status != "pending":
        answer = image_api.client(OWNER).put(f"{members}/{OWNER}", json={"status": status})
        assert answer.status_code == 200, answer.text
    return image


# ------------------------------------------------------ the direct deploy


@pytest.mark.parametrize("form", ["uuid", "glance-url"])
def test_direct_deploy_publishes_a_verified_copy_of_an_image_service_image(
        server: AgentServer, image_api: ImageServer, form: str) -> None:
    client = server.client
    data = raw_image(PAYLOAD)
    image = active(image_api.client(OWNER), data, name="disk", visibility="private", tags=["bm"],
                   hw_firmware_type="bios")
    node = available(client, "n1", "52:54:00:00:02:01")
    source = image["id"] if form == "uuid" else f"glance://{image['id']}"
    set_source(client, "n1", source)
    assert client.get("/v1/nodes/n1/validate").json()["deploy"] == {"result": True}

    assert provision(client, "n1", "active").status_code == 202
    waiting = wait_for_state(client, "n1", "wait call-back")
    info = waiting["instance_info"]
    assert info["image_source"] == source
    assert info["image_checksum"] == hashlib.md5(data).hexdigest() == image["checksum"]
    assert (info["image_os_hash_algo"], info["image_os_hash_value"]) == ("sha512", hashlib.sha512(data).hexdigest())
    assert (info["image_disk_format"], info["image_container_format"]) == ("raw", "bare")
    assert (info["image_tags"], info["image_properties"]) == (["bm"], {"hw_firmware_type": "bios"})
    # The agent is given the conductor's copy, on its file server.
    url = agent_image_url(server, node["uuid"])
    assert info["image_url"] == "******"
    assert stored_instance_info(server, node["uuid"])["image_url"] == url
    served = requests.get(url, timeout=30)
    assert served.status_code == 200
    assert hashlib.sha512(served.content).hexdigest() == image["os_hash_value"]
    assert hashlib.sha512(Path(cached_copy(server, image)).read_bytes()).hexdigest() == image["os_hash_value"]

    # A deployment that stops withdraws the published copy; the cache keeps the image.
    assert provision(client, "n1", "abort").status_code == 202
    wait_for_state(client, "n1", "deploy failed")
    assert requests.get(url, timeout=30).status_code == 404
    assert os.path.exists(cached_copy(server, image))


def test_image_service_partition_images_are_known_by_their_properties(server: AgentServer,
                                                                       image_api: ImageServer) -> None:
    """As upstream: kernel_id or ramdisk_id make a partition image, unless img_type says otherwise."""
    client = server.client
    partition = active(image_api.client(OWNER), b"\2" * 4096, kernel_id="k", ramdisk_id="r")
    whole = active(image_api.client(OWNER), b"\3" * 4096, kernel_id="k", img_type="whole-disk")
    available(client, "n1", "52:54:00:00:02:09")
    set_source(client, "n1", partition["id"])
    # No root_gb: refused before anything is fetched.
    assert provision(client, "n1", "active").status_code == 202
    failed = wait_for_state(client, "n1", "deploy failed")
    assert failed["last_error"].endswith("Some parameters were missing in node's instance_info. Missing are: "
                                         "['root_gb']")
    assert not os.path.exists(cached_copy(server, partition))

    patch = [{"op": "add", "path": "/instance_info/root_gb", "value": "1"}]
    assert client.patch("/v1/nodes/n1", json=patch).status_code == 200
    assert provision(client, "n1", "active").status_code == 202
    waiting = wait_for_state(client, "n1", "wait call-back")
    assert (waiting["instance_info"]["image_type"], waiting["instance_info"]["root_mb"]) == ("partition", 1024)
    assert waiting["driver_internal_info"]["is_whole_disk_image"] is False

    assert provision(client, "n1", "abort").status_code == 202
    wait_for_state(client, "n1", "deploy failed")
    set_source(client, "n1", whole["id"])
    assert provision(client, "n1", "active").status_code == 202
    waiting = wait_for_state(client, "n1", "wait call-back")
    assert waiting["instance_info"]["image_type"] == "whole-disk" and "root_mb" not in waiting["instance_info"]
    assert waiting["driver_internal_info"]["is_whole_disk_image"] is True


@pytest.mark.slow
def test_real_agent_writes_an_image_from_the_image_service(
        server: AgentServer, image_api: ImageServer, tmp_path: Path, machines: list[TestMachine]) -> None:
    client = server.client
    machine = TestMachine(tmp_path / "machines", "g1", "52:54:00:00:02:02")
    machines.append(machine)
    data = raw_image(PAYLOAD)
    image = active(image_api.client(OWNER), data, visibility="private")
    node = available(client, "g1", machine.mac)
    set_source(client, "g1", image["id"])
    assert provision(client, "g1", "active").status_code == 202
    wait_for_state(client, "g1", "wait call-back")
    # What the agent is given: the conductor's copy, and the Image service's sha512 to check it against.
    info = stored_instance_info(server, node["uuid"])
    assert info["image_url"] == agent_image_url(server, node["uuid"])
    assert (info["image_os_hash_algo"], info["image_os_hash_value"]) == ("sha512", image["os_hash_value"])
    machine.power_on(server.url)
    deployed = wait_settled(client, "g1", "active", machine)
    machine.power_off()
    assert deployed["last_error"] is None
    assert machine.disk_bytes()[:len(data)] == data
    # Once written, the published copy is gone (as upstream removes it).
    assert requests.get(agent_image_url(server, node["uuid"]), timeout=30).status_code == 404


# ------------------------------------------------------------ refusals


def test_images_the_owner_may_not_use_or_not_active_are_refused_with_400(
        server: AgentServer, image_api: ImageServer) -> None:
    client = server.client
    node = available(client, "n1", "52:54:00:00:02:03")
    queued = create(image_api.client(OWNER))
    private = active(image_api.client(OTHER))
    pending = shared_with_owner(image_api, "pending")
    rejected = shared_with_owner(image_api, "rejected")
    unknown = str(uuid.uuid4())
    hidden = "could not be found, or the node's owner (project demo) may not use it."
    cases = {
        unknown: f"Image {unknown} {hidden}",
        f"glance://{private['id']}": f"Image {private['id']} {hidden}",
        pending["id"]: f"Image {pending['id']} {hidden}",
        rejected["id"]: f"Image {rejected['id']} {hidden}",
        queued["id"]: f"Image {queued['id']} is unacceptable: the image is required to be in an active state, and "
                      "it is queued.",
    }
    for source, message in cases.items():
        set_source(client, "n1", source)
        validation = client.get("/v1/nodes/n1/validate").json()["deploy"]
        assert validation == {"result": False, "reason": message}, source
        response = provision(client, "n1", "active")
        assert response.status_code == 400, source
        assert faultstring(response) == (f"RPC do_node_deploy failed to validate deploy or power info for node "
                                         f"{node['uuid']}. Error: {message}")
        shown = client.get("/v1/nodes/n1").json()
        assert (shown["provision_state"], shown["last_error"]) == ("available", None)
    assert requests.get(agent_image_url(server, node["uuid"]), timeout=30).status_code == 404


def test_images_the_owner_may_use(server: AgentServer, image_api: ImageServer) -> None:
    client = server.client
    admin = image_api.admin()
    usable = {
        "own private": active(image_api.client(OWNER), visibility="private"),
        "public": active(admin, visibility="public"),
        "community": active(image_api.client(OTHER), visibility="community"),
        "shared, accepted": shared_with_owner(image_api, "accepted"),
    }
    available(client, "n1", "52:54:00:00:02:04")
    for what, image in usable.items():
        set_source(client, "n1", image["id"])
        assert client.get("/v1/nodes/n1/validate").json()["deploy"] == {"result": True}, what
    # A node without an owner may use any active image; a queued one is still refused.
    available(client, "n2", "52:54:00:00:02:05", owner=None)
    set_source(client, "n2", active(image_api.client(OTHER), visibility="private")["id"])
    assert client.get("/v1/nodes/n2/validate").json()["deploy"] == {"result": True}
    queued = create(image_api.client(OTHER))
    set_source(client, "n2", queued["id"])
    assert client.get("/v1/nodes/n2/validate").json()["deploy"]["reason"].endswith("and it is queued.")


def test_image_service_data_not_matching_its_hash_fails_the_deployment(
        server: AgentServer, image_api: ImageServer) -> None:
    client = server.client
    data = raw_image(PAYLOAD)
    image = active(image_api.client(OWNER), data)
    # The store's copy changes behind the Image service's back (same size).
    stored = image_api.datadir / image["id"]
    tampered = bytearray(stored.read_bytes())
    tampered[-1] ^= 0xFF
    stored.write_bytes(bytes(tampered))
    node = available(client, "n1", "52:54:00:00:02:06")
    set_source(client, "n1", image["id"])
    assert provision(client, "n1", "active").status_code == 202
    failed = wait_for_state(client, "n1", "deploy failed")
    assert f"The checksum of image glance://{image['id']} does not match: expected sha512 " \
           f"{image['os_hash_value']}, got {hashlib.sha512(bytes(tampered)).hexdigest()}" in failed["last_error"]
    assert failed["power_state"] == "power off"
    assert not os.path.exists(cached_copy(server, image))
    assert requests.get(agent_image_url(server, node["uuid"]), timeout=30).status_code == 404


def test_a_damaged_cached_copy_is_fetched_again(server: AgentServer, image_api: ImageServer) -> None:
    client = server.client
    data = raw_image(PAYLOAD)
    image = active(image_api.client(OWNER), data)
    node = available(client, "n1", "52:54:00:00:02:07")
    set_source(client, "n1", image["id"])
    provision(client, "n1", "active")
    wait_for_state(client, "n1", "wait call-back")
    provision(client, "n1", "abort")
    wait_for_state(client, "n1", "deploy failed")
    cached = Path(cached_copy(server, image))
    cached.write_bytes(b"\0" * len(data))

    assert provision(client, "n1", "active").status_code == 202
    wait_for_state(client, "n1", "wait call-back")
    assert hashlib.sha512(cached.read_bytes()).hexdigest() == image["os_hash_value"]
    served = requests.get(agent_image_url(server, node["uuid"]), timeout=30).content
    assert hashlib.sha512(served).hexdigest() == image["os_hash_value"]


# ------------------------------------------------- the ramdisk deploy


def redfish_node(client: ApiClient, name: str, address: str, **instance_info: Any) -> dict[str, Any]:
    response = client.post("/v1/nodes", json={
        "driver": "redfish", "name": name, "owner": OWNER,
        "boot_interface": "redfish-virtual-media", "deploy_interface": "ramdisk",
        "driver_info": {"redfish_address": address, "redfish_system_id": f"/redfish/v1/Systems/{SYSTEM_ID}"},
        "properties": {"capabilities": "boot_mode:bios"}, "instance_info": instance_info,
    })
    assert response.status_code == 201, response.text
    return response.json()  # type: ignore[no-any-return]


def test_ramdisk_deploy_validates_boot_iso_kernel_and_ramdisk_against_the_image_service(
        server: AgentServer, image_api: ImageServer) -> None:
    client = server.client
    unknown = str(uuid.uuid4())
    queued = create(image_api.client(OWNER), disk_format="iso")
    kernel = active(image_api.client(OWNER), b"kernel")
    redfish_node(client, "iso", "http://127.0.0.1:9", boot_iso=f"glance://{unknown}")
    redfish_node(client, "kr", "http://127.0.0.1:9", kernel=kernel["id"], ramdisk=queued["id"])
    redfish_node(client, "bad", "http://127.0.0.1:9", boot_iso="glance://not-an-image")
    reasons = {name: client.get(f"/v1/nodes/{name}/validate").json()["deploy"] for name in ("iso", "kr", "bad")}
    assert reasons["iso"] == {"result": False, "reason": f"Image {unknown} could not be found, or the node's owner "
                                                         "(project demo) may not use it."}
    assert reasons["kr"] == {"result": False, "reason": f"Image {queued['id']} is unacceptable: the image is required "
                                                        "to be in an active state, and it is queued."}
    assert reasons["bad"]["result"] is False
    assert "instance_info/boot_iso 'glance://not-an-image' is not a valid image reference" in reasons["bad"]["reason"]


@pytest.mark.backends("first")
def test_ramdisk_deploy_boots_a_boot_iso_from_the_image_service(
        server: AgentServer, image_api: ImageServer, bmc: Any) -> None:  # noqa: F811 - the fixture
    client = server.client
    data = b"a boot image the fake BMC only stores " * 1000
    image = active(image_api.client(OWNER), data, visibility="private")
    node = redfish_node(client, "vm1", bmc.url, boot_iso=image["id"])
    assert provision(client, "vm1", "manage").status_code == 202
    wait_for_state(client, "vm1", "manageable")
    assert provision(client, "vm1", "provide").status_code == 202
    wait_for_state(client, "vm1", "available")
    assert provision(client, "vm1", "active").status_code == 202
    deployed = wait_for_state(client, "vm1", "active", timeout=60)
    assert (deployed["last_error"], deployed["power_state"]) == (None, "power on")
    info = deployed["instance_info"]
    assert (info["image_os_hash_algo"], info["image_os_hash_value"]) == ("sha512", hashlib.sha512(data).hexdigest())
    assert (info["image_checksum"], info["image_disk_format"]) == (hashlib.md5(data).hexdigest(), "raw")
    # The BMC was given the conductor's verified copy.
    published = f"{server.conductor.conductor.file_server_url}/redfish/boot-{node['uuid']}.iso"
    cd = bmc.cd(SYSTEM_ID)
    assert (cd["Image"], cd["Inserted"]) == (published, True)
    assert requests.get(published, timeout=30).content == data
    assert Path(cached_copy(server, image)).read_bytes() == data
    assert bmc.system(SYSTEM_ID)["PowerState"] == "On"
