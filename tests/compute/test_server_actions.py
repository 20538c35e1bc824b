"""Server actions over HTTP: the task states seen through GET, the compute service's work, the refusals."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from corral.compute.db import cell_queries as cq
from tests.compute.conftest import IMAGE, ComputeServer
from tests.image.conftest import active

USER_A = "user-a:project-a"
USER_B = "user-b:project-b"


@pytest.fixture
def server(cloud: ComputeServer) -> str:
    """An ACTIVE server of project-a."""
    server_id = cloud.boot()
    cloud.run_computes()
    assert _show(cloud, server_id)["status"] == "ACTIVE"
    return server_id


def _show(cloud: ComputeServer, server_id: str, version: str = "2.73", token: str = "admin") -> dict[str, Any]:
    resp = cloud.client(version, token=token).get(f"/v2.1/servers/{server_id}")
    assert resp.status_code == 200, resp.text
    return resp.json()["server"]  # type: ignore[no-any-return]


def _act(cloud: ComputeServer, server_id: str, body: dict[str, Any], version: str = "2.73",
         token: str = USER_A) -> Any:
    return cloud.client(version, token=token).post(f"/v2.1/servers/{server_id}/action", json=body)


def _driver_calls(cloud: ComputeServer, server_id: str) -> list[str]:
    return [method for manager in cloud.managers.values() for method, uuid, _args in manager.driver.calls
            if uuid == server_id]


def _conflict(resp: Any) -> str:
    assert resp.status_code == 409, resp.text
    return str(resp.json()["conflictingRequest"]["message"])


def test_a_server_listed_while_it_was_spawning_is_built_once(cloud: ComputeServer) -> None:
    server_id = cloud.boot()
    # What a compute pass lists just before a build ends elsewhere: the server still spawning.
    listed = {}
    for manager in cloud.managers.values():
        with manager.cell_db.read() as conn:
            listed.update({row["uuid"]: (manager, row) for row in cq.host_instances(conn, manager.host)})
    manager, stale = listed[server_id]
    assert stale["task_state"] == "spawning"
    cloud.run_computes()
    assert _show(cloud, server_id)["status"] == "ACTIVE"
    # That listing comes round after the build has left the busy set: the server is not spawned again.
    manager._build_if_spawning(stale)
    assert _driver_calls(cloud, server_id) == ["spawn"]
    assert _show(cloud, server_id)["status"] == "ACTIVE"


def test_stop_then_start(cloud: ComputeServer, server: str) -> None:
    resp = _act(cloud, server, {"os-stop": None})
    assert resp.status_code == 202 and resp.text == ""
    shown = _show(cloud, server)
    assert (shown["status"], shown["OS-EXT-STS:task_state"]) == ("ACTIVE", "powering-off")
    # A task in progress refuses the next action.
    assert _conflict(_act(cloud, server, {"os-stop": None})) == (
        f"Cannot 'stop' instance {server} while it is in task_state powering-off")
    cloud.run_computes()
    shown = _show(cloud, server)
    assert (shown["status"], shown["OS-EXT-STS:vm_state"], shown["OS-EXT-STS:task_state"],
            shown["OS-EXT-STS:power_state"]) == ("SHUTOFF", "stopped", None, 4)
    assert _conflict(_act(cloud, server, {"os-stop": None})) == (
        f"Cannot 'stop' instance {server} while it is in vm_state stopped")
    assert _act(cloud, server, {"os-start": None}).status_code == 202
    assert _show(cloud, server)["OS-EXT-STS:task_state"] == "powering-on"
    cloud.run_computes()
    shown = _show(cloud, server)
    assert (shown["status"], shown["OS-EXT-STS:power_state"]) == ("ACTIVE", 1)
    assert _conflict(_act(cloud, server, {"os-start": None})) == (
        f"Cannot 'start' instance {server} while it is in vm_state active")
    assert _driver_calls(cloud, server) == ["spawn", "power_off", "power_on"]


def test_actions_on_a_building_server_and_bad_bodies(cloud: ComputeServer) -> None:
    server_id = cloud.boot()
    assert _conflict(_act(cloud, server_id, {"reboot": {"type": "SOFT"}})) == (
        f"Cannot 'reboot' instance {server_id} while it is in vm_state building")
    assert _conflict(_act(cloud, server_id, {"os-start": None})) == (
        f"Cannot 'start' instance {server_id} while it is in vm_state building")
    bad = _act(cloud, server_id, {"reboot": {"type": "WARM"}})
    assert bad.status_code == 400 and "'WARM' is not one of" in bad.json()["badRequest"]["message"]
    unknown = _act(cloud, server_id, {"hibernate": None})
    assert unknown.status_code == 400
    assert unknown.json()["badRequest"]["message"] == "There is no such action: hibernate"
    missing = _act(cloud, "8b3d1e9c-0000-4000-8000-000000000000", {"os-stop": None})
    assert missing.status_code == 404
    assert missing.json()["itemNotFound"]["message"] == (
        "Instance 8b3d1e9c-0000-4000-8000-000000000000 could not be found.")


def test_soft_and_hard_reboot(cloud: ComputeServer, server: str) -> None:
    assert _act(cloud, server, {"reboot": {"type": "SOFT"}}).status_code == 202
    assert _show(cloud, server)["status"] == "REBOOT"
    cloud.run_computes()
    assert _show(cloud, server)["status"] == "ACTIVE"
    assert _act(cloud, server, {"reboot": {"type": "hard"}}).status_code == 202
    shown = _show(cloud, server)
    assert (shown["status"], shown["OS-EXT-STS:task_state"]) == ("HARD_REBOOT", "rebooting_hard")
    # A hard reboot may follow a reboot in progress, a soft one may not.
    assert _conflict(_act(cloud, server, {"reboot": {"type": "SOFT"}})) == (
        f"Cannot 'reboot' instance {server} while it is in task_state rebooting_hard")
    assert _act(cloud, server, {"reboot": {"type": "HARD"}}).status_code == 202
    cloud.run_computes()
    assert _show(cloud, server)["status"] == "ACTIVE"
    calls = [args for manager in cloud.managers.values() for method, uuid, args in manager.driver.calls
             if uuid == server and method == "reboot"]
    assert calls == [{"reboot_type": "SOFT"}, {"reboot_type": "HARD"}]
    # Stopped: a soft reboot is refused, a hard one starts the server.
    _act(cloud, server, {"os-stop": None})
    cloud.run_computes()
    assert _conflict(_act(cloud, server, {"reboot": {"type": "SOFT"}})) == (
        f"Cannot 'reboot' instance {server} while it is in vm_state stopped")
    assert _act(cloud, server, {"reboot": {"type": "HARD"}}).status_code == 202
    cloud.run_computes()
    assert _show(cloud, server)["OS-EXT-STS:power_state"] == 1


def test_rebuild_with_another_image(cloud: ComputeServer, server: str) -> None:
    other = active(cloud.images.admin(), name="other", visibility="public")["id"]
    key = cloud.client("2.73", token=USER_A).post("/v2.1/os-keypairs", json={"keypair": {"name": "k"}})
    assert key.status_code == 201, key.text
    resp = _act(cloud, server, {"rebuild": {
        "imageRef": other, "name": "rebuilt", "metadata": {"role": "db"}, "key_name": "k",
        "user_data": "aGVsbG8=", "adminPass": "s3cret",
    }})
    assert resp.status_code == 202, resp.text
    body = resp.json()["server"]
    assert resp.headers["Location"] == body["links"][0]["href"]
    assert body["adminPass"] == "s3cret" and body["user_data"] == "aGVsbG8="
    assert body["name"] == "rebuilt" and body["metadata"] == {"role": "db"} and body["key_name"] == "k"
    assert body["image"]["id"] == other and body["status"] == "REBUILD"
    assert "OS-EXT-STS:vm_state" not in body and "OS-EXT-AZ:availability_zone" not in body
    assert {"locked", "description", "tags", "trusted_image_certificates", "server_groups",
            "locked_reason"} <= set(body)
    cloud.run_computes()
    shown = _show(cloud, server)
    assert (shown["status"], shown["image"]["id"], shown["key_name"]) == ("ACTIVE", other, "k")
    calls = [args for manager in cloud.managers.values() for method, uuid, args in manager.driver.calls
             if uuid == server and method == "rebuild"]
    assert calls[0]["image"] == other and calls[0]["admin_password"] == "s3cret"


def test_rebuild_answer_and_refusals_by_version(cloud: ComputeServer, server: str) -> None:
    old = _act(cloud, server, {"rebuild": {"imageRef": IMAGE, "key_name": None}}, version="2.53")
    assert old.status_code == 400
    assert "('key_name' was unexpected)" in old.json()["badRequest"]["message"]
    body = _act(cloud, server, {"rebuild": {"imageRef": IMAGE}}, version="2.1").json()["server"]
    assert "user_data" not in body and "key_name" not in body and "tags" not in body and "locked" not in body
    cloud.run_computes()
    missing = _act(cloud, server, {"rebuild": {"imageRef": "8b3d1e9c-0000-4000-8000-000000000000"}})
    assert missing.status_code == 400
    assert missing.json()["badRequest"]["message"] == "Cannot find image for rebuild"
    no_key = _act(cloud, server, {"rebuild": {"imageRef": IMAGE, "key_name": "nope"}})
    assert no_key.status_code == 400 and no_key.json()["badRequest"]["message"] == "Invalid key_name provided."
    not_uuid = _act(cloud, server, {"rebuild": {"imageRef": "cirros"}})
    assert not_uuid.status_code == 400 and "is not a 'uuid'" in not_uuid.json()["badRequest"]["message"]
    # Nothing changed by the refusals.
    assert _show(cloud, server)["OS-EXT-STS:task_state"] is None
    cloud.conf.set_override("enable_instance_password", False, group="api")
    try:
        quiet = _act(cloud, server, {"rebuild": {"imageRef": IMAGE}}).json()["server"]
    finally:
        cloud.conf.clear_override("enable_instance_password", group="api")
    assert "adminPass" not in quiet


def test_rescue_and_unrescue(cloud: ComputeServer, server: str) -> None:
    resp = _act(cloud, server, {"rescue": {"adminPass": "pw"}})
    assert resp.status_code == 200 and resp.json() == {"adminPass": "pw"}
    assert _show(cloud, server)["OS-EXT-STS:task_state"] == "rescuing"
    cloud.run_computes()
    assert _show(cloud, server)["status"] == "RESCUE"
    assert _conflict(_act(cloud, server, {"rescue": None})) == (
        f"Cannot 'rescue' instance {server} while it is in vm_state rescued")
    assert _conflict(_act(cloud, server, {"rebuild": {"imageRef": IMAGE}})) == (
        f"Cannot 'rebuild' instance {server} while it is in vm_state rescued")
    assert _conflict(_act(cloud, server, {"os-stop": None})) == (
        f"Cannot 'stop' instance {server} while it is in vm_state rescued")
    assert _conflict(_act(cloud, server, {"createImage": {"name": "x"}})) == (
        f"Cannot 'createImage' instance {server} while it is in vm_state rescued")
    assert _act(cloud, server, {"unrescue": None}).status_code == 202
    cloud.run_computes()
    assert _show(cloud, server)["status"] == "ACTIVE"
    assert _conflict(_act(cloud, server, {"unrescue": None})) == (
        f"Cannot 'unrescue' instance {server} while it is in vm_state active")
    generated = _act(cloud, server, {"rescue": {"rescue_image_ref": IMAGE}})
    assert generated.status_code == 200 and len(generated.json()["adminPass"]) == 12
    cloud.run_computes()
    _act(cloud, server, {"unrescue": None})
    cloud.run_computes()
    unknown = _act(cloud, server, {"rescue": {"rescue_image_ref": "8b3d1e9c-0000-4000-8000-000000000000"}})
    assert unknown.status_code == 400
    assert unknown.json()["badRequest"]["message"] == (
        "Requested rescue image '8b3d1e9c-0000-4000-8000-000000000000' is not supported")


def test_lock_refuses_actions_to_non_admins(cloud: ComputeServer, server: str) -> None:
    assert _act(cloud, server, {"lock": {"locked_reason": "maintenance"}}).status_code == 202
    shown = _show(cloud, server, token=USER_A)
    assert (shown["locked"], shown["locked_reason"]) == (True, "maintenance")
    assert "locked_reason" not in _show(cloud, server, version="2.72")
    old_reason = _act(cloud, server, {"lock": {"locked_reason": "x"}}, version="2.72")
    assert old_reason.status_code == 202  # before 2.73 the body is not looked at
    for body in ({"os-stop": None}, {"reboot": {"type": "HARD"}}, {"rebuild": {"imageRef": IMAGE}},
                 {"rescue": None}):
        assert _conflict(_act(cloud, server, body)) == f"Instance {server} is locked"
    meta = cloud.client("2.73", token=USER_A).post(f"/v2.1/servers/{server}/metadata", json={"metadata": {"a": "b"}})
    assert _conflict(meta) == f"Instance {server} is locked"
    assert _conflict(cloud.client("2.73", token=USER_A).delete(f"/v2.1/servers/{server}")) == (
        f"Instance {server} is locked")
    # Admins act on locked servers.
    assert _act(cloud, server, {"os-stop": None}, token="admin").status_code == 202
    cloud.run_computes()
    assert _act(cloud, server, {"unlock": None}).status_code == 202
    assert _show(cloud, server)["locked"] is False and _show(cloud, server)["locked_reason"] is None
    assert _act(cloud, server, {"os-start": None}).status_code == 202


def test_admin_lock_needs_the_override_to_unlock(cloud: ComputeServer, server: str) -> None:
    assert _act(cloud, server, {"lock": None}, token="admin").status_code == 202
    refused = _act(cloud, server, {"unlock": None})
    assert refused.status_code == 403
    assert refused.json()["forbidden"]["message"] == (
        "Policy doesn't allow os_compute_api:os-lock-server:unlock:unlock_override to be performed.")
    assert _act(cloud, server, {"unlock": None}, token="admin").status_code == 202


def test_other_projects_and_readers(cloud: ComputeServer, server: str) -> None:
    for body in ({"os-stop": None}, {"lock": None}, {"os-getConsoleOutput": {}}):
        resp = _act(cloud, server, body, token=USER_B)
        assert resp.status_code == 404, resp.text
        assert resp.json()["itemNotFound"]["message"] == f"Instance {server} could not be found."
    reader = cloud.client("2.73", token=USER_A).with_headers(X_Roles="reader")
    refused = reader.post(f"/v2.1/servers/{server}/action", json={"os-stop": None})
    assert refused.status_code == 403
    assert refused.json()["forbidden"]["message"] == (
        "Policy doesn't allow os_compute_api:servers:stop to be performed.")
    assert _show(cloud, server)["OS-EXT-STS:task_state"] is None


def test_console_output(cloud: ComputeServer, server: str) -> None:
    whole = _act(cloud, server, {"os-getConsoleOutput": {}})
    assert whole.status_code == 200 and whole.json() == {"output": "FAKE CONSOLE OUTPUT\nANOTHER\nLAST LINE"}
    assert _act(cloud, server, {"os-getConsoleOutput": {"length": 1}}).json() == {"output": "LAST LINE"}
    assert _act(cloud, server, {"os-getConsoleOutput": {"length": "-1"}}).json()["output"].count("\n") == 2
    assert _act(cloud, server, {"os-getConsoleOutput": {"length": 0}}).json() == {"output": ""}
    bad = _act(cloud, server, {"os-getConsoleOutput": {"length": -2}})
    assert bad.status_code == 400


@pytest.fixture
def no_console_log(cloud: ComputeServer) -> Iterator[None]:
    cloud.conf.set_override("console_log", False, group="fake_driver")
    yield
    cloud.conf.clear_override("console_log", group="fake_driver")


def test_console_output_of_a_driver_without_one(cloud: ComputeServer, server: str, no_console_log: None) -> None:
    resp = _act(cloud, server, {"os-getConsoleOutput": {"length": 10}})
    assert resp.status_code == 501
    assert resp.json() == {"notImplemented": {"code": 501, "message": "The requested functionality is not supported."}}


def test_create_image_fails_on_the_compute_service(cloud: ComputeServer, server: str) -> None:
    resp = _act(cloud, server, {"createImage": {"name": "snap", "metadata": {"purpose": "backup"}}})
    assert resp.status_code == 202, resp.text
    image_id = resp.json()["image_id"]
    image = cloud.images.admin().get(f"/v2/images/{image_id}").json()
    assert (image["status"], image["name"], image["image_type"], image["instance_uuid"], image["purpose"]) == (
        "queued", "snap", "snapshot", server, "backup")
    assert _show(cloud, server)["OS-EXT-STS:task_state"] == "image_snapshot_pending"
    cloud.run_computes()
    # The driver cannot snapshot: the image is deleted, the server back to no task, not in ERROR.
    assert cloud.images.admin().get(f"/v2/images/{image_id}").status_code == 404
    shown = _show(cloud, server)
    assert (shown["status"], shown["OS-EXT-STS:task_state"]) == ("ACTIVE", None)
    assert "fault" not in shown
    old = _act(cloud, server, {"createImage": {"name": "snap"}}, version="2.44")
    assert old.status_code == 202 and old.text == ""
    assert old.headers["Location"].startswith(cloud.images.url) and "/images/" in old.headers["Location"]
    cloud.run_computes()
