"""os-instance-actions over HTTP, the power state sync, and driver failures as upstream leaves them."""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from typing import Any

import pytest

from corral.compute.virt.driver import BuildAbortException, VirtDriverError
from tests.compute.conftest import ComputeServer

USER_A = "user-a:project-a"
USER_B = "user-b:project-b"


def _act(cloud: ComputeServer, server_id: str, body: dict[str, Any], token: str = USER_A) -> None:
    resp = cloud.client("2.73", token=token).post(f"/v2.1/servers/{server_id}/action", json=body)
    assert resp.status_code in (200, 202), resp.text


def _actions(cloud: ComputeServer, server_id: str, version: str = "2.73", token: str = USER_A,
             query: str = "") -> Any:
    return cloud.client(version, token=token).get(f"/v2.1/servers/{server_id}/os-instance-actions{query}")


def _action(cloud: ComputeServer, server_id: str, request_id: str, version: str = "2.73",
            token: str = USER_A) -> dict[str, Any]:
    resp = cloud.client(version, token=token).get(f"/v2.1/servers/{server_id}/os-instance-actions/{request_id}")
    assert resp.status_code == 200, resp.text
    return resp.json()["instanceAction"]  # type: ignore[no-any-return]


def _manager(cloud: ComputeServer, server_id: str) -> Any:
    host = cloud.client("2.73").get(f"/v2.1/servers/{server_id}").json()["server"]["OS-EXT-SRV-ATTR:host"]
    return cloud.managers[host]


def _timestamp(value: str) -> datetime.datetime:
    return datetime.datetime.strptime(value, "%Y-%m-%dT%H:%M:%S.%f")


def test_actions_recorded_with_events(cloud: ComputeServer) -> None:
    server = cloud.boot()
    cloud.run_computes()
    for body in ({"os-stop": None}, {"os-start": None}, {"reboot": {"type": "SOFT"}},
                 {"rebuild": {"imageRef": "70a599e0-31e7-49b7-b260-868f441e862b"}}, {"rescue": None},
                 {"unrescue": None}, {"lock": None}, {"unlock": None}):
        _act(cloud, server, body)
        cloud.run_computes()
    listed = _actions(cloud, server).json()["instanceActions"]
    assert [a["action"] for a in listed] == [
        "unlock", "lock", "unrescue", "rescue", "rebuild", "reboot", "start", "stop", "create"]
    first = listed[0]
    assert set(first) == {"action", "instance_uuid", "request_id", "user_id", "project_id", "start_time",
                          "message", "updated_at"}
    assert (first["instance_uuid"], first["user_id"], first["project_id"], first["message"]) == (
        server, "user-a", "project-a", None)
    assert first["request_id"].startswith("req-")
    _timestamp(first["start_time"])
    # The owner sees events without tracebacks or hosts (2.51), and their hashed host (2.62).
    stop = _action(cloud, server, listed[-2]["request_id"])
    assert [e["event"] for e in stop["events"]] == ["compute_stop_instance"]
    event = stop["events"][0]
    assert set(event) == {"event", "start_time", "finish_time", "result", "hostId"}
    assert event["result"] == "Success" and _timestamp(event["finish_time"]) >= _timestamp(event["start_time"])
    assert len(event["hostId"]) == 56
    admin = _action(cloud, server, listed[-2]["request_id"], token="admin")["events"][0]
    assert admin["host"] == _manager(cloud, server).host and admin["traceback"] is None
    assert "host" not in _action(cloud, server, listed[-2]["request_id"], version="2.61", token="admin")["events"][0]
    assert "events" not in _action(cloud, server, listed[-2]["request_id"], version="2.50")
    assert "updated_at" not in _action(cloud, server, listed[-2]["request_id"], version="2.57")
    lock = _action(cloud, server, listed[1]["request_id"])
    assert [e["event"] for e in lock["events"]] == ["api_lock"] and lock["events"][0]["hostId"] == ""
    create = _action(cloud, server, listed[-1]["request_id"])
    assert [e["event"] for e in create["events"]] == ["compute__do_build_and_run_instance"]
    names = {a["action"]: [e["event"] for e in _action(cloud, server, a["request_id"])["events"]] for a in listed}
    assert names["rebuild"] == ["compute_rebuild_instance"] and names["rescue"] == ["compute_rescue_instance"]
    assert names["reboot"] == ["compute_reboot_instance"] and names["unrescue"] == ["compute_unrescue_instance"]


