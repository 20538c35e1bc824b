"""Image data: upload, download, ranges, integrity, format inspection, and what a failed upload leaves."""

from __future__ import annotations

import datetime
import hashlib
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from corral.image.data import recover_expired
from corral.image.db.tables import images as images_table
from tests.image.conftest import OCTET, ImageServer, active, create, upload

ALICE = "project-alice"


def _qemu_img(*args: str) -> None:
    if shutil.which("qemu-img") is None:
        reason = "qemu-img is missing (Debian: apt-get install qemu-utils; tools/baremetal-lab setup installs it)"
        if os.environ.get("CORRAL_TEST_REQUIRE_BACKENDS") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    subprocess.run(["qemu-img", *args], check=True, capture_output=True)


def test_upload_and_download_with_checksums_and_ranges(image_api: ImageServer) -> None:
    client = image_api.client(ALICE)
    data = os.urandom(300_000)
    image = active(client, data)
    assert image["status"] == "active"
    assert (image["size"], image["virtual_size"]) == (len(data), len(data))
    assert image["checksum"] == hashlib.md5(data).hexdigest()
    assert (image["os_hash_algo"], image["os_hash_value"]) == ("sha512", hashlib.sha512(data).hexdigest())
    assert image_api.stored_files() == [image["id"]]
    whole = client.get(f"/v2/images/{image['id']}/file")
    assert whole.status_code == 200 and whole.content == data
    assert whole.headers["Content-MD5"] == image["checksum"]
    assert whole.headers["Content-Type"] == "application/octet-stream"
    assert int(whole.headers["Content-Length"]) == len(data)
    part = client.get(f"/v2/images/{image['id']}/file", headers={"Range": "bytes=100-199"})
    assert part.status_code == 206 and part.content == data[100:200]
    assert part.headers["Content-Range"] == f"bytes 100-199/{len(data)}"
    tail = client.get(f"/v2/images/{image['id']}/file", headers={"Range": "bytes=-10"})
    assert tail.content == data[-10:]
    assert client.get(f"/v2/images/{image['id']}/file", headers={"Range": "bytes=0-1,5-6"}).status_code == 400
    unsatisfiable = client.get(f"/v2/images/{image['id']}/file", headers={"Range": f"bytes={len(data)}-"})
    assert unsatisfiable.status_code == 416
    assert "Invalid start position in Range header." in unsatisfiable.json()["message"]
    assert client.put(f"/v2/images/{image['id']}/file", data=b"x", headers=OCTET).status_code == 409
    reader = image_api.client(ALICE, roles="reader")
    assert reader.get(f"/v2/images/{image['id']}/file").status_code == 403
    queued = create(client)
    assert client.get(f"/v2/images/{queued['id']}/file").status_code == 204


def test_upload_refusals_leave_the_image_queued_with_no_data(image_api: ImageServer) -> None:
    client = image_api.client(ALICE)
    image = create(client)
    path = f"/v2/images/{image['id']}/file"
    wrong_type = client.put(path, data=b"x", headers={"Content-Type": "application/json"})
    assert wrong_type.status_code == 415
    assert "Invalid content type application/json" in wrong_type.json()["message"]
    mismatch = upload(client, image["id"], b"x" * 10, **{"x-openstack-image-size": "5"})
    assert mismatch.status_code == 400
    assert mismatch.json()["message"].startswith("Size exceeds: expected 5 bytes, got")
    bad_md5 = upload(client, image["id"], b"abc", **{"Content-MD5": "0" * 32})
    assert bad_md5.status_code == 400
    good_md5 = hashlib.md5(b"abc").hexdigest()
    assert client.get(f"/v2/images/{image['id']}").json()["status"] == "queued"
    assert image_api.stored_files() == []
    no_format = create(client, disk_format=None, container_format=None)
    refused = upload(client, no_format["id"], b"x")
    assert refused.status_code == 400
    assert "Properties disk_format, container_format must be set prior to saving data." in refused.json()["message"]
    assert upload(client, image["id"], b"abc", **{"Content-MD5": good_md5}).status_code == 204


