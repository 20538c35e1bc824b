"""Failed builds rescheduled onto alternates, and deletes carried out by the host, with the fake driver.

Two compute hosts in cell1 (the scheduler's alternates stay in the
chosen host's cell). The bare metal side of both is in
test_ironic_driver.py; here the fake driver's guests stand in for nodes.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from corral.compute.virt.fake import FakeDriver
from tests.compute.conftest import ComputeServer

ADMIN_VERSION = "2.73"


@pytest.fixture
def pair(compute: ComputeServer) -> ComputeServer:
    """Compute hosts host-a and host-b, both in cell1."""
    compute.setup_cloud(hosts={"host-a": ("cell1", frozenset()), "host-b": ("cell1", frozenset())})
    return compute


@pytest.fixture
def host_deletes(pair: ComputeServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[ComputeServer]:
    """The fake driver's guests deleted as bare metal ones are: by their host, destroy first."""
    monkeypatch.setattr(FakeDriver, "destroy_before_delete", True)
    yield pair


def _show(cloud: ComputeServer, server: str) -> Any:
    return cloud.client(ADMIN_VERSION).get(f"/v2.1/servers/{server}")


def _create_events(cloud: ComputeServer, server: str) -> list[tuple[str, str, str]]:
    client = cloud.client(ADMIN_VERSION)
    actions = client.get(f"/v2.1/servers/{server}/os-instance-actions").json()["instanceActions"]
    create = next(a for a in actions if a["action"] == "create")
    events = client.get(f"/v2.1/servers/{server}/os-instance-actions/{create['request_id']}").json()
    return [(e["event"], e["result"], e["host"]) for e in events["instanceAction"]["events"]]


def test_a_failed_build_is_rescheduled_to_the_alternate_host(pair: ComputeServer) -> None:
    server = pair.boot()
    first = _show(pair, server).json()["server"]["OS-EXT-SRV-ATTR:host"]
    other = ({"host-a", "host-b"} - {first}).pop()
    pair.managers[first].driver.fail_next("spawn")
    pair.run_computes()
    pair.run_computes()
    shown = _show(pair, server).json()["server"]
    assert (shown["status"], shown["OS-EXT-SRV-ATTR:host"], "fault" in shown) == ("ACTIVE", other, False)
    assert list(pair.scheduler.allocations_of(server)) == [pair.managers[other].node["uuid"]]
    assert server not in pair.managers[first].driver.guests
    assert sorted(_create_events(pair, server)) == sorted([
        ("compute__do_build_and_run_instance", "Error", first),
        ("compute__do_build_and_run_instance", "Success", other)])


def test_without_retries_a_failed_build_keeps_its_own_fault(pair: ComputeServer) -> None:
    pair.conf.set_override("max_attempts", 1, group="scheduler")
    try:
        server = pair.boot()
    finally:
        pair.conf.clear_override("max_attempts", group="scheduler")
    for manager in pair.managers.values():
        manager.driver.fail_next("spawn")
    pair.run_computes()
    shown = _show(pair, server).json()["server"]
    assert (shown["status"], shown["fault"]["message"]) == ("ERROR", "Fake driver failed to spawn.")
    assert pair.scheduler.allocations_of(server) == {}


def test_a_deleted_server_keeps_its_claim_until_its_host_destroyed_it(host_deletes: ComputeServer) -> None:
    cloud = host_deletes
    server = cloud.boot()
    cloud.run_computes()
    assert cloud.client(ADMIN_VERSION).delete(f"/v2.1/servers/{server}").status_code == 204
    shown = _show(cloud, server).json()["server"]
    assert (shown["status"], shown["OS-EXT-STS:task_state"]) == ("ACTIVE", "deleting")
    assert cloud.scheduler.allocations_of(server) != {}
    manager = cloud.managers[shown["OS-EXT-SRV-ATTR:host"]]
    # The host cannot destroy it: ERROR with the fault, and the claim stays.
    manager.driver.fail_next("destroy")
    cloud.run_computes()
    shown = _show(cloud, server).json()["server"]
    assert (shown["status"], shown["OS-EXT-STS:task_state"], shown["fault"]["message"]) == (
        "ERROR", None, "Fake driver failed to destroy.")
    assert cloud.scheduler.allocations_of(server) != {}
    assert cloud.client(ADMIN_VERSION).delete(f"/v2.1/servers/{server}").status_code == 204
    cloud.run_computes()
    assert _show(cloud, server).status_code == 404
    assert cloud.scheduler.allocations_of(server) == {} and server not in manager.driver.guests


def test_a_server_whose_host_is_down_or_unset_is_deleted_at_once(host_deletes: ComputeServer) -> None:
    cloud = host_deletes
    admin = cloud.client(ADMIN_VERSION)
    on_host = cloud.boot(name="on-host")
    cloud.run_computes()
    for manager in cloud.managers.values():
        manager.driver.fail_next("spawn", RuntimeError("broken"))
    # No host is left to it once both have failed: ERROR, on no host.
    failed = cloud.boot(name="failed")
    cloud.run_computes()
    cloud.run_computes()
    assert _show(cloud, failed).json()["server"]["OS-EXT-SRV-ATTR:host"] is None
    assert admin.delete(f"/v2.1/servers/{failed}").status_code == 204
    assert _show(cloud, failed).status_code == 404
    # Its compute service down: deleted at once with its claim (the host reaps the guest later).
    host = _show(cloud, on_host).json()["server"]["OS-EXT-SRV-ATTR:host"]
    service = next(s for s in admin.get("/v2.1/os-services").json()["services"] if s["host"] == host)
    assert admin.put(f"/v2.1/os-services/{service['id']}", json={"forced_down": True}).status_code == 200
    assert admin.delete(f"/v2.1/servers/{on_host}").status_code == 204
    assert _show(cloud, on_host).status_code == 404
    assert cloud.scheduler.allocations_of(on_host) == {}