def test_paging_changes_since_and_deleted_servers(cloud: ComputeServer) -> None:
    server = cloud.boot()
    cloud.run_computes()
    _act(cloud, server, {"lock": None})
    _act(cloud, server, {"unlock": None})
    page = _actions(cloud, server, query="?limit=1").json()
    assert [a["action"] for a in page["instanceActions"]] == ["unlock"]
    marker = page["instanceActions"][0]["request_id"]
    assert page["links"] == [{"rel": "next", "href": (
        f"{cloud.url}/v2.1/servers/{server}/os-instance-actions?limit=1&marker={marker}")}]
    second = _actions(cloud, server, query=f"?limit=2&marker={marker}").json()
    assert [a["action"] for a in second["instanceActions"]] == ["lock", "create"] and "links" in second
    bad = _actions(cloud, server, query="?marker=req-nope")
    assert bad.status_code == 400 and bad.json()["badRequest"]["message"] == "Marker req-nope could not be found."
    future = _actions(cloud, server, query="?changes-since=2999-01-01T00:00:00Z").json()
    assert future["instanceActions"] == []
    assert _actions(cloud, server, query="?changes-since=nonsense").status_code == 400
    unexpected = _actions(cloud, server, query="?sort=x")
    assert unexpected.status_code == 400
    assert _actions(cloud, server, version="2.57", query="?sort=x").status_code == 200
    assert "links" not in _actions(cloud, server, version="2.57", query="?limit=1").json()
    before = _actions(cloud, server, version="2.65", query="?changes-before=2999-01-01T00:00:00Z")
    assert before.status_code == 400
    # Other projects see nothing; deleted servers' actions from 2.21.
    assert _actions(cloud, server, token=USER_B).status_code == 404
    assert cloud.client("2.73", token=USER_A).delete(f"/v2.1/servers/{server}").status_code == 204
    cloud.run_computes()
    assert _actions(cloud, server, version="2.20").status_code == 404
    listed = _actions(cloud, server, version="2.21").json()["instanceActions"]
    assert [a["action"] for a in listed] == ["delete", "unlock", "lock", "create"]
    delete = _action(cloud, server, listed[0]["request_id"], version="2.21", token="admin")
    assert [(e["event"], e["result"]) for e in delete["events"]] == [("compute_terminate_instance", "Success")]
    assert server not in _manager_guests(cloud)
    missing = cloud.client("2.73").get(f"/v2.1/servers/{server}/os-instance-actions/req-nope")
    assert missing.status_code == 404
    assert missing.json()["itemNotFound"]["message"] == "Action req-nope not found"


def _manager_guests(cloud: ComputeServer) -> set[str]:
    return {uuid for manager in cloud.managers.values() for uuid in manager.driver.guests}


@pytest.fixture
def power_sync(cloud: ComputeServer) -> Iterator[ComputeServer]:
    """The power state sync on every compute pass."""
    cloud.conf.set_override("sync_power_state_interval", 0)
    yield cloud
    cloud.conf.clear_override("sync_power_state_interval")


def test_guest_powered_off_behind_computes_back_becomes_shutoff(power_sync: ComputeServer) -> None:
    cloud = power_sync
    server = cloud.boot()
    cloud.run_computes()
    manager = _manager(cloud, server)
    manager.driver.set_power_state(server, 4)
    for _ in range(3):
        cloud.run_computes()
        shown = cloud.client("2.73").get(f"/v2.1/servers/{server}").json()["server"]
        if shown["status"] == "SHUTOFF":
            break
    assert (shown["status"], shown["OS-EXT-STS:vm_state"], shown["OS-EXT-STS:power_state"]) == ("SHUTOFF", "stopped", 4)
    listed = _actions(cloud, server, token="admin").json()["instanceActions"]
    assert listed[0]["action"] == "stop" and listed[0]["user_id"] is None and listed[0]["project_id"] is None
    events = _action(cloud, server, listed[0]["request_id"], token=USER_A)["events"]
    assert [(e["event"], e["result"]) for e in events] == [("compute_stop_instance", "Success")]
    # A stopped server whose guest runs again is stopped again.
    manager.driver.set_power_state(server, 1)
    cloud.run_computes()
    cloud.run_computes()
    assert manager.driver.guests[server] == 4
    assert cloud.client("2.73").get(f"/v2.1/servers/{server}").json()["server"]["status"] == "SHUTOFF"


def test_power_sync_waits_for_its_interval(cloud: ComputeServer) -> None:
    server = cloud.boot()
    cloud.run_computes()
    _manager(cloud, server).driver.set_power_state(server, 4)
    cloud.run_computes()
    shown = cloud.client("2.73").get(f"/v2.1/servers/{server}").json()["server"]
    assert (shown["status"], shown["OS-EXT-STS:power_state"]) == ("ACTIVE", 1)


