"""POST /servers: key_name, user_data, config_drive, metadata, availability_zone and hints, on every backend."""

from __future__ import annotations

import base64
import uuid
from typing import Any

import pytest

from corral.compute.db import api_queries as q
from corral.compute.db import cell_queries as cq
from tests.compute.conftest import IMAGE, ComputeServer
from tests.image.conftest import create

USER_A = "user-a:project-a"
PUBLIC_KEY = ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl me@host")


def _boot(cloud: ComputeServer, token: str = USER_A, version: str = "2.73", body: dict[str, Any] | None = None,
          **server: Any) -> Any:
    document = {"server": {"name": "vm", "flavorRef": "1", "imageRef": IMAGE, "networks": "none", **server},
                **(body or {})}
    return cloud.client(version, token=token).post("/v2.1/servers", json=document)


def _instance_row(cloud: ComputeServer, server: str) -> dict[str, Any]:
    with cloud.state.api_db.read() as conn:
        mapping = q.instance_mapping(conn, server)
    cell = cloud.state.cells.by_id(mapping.cell_id)
    with cloud.state.cells.database(cell).read() as conn:
        row = cq.get_instance(conn, server)
    assert row is not None
    return row


def _refusal(resp: Any) -> str:
    assert resp.status_code == 400, resp.text
    return str(resp.json()["badRequest"]["message"])


def test_key_name_records_the_key(cloud: ComputeServer) -> None:
    keypair = {"keypair": {"name": "mykey", "public_key": PUBLIC_KEY}}
    assert cloud.client("2.73", token=USER_A).post("/v2.1/os-keypairs", json=keypair).status_code == 201
    server = _boot(cloud, key_name="mykey").json()["server"]["id"]
    shown = cloud.client("2.73", token=USER_A).get(f"/v2.1/servers/{server}").json()["server"]
    assert shown["key_name"] == "mykey"
    assert _instance_row(cloud, server)["key_data"] == PUBLIC_KEY
    # The key stays with the server when the key pair goes.
    assert cloud.client("2.73", token=USER_A).delete("/v2.1/os-keypairs/mykey").status_code == 204
    assert _instance_row(cloud, server)["key_data"] == PUBLIC_KEY
    listed = cloud.client("2.73").get("/v2.1/servers?all_tenants=1&key_name=mykey").json()["servers"]
    assert [s["id"] for s in listed] == [server]


def test_unknown_or_foreign_key_name(cloud: ComputeServer) -> None:
    keypair = {"keypair": {"name": "theirs", "public_key": PUBLIC_KEY}}
    assert cloud.client("2.73", token="user-b:project-a").post("/v2.1/os-keypairs", json=keypair).status_code == 201
    for name in ("missing", "theirs"):
        assert _refusal(_boot(cloud, key_name=name)) == "Invalid key_name provided."
    assert _refusal(_boot(cloud, key_name=" spaced")) == (
        "An invalid 'name' value was provided. The name must be: printable characters. "
        "Can not start or end with whitespace.")
    assert cloud.client("2.73", token=USER_A).get("/v2.1/servers").json() == {"servers": []}


def test_key_name_is_checked_between_the_image_lookup_and_its_status(cloud: ComputeServer) -> None:
    missing = str(uuid.uuid4())
    assert _refusal(_boot(cloud, imageRef=missing, key_name="nope")) == "Can not find requested image"
    queued = create(cloud.images.client("project-a", user="user-a"), name="queued")
    assert _refusal(_boot(cloud, imageRef=queued["id"], key_name="nope")) == "Invalid key_name provided."


def test_user_data(cloud: ComputeServer) -> None:
    data = base64.b64encode(b"#!/bin/sh\necho hello\n").decode()
    server = _boot(cloud, user_data=data).json()["server"]["id"]
    shown = cloud.client("2.3").get(f"/v2.1/servers/{server}").json()["server"]
    assert shown["OS-EXT-SRV-ATTR:user_data"] == data
    assert _instance_row(cloud, server)["user_data"] == data
    assert _refusal(_boot(cloud, user_data="abc")) == (
        "Invalid input for field/attribute user_data. Value: abc. 'abc' is not a 'base64'")
    too_long = "A" * 65536
    assert _refusal(_boot(cloud, user_data=too_long)).endswith("is too long")
    assert _refusal(_boot(cloud, user_data=None)).startswith("Invalid input for field/attribute user_data.")
    assert len(cloud.client("2.73", token=USER_A).get("/v2.1/servers").json()["servers"]) == 1


@pytest.mark.parametrize(("value", "recorded"), [
    (True, "True"), ("yes", "True"), ("ON", "True"), ("1", "True"), (False, ""), ("no", ""), ("0", ""),
])
def test_config_drive(cloud: ComputeServer, value: Any, recorded: str) -> None:
    server = _boot(cloud, config_drive=value).json()["server"]["id"]
    assert cloud.client("2.73", token=USER_A).get(f"/v2.1/servers/{server}").json()["server"][
        "config_drive"] == recorded


def test_config_drive_refused(cloud: ComputeServer) -> None:
    message = _refusal(_boot(cloud, config_drive="maybe"))
    assert message.startswith("Invalid input for field/attribute config_drive. Value: maybe. 'maybe' is not one of")
    assert cloud.client("2.73", token=USER_A).get("/v2.1/servers").json() == {"servers": []}


def test_metadata_zone_and_hints_are_recorded(cloud: ComputeServer) -> None:
    hints = {"same_host": [], "custom": "anything"}
    server = _boot(cloud, metadata={"role": "web"}, availability_zone="nova",
                   body={"OS-SCH-HNT:scheduler_hints": hints}).json()["server"]["id"]
    shown = cloud.client("2.73", token=USER_A).get(f"/v2.1/servers/{server}").json()["server"]
    assert shown["metadata"] == {"role": "web"}
    assert shown["OS-EXT-AZ:availability_zone"] == "nova"
    with cloud.state.api_db.read() as conn:
        spec = q.request_spec(conn, server)
    assert spec is not None and spec["scheduler_hints"] == hints
    assert _refusal(_boot(cloud, availability_zone="")).startswith(
        "Invalid input for field/attribute availability_zone.")
    assert _refusal(_boot(cloud, availability_zone="elsewhere")) == "The requested availability zone is not available"
    assert _refusal(_boot(cloud, body={"os:scheduler_hints": {"group": "x"}})).startswith(
        "Invalid input for field/attribute group.")
    assert _refusal(_boot(cloud, body={"os:scheduler_hints": "x"})).startswith(
        "Invalid input for field/attribute os:scheduler_hints.")


def test_counts_of_any_length(cloud: ComputeServer) -> None:
    huge = "9" * 5000
    assert _refusal(_boot(cloud, min_count=huge)).endswith(f"{huge} is greater than the maximum of {10**18}")
    assert _refusal(_boot(cloud, min_count="0")) == (
        "Invalid input for field/attribute min_count. Value: 0. 0 is less than the minimum of 1")
    over = _boot(cloud, min_count="3000000000")
    assert over.status_code == 403
    assert over.json()["forbidden"]["message"].startswith("Quota exceeded for cores, instances, ram: Requested ")
    assert cloud.client("2.73", token=USER_A).get("/v2.1/servers").json() == {"servers": []}