def test_image_size_cap_and_storage_quota(image_server: ImageServer) -> None:
    image_server.reset()
    conf = image_server.conf
    client = image_server.client(ALICE)
    conf.set_override("image_size_cap", 1000)
    conf.set_override("user_storage_quota", "1500B")
    try:
        image = create(client)
        too_big = upload(client, image["id"], b"x" * 1001)
        assert too_big.status_code == 413
        assert "The incoming image is too large: The provided image is too large." in too_big.json()["message"]
        first = active(client, b"x" * 1000)
        assert first["size"] == 1000
        over = upload(client, image["id"], b"x" * 600)
        assert over.status_code == 413
        assert "Image exceeds the storage quota: The size of the data 600 will exceed the limit. 500 bytes " \
               "remaining." in over.json()["message"]
        assert client.get(f"/v2/images/{image['id']}").json()["status"] == "queued"
        assert image_server.stored_files() == [first["id"]]
    finally:
        conf.clear_override("image_size_cap")
        conf.clear_override("user_storage_quota")


def test_project_limits(image_server: ImageServer) -> None:
    image_server.reset()
    conf = image_server.conf
    client = image_server.client(ALICE)
    conf.set_override("image_count_total", 2, group="image_limits")
    try:
        create(client)
        create(client)
        refused = client.post("/v2/images", json={})
        assert refused.status_code == 413
        assert (f"Project {ALICE} is over a limit for [Resource image_count_total is over limit of 2 due to "
                "current usage 2 and delta 1]") in refused.json()["message"]
        usage = client.get("/v2/info/usage").json()["usage"]
        assert usage["image_count_total"] == {"usage": 2, "limit": 2}
        assert image_server.client("someone-else").post("/v2/images", json={}).status_code == 201
    finally:
        conf.clear_override("image_count_total", group="image_limits")
    assert client.get("/v2/info/usage").json() == {"usage": {}}


@pytest.fixture
def disk_images(tmp_path: Path) -> dict[str, bytes]:
    def made(name: str, *args: str) -> bytes:
        target = tmp_path / name
        _qemu_img("create", *args, str(target))
        return target.read_bytes()

    base = tmp_path / "base.raw"
    base.write_bytes(b"\0" * 65536)
    return {
        "qcow2": made("plain.qcow2", "-f", "qcow2", "-o", "size=10M"),
        "backing": made("backed.qcow2", "-f", "qcow2", "-b", str(base), "-F", "raw", "-o", "size=10M"),
        "data_file": made("external.qcow2", "-f", "qcow2", "-o", f"data_file={tmp_path / 'data.raw'},size=1M"),
        "vmdk": made("sparse.vmdk", "-f", "vmdk", "-o", "size=10M,subformat=monolithicSparse"),
    }


def test_format_inspection(image_api: ImageServer, disk_images: dict[str, bytes]) -> None:
    client = image_api.client(ALICE)
    qcow2 = active(client, disk_images["qcow2"], disk_format="qcow2")
    assert (qcow2["status"], qcow2["virtual_size"]) == ("active", 10 * 1024 * 1024)
    assert active(client, disk_images["vmdk"], disk_format="vmdk")["virtual_size"] == 10 * 1024 * 1024
    as_raw = active(client, disk_images["qcow2"], disk_format="raw")
    assert as_raw["virtual_size"] == len(disk_images["qcow2"])
    refusals = [
        (b"\0" * 4096, "qcow2", "Image disk_format qcow2 does not match stream data raw"),
        (disk_images["qcow2"], "vmdk", "Image disk_format vmdk does not match stream data qcow2"),
        (disk_images["backing"], "qcow2", "Image failed safety checks"),
        (disk_images["backing"], "raw", "Image failed safety checks"),
        (disk_images["data_file"], "qcow2", "Image failed safety checks"),
    ]
    kept = set(image_api.stored_files())
    for data, disk_format, message in refusals:
        image = create(client, disk_format=disk_format)
        response = upload(client, image["id"], data)
        assert response.status_code == 415, (disk_format, message)
        assert message in response.json()["message"]
        after = client.get(f"/v2/images/{image['id']}").json()
        assert (after["status"], after["checksum"], after["size"]) == ("queued", None, None)
        # Nothing of a refused image is kept, so the next upload can succeed.
        assert set(image_api.stored_files()) == kept
    retry = create(client, disk_format="qcow2")
    assert upload(client, retry["id"], b"\0" * 4096).status_code == 415
    assert upload(client, retry["id"], disk_images["qcow2"]).status_code == 204
    # Only bare containers are inspected, as upstream.
    assert active(client, disk_images["backing"], disk_format="qcow2", container_format="ovf")["virtual_size"] is None