def test_failing_driver_actions(cloud: ComputeServer) -> None:
    server = cloud.boot()
    cloud.run_computes()
    driver = _manager(cloud, server).driver
    # A failed stop: the server stays ACTIVE, its task cleared, the event an error.
    driver.fail_next("power_off")
    _act(cloud, server, {"os-stop": None})
    cloud.run_computes()
    shown = cloud.client("2.73", token=USER_A).get(f"/v2.1/servers/{server}").json()["server"]
    assert (shown["status"], shown["OS-EXT-STS:task_state"]) == ("ACTIVE", None) and "fault" not in shown
    stop = _actions(cloud, server).json()["instanceActions"][0]
    assert (stop["action"], stop["message"]) == ("stop", "Error")
    admin_events = _action(cloud, server, stop["request_id"], token="admin")["events"]
    assert admin_events[0]["result"] == "Error"
    assert "VirtDriverError: Fake driver failed to power_off." in admin_events[0]["traceback"]
    # A failed rebuild: ERROR with the driver's message as its fault.
    driver.fail_next("rebuild", VirtDriverError("Deploy failed on the node."))
    _act(cloud, server, {"rebuild": {"imageRef": "70a599e0-31e7-49b7-b260-868f441e862b"}})
    cloud.run_computes()
    shown = cloud.client("2.73", token=USER_A).get(f"/v2.1/servers/{server}").json()["server"]
    assert (shown["status"], shown["OS-EXT-STS:task_state"]) == ("ERROR", None)
    assert shown["fault"]["code"] == 500 and shown["fault"]["message"] == "Deploy failed on the node."
    assert "details" not in shown["fault"]
    admin_fault = cloud.client("2.73").get(f"/v2.1/servers/{server}").json()["server"]["fault"]
    assert "Deploy failed on the node." in admin_fault["details"]
    rebuild = _actions(cloud, server).json()["instanceActions"][0]
    assert (rebuild["action"], rebuild["message"]) == ("rebuild", "Error")
    events = _action(cloud, server, rebuild["request_id"])["events"]
    assert [(e["event"], e["result"]) for e in events] == [("compute_rebuild_instance", "Error")]
    # From ERROR a rebuild may try again.
    _act(cloud, server, {"rebuild": {"imageRef": "70a599e0-31e7-49b7-b260-868f441e862b"}})
    cloud.run_computes()
    assert cloud.client("2.73").get(f"/v2.1/servers/{server}").json()["server"]["status"] == "ACTIVE"


def test_failing_spawn_and_rescue(cloud: ComputeServer) -> None:
    for manager in cloud.managers.values():
        manager.driver.fail_next("spawn", RuntimeError("no power"))
    server = cloud.boot()
    cloud.run_computes()
    shown = cloud.client("2.73").get(f"/v2.1/servers/{server}").json()["server"]
    # Each cell has one host: no alternate to reschedule to, as upstream says it.
    assert (shown["status"], shown["fault"]["message"], shown["OS-EXT-SRV-ATTR:host"]) == (
        "ERROR", "Exceeded maximum number of retries. Exhausted all hosts available for retrying build "
        f"failures for instance {server}.", None)
    create = _actions(cloud, server).json()["instanceActions"][0]
    assert create["message"] == "Error"
    events = _action(cloud, server, create["request_id"], token="admin")["events"]
    assert [(e["event"], e["result"]) for e in events] == [("compute__do_build_and_run_instance", "Error")]
    assert "RuntimeError: no power" in events[0]["traceback"]
    # A build abort is not rescheduled: its own message is the fault.
    for manager in cloud.managers.values():
        manager.driver.fail_next("spawn", BuildAbortException("x", "bad image"))
    aborted = cloud.boot(name="aborted")
    cloud.run_computes()
    shown = cloud.client("2.73").get(f"/v2.1/servers/{aborted}").json()["server"]
    assert (shown["status"], shown["fault"]["message"]) == ("ERROR", "Build of instance x aborted: bad image")
    other = cloud.boot(name="other")
    for manager in cloud.managers.values():
        manager.driver.calls.clear()
        manager.driver._failures.clear()
    cloud.run_computes()
    _manager(cloud, other).driver.fail_next("rescue")
    _act(cloud, other, {"rescue": None})
    cloud.run_computes()
    shown = cloud.client("2.73").get(f"/v2.1/servers/{other}").json()["server"]
    assert shown["status"] == "ERROR"
    assert shown["fault"]["message"] == (
        f"Instance {other} cannot be rescued: Driver Error: Fake driver failed to rescue.")