def _raw_upload(url: str, path: str, declared: int, sent: bytes, token: str) -> None:
    """Send an upload's head and part of its body, then drop the connection."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as sock:
        head = (f"PUT {path} HTTP/1.1\r\nHost: {host}\r\nX-Auth-Token: {token}\r\nX-Roles: member,reader\r\n"
                f"Content-Type: application/octet-stream\r\nContent-Length: {declared}\r\n\r\n")
        sock.sendall(head.encode() + sent)
        time.sleep(0.2)


def test_a_dropped_upload_leaves_the_image_queued_and_no_data(image_api: ImageServer) -> None:
    client = image_api.client(ALICE)
    image = create(client)
    _raw_upload(image_api.url, f"/v2/images/{image['id']}/file", 1_000_000, b"x" * 50_000, f"alice:{ALICE}")
    deadline = time.monotonic() + 30
    while client.get(f"/v2/images/{image['id']}").json()["status"] != "queued" and time.monotonic() < deadline:
        time.sleep(0.1)
    assert client.get(f"/v2/images/{image['id']}").json()["status"] == "queued"
    assert image_api.stored_files() == []
    assert upload(client, image["id"], b"y" * 100).status_code == 204


def _set_lease(image_api: ImageServer, image_id: str, status: str, expires: datetime.datetime) -> None:
    with image_api.state.db.engine.begin() as conn:
        conn.execute(sa.update(images_table).where(images_table.c.id == image_id)
                     .values(status=status, lease_token="dead-writer", lease_expires=expires))


def test_a_writer_that_died_is_recovered(image_api: ImageServer) -> None:
    """A process killed mid-upload leaves a half-written file and a lease; the lease's expiry cleans up."""
    client = image_api.client(ALICE)
    saving, staging = create(client), create(client)
    image_api.datadir.mkdir(exist_ok=True)
    (image_api.datadir / saving["id"]).write_bytes(b"half")
    image_api.staging.mkdir(exist_ok=True)
    (image_api.staging / staging["id"]).write_bytes(b"half")
    past = datetime.datetime.now(datetime.UTC).replace(tzinfo=None) - datetime.timedelta(seconds=5)
    future = past + datetime.timedelta(hours=1)
    _set_lease(image_api, saving["id"], "saving", past)
    _set_lease(image_api, staging["id"], "uploading", past)
    alive = create(client)
    _set_lease(image_api, alive["id"], "saving", future)
    state = image_api.state
    assert recover_expired(state.db, state.store, state.staging) == 2
    assert client.get(f"/v2/images/{saving['id']}").json()["status"] == "queued"
    assert client.get(f"/v2/images/{staging['id']}").json()["status"] == "queued"
    assert client.get(f"/v2/images/{alive['id']}").json()["status"] == "saving"
    assert image_api.stored_files() == [] and image_api.staged_files() == []
    assert upload(client, saving["id"], b"z" * 10).status_code == 204


def test_deleting_an_image_deletes_its_data(image_api: ImageServer) -> None:
    client = image_api.client(ALICE)
    image: dict[str, Any] = active(client, b"data" * 100)
    assert image_api.stored_files() == [image["id"]]
    assert client.delete(f"/v2/images/{image['id']}").status_code == 204
    assert image_api.stored_files() == []
    assert client.delete(f"/v2/images/{image['id']}").json()["message"].startswith(
        f"Failed to find image {image['id']} to delete")


def test_recovery_never_takes_a_lease_its_writer_renewed(image_api: ImageServer) -> None:
    from corral.image.data import LeaseLost, Writer
    from corral.image.db import images as image_db

    client = image_api.client(ALICE)
    image = create(client)
    past = datetime.datetime.now(datetime.UTC).replace(tzinfo=None) - datetime.timedelta(seconds=5)
    _set_lease(image_api, image["id"], "saving", past)
    db = image_api.state.db
    with db.read() as conn:
        (seen,) = image_db.expired_leases(conn, datetime.datetime.now(datetime.UTC).replace(tzinfo=None))
    # The writer renews after recovery read the list, before it acts.
    future = past + datetime.timedelta(hours=1)
    assert db.write(image_db.renew_lease, image["id"], "dead-writer", future)
    assert not db.write(image_db.claim_expired, image["id"], seen["lease_token"], "recovery",
                        datetime.datetime.now(datetime.UTC).replace(tzinfo=None))
    # A writer whose lease was taken over stops at its next renewal.
    _set_lease(image_api, image["id"], "saving", future)
    with db.engine.begin() as conn:
        conn.execute(sa.update(images_table).where(images_table.c.id == image["id"]).values(lease_token="someone"))
    writer = Writer(db, image_api.state.store, image_api.state.staging, image_api.conf)
    with pytest.raises(LeaseLost):
        writer._renew(image["id"], "dead-writer")()
