"""Manual cleaning (clean verb from manageable), clean steps listing, abort, pool limits."""

from __future__ import annotations

import threading
import time

import pytest

from corral.core.workers import WorkerPool
from tests.baremetal.support import fault, faultstring, wait_for, wait_for_state
from tests.baremetal.test_nodes import create
from tests.baremetal.test_provisioning import available, manageable, provision

SETTINGS = [{"name": "hyperthreading", "value": "Enabled"}]


def clean(client, steps, ident="n1"):
    return provision(client, ident, "clean", clean_steps=steps)


def actions(node):
    return node["driver_internal_info"].get("fake_actions", [])


def test_manual_clean_runs_steps_in_order_and_returns_to_manageable(baremetal) -> None:
    client = baremetal.client()
    manageable(client)
    steps = [
        {"interface": "bios", "step": "apply_configuration", "args": {"settings": SETTINGS}},
        {"interface": "bios", "step": "factory_reset"},
        {"interface": "bios", "step": "apply_configuration", "args": {"settings": [{"name": "a", "value": "b"}]}},
        {"interface": "firmware", "step": "update", "args": {"settings": [{"component": "bmc"}]}},
    ]
    response = clean(client, steps)
    assert response.status_code == 202
    assert response.headers["Location"] == f"{baremetal.url}/v1/nodes/n1/states"
    node = wait_for_state(client, "n1", "manageable")
    assert actions(node) == ["bios.apply_configuration", "bios.factory_reset", "bios.apply_configuration",
                             "firmware.update"]
    assert node["last_error"] is None
    assert node["clean_step"] == {}
    assert node["target_provision_state"] is None
    assert node["driver_internal_info"]["clean_steps"] is None
    bios = client.get("/v1/nodes/n1/bios").json()["bios"]
    assert [(item["name"], item["value"]) for item in bios] == [("a", "b")]


def test_clean_step_and_steps_are_shown_while_cleaning(baremetal) -> None:
    client = baremetal.client()
    manageable(client)
    baremetal.conf.set_override("bios_delay", 1.5, group="fake")
    try:
        clean(client, [{"interface": "bios", "step": "factory_reset"}])
        node = wait_for(lambda: (n := client.get("/v1/nodes/n1").json())["clean_step"] and n)
        assert node["provision_state"] == "cleaning"
        assert node["target_provision_state"] == "manageable"
        assert node["reservation"] == "test-conductor"
        assert node["clean_step"] == {"interface": "bios", "step": "factory_reset", "abortable": False,
                                      "priority": 0}
        info = node["driver_internal_info"]
        assert info["clean_steps"] == [node["clean_step"]]
        assert info["clean_step_index"] == 0
        assert info["declarative_cleaning"] is True
        # Locked by the running step: every change waits (409), abort included.
        response = provision(client, "n1", "abort")
        assert response.status_code == 409
        assert faultstring(response).startswith(f"Node {node['uuid']} is locked by host test-conductor")
        response = client.patch("/v1/nodes/n1", json=[{"op": "add", "path": "/extra/x", "value": 1}])
        assert response.status_code == 409
    finally:
        baremetal.conf.clear_override("bios_delay", group="fake")
    done = wait_for_state(client, "n1", "manageable")
    assert done["reservation"] is None
    assert "x" not in done["extra"]


def test_clean_request_validation(baremetal) -> None:
    client = baremetal.client()
    node = manageable(client)
    for body in ({"target": "clean"}, {"target": "clean", "clean_steps": []}):
        response = client.put("/v1/nodes/n1/states/provision", json=body)
        assert response.status_code == 400
        assert faultstring(response) == '"clean_steps" is required when setting target provision state to clean'
    response = clean(client, [{"interface": "bogus", "step": "x"}])
    assert response.status_code == 400
    assert faultstring(response).startswith(
        "Invalid clean_steps: 'bogus' is not one of ['vendor', 'power', 'management', 'firmware', 'deploy', "
        "'bios', 'raid']"
    )
    response = clean(client, [{"interface": "bios", "step": "factory_reset", "extra": 1}])
    assert response.status_code == 400
    assert faultstring(response).startswith(
        "Invalid clean_steps: Additional properties are not allowed ('extra' was unexpected)"
    )
    response = clean(client, [{"interface": "bios"}])
    assert response.status_code == 400
    assert "'step' is a required property" in faultstring(response)
    response = clean(client, [{"interface": "bios", "step": "factory_reset", "args": []}])
    assert response.status_code == 400
    # Upstream's keys for child nodes are taken; running a step on them is not something Corral does.
    response = clean(client, [{"interface": "bios", "step": "factory_reset", "execute_on_child_nodes": True}])
    assert response.status_code == 400
    assert faultstring(response) == "Invalid clean_steps: running steps on child nodes is not supported"
    response = provision(client, "n1", "provide", clean_steps=[{"interface": "bios", "step": "factory_reset"}])
    assert response.status_code == 400
    assert faultstring(response) == '"clean_steps" is only valid when setting target provision state to clean'
    old = baremetal.client("1.14")
    response = old.put(f"/v1/nodes/{node['uuid']}/states/provision",
                       json={"target": "clean", "clean_steps": [{"interface": "bios", "step": "factory_reset"}]})
    assert response.status_code == 406
    assert faultstring(response) == "Request not acceptable."
    after = client.get("/v1/nodes/n1").json()
    assert (after["provision_state"], after["last_error"]) == ("manageable", None)
    response = clean(client, [{"interface": "bios", "step": "factory_reset", "execute_on_child_nodes": False,
                               "limit_child_node_execution": []}])
    assert response.status_code == 202
    assert wait_for_state(client, "n1", "manageable")["last_error"] is None


def test_clean_only_from_manageable(baremetal) -> None:
    client = baremetal.client()
    node = available(client)
    response = clean(client, [{"interface": "bios", "step": "factory_reset"}])
    assert response.status_code == 400
    assert faultstring(response) == (
        f'The requested action "clean" can not be performed on node "{node["uuid"]}" while it is in state '
        '"available".'
    )
    assert client.get("/v1/nodes/n1").json()["provision_state"] == "available"


@pytest.mark.parametrize(
    ("step", "message"),
    [
        ({"interface": "bios", "step": "no_such_step"},
         "node does not support this clean step: {'interface': 'bios', 'step': 'no_such_step'}"),
        ({"interface": "raid", "step": "create_configuration"},
         "node does not support this clean step: {'interface': 'raid', 'step': 'create_configuration'}"),
        ({"interface": "bios", "step": "apply_configuration"},
         "clean step {'interface': 'bios', 'step': 'apply_configuration', 'abortable': False, 'priority': 0} "
         "is missing these required arguments: settings (List of BIOS settings, each item needs to contain a "
         "dictionary with name/value pairs)"),
        ({"interface": "vendor", "step": "log_passthrough", "args": {"foo": 1}},
         "clean step {'interface': 'vendor', 'step': 'log_passthrough', 'args': {'foo': 1}, 'abortable': False, "
         "'priority': 1} has these unexpected arguments: foo"),
    ],
)
def test_bad_steps_fail_before_any_step_runs(baremetal, step, message) -> None:
    client = baremetal.client()
    node = manageable(client)
    response = clean(client, [{"interface": "bios", "step": "factory_reset"}, step])
    assert response.status_code == 202
    failed = wait_for_state(client, "n1", "clean failed")
    assert failed["last_error"] == f"Cannot clean node {node['uuid']}: {message}"
    assert failed["target_provision_state"] == "manageable"
    assert actions(failed) == []
    assert failed["clean_step"] == {}


def test_step_rejecting_its_arguments_fails_after_earlier_steps(baremetal) -> None:
    client = baremetal.client()
    node = manageable(client)
    bad = {"interface": "bios", "step": "apply_configuration", "args": {"settings": "not-a-list"}}
    clean(client, [{"interface": "bios", "step": "factory_reset"}, bad,
                   {"interface": "bios", "step": "cache_bios_settings"}])
    failed = wait_for_state(client, "n1", "clean failed")
    assert actions(failed) == ["bios.factory_reset"]
    assert failed["last_error"].startswith(
        f"Node {node['uuid']} failed step {{'interface': 'bios', 'step': 'apply_configuration', "
    )
    assert "Invalid BIOS settings" in failed["last_error"]
    # Recovery from clean failed is manage; provide is refused.
    assert provision(client, "n1", "provide").status_code == 400
    assert provision(client, "n1", "abort").status_code == 400
    assert provision(client, "n1", "manage").status_code == 202
    recovered = wait_for_state(client, "n1", "manageable")
    assert recovered["target_provision_state"] is None


def test_asynchronous_step_waits_then_continues(baremetal) -> None:
    client = baremetal.client()
    manageable(client)
    clean(client, [{"interface": "deploy", "step": "burnin_cpu", "args": {"duration": 0.5}},
                   {"interface": "bios", "step": "factory_reset"}])
    waiting = wait_for_state(client, "n1", "clean wait")
    assert waiting["clean_step"]["step"] == "burnin_cpu"
    assert waiting["reservation"] is None
    done = wait_for_state(client, "n1", "manageable")
    assert actions(done) == ["deploy.burnin_cpu", "bios.factory_reset"]


def test_abort_during_abortable_step(baremetal) -> None:
    client = baremetal.client()
    manageable(client)
    clean(client, [{"interface": "deploy", "step": "burnin_cpu", "args": {"duration": 600}},
                   {"interface": "bios", "step": "factory_reset"}])
    waiting = wait_for_state(client, "n1", "clean wait")
    assert waiting["clean_step"]["abortable"] is True
    response = provision(client, "n1", "abort")
    assert response.status_code == 202
    aborted = wait_for_state(client, "n1", "clean failed")
    assert aborted["last_error"] == "By request, the clean operation was aborted"
    assert actions(aborted) == ["deploy.burnin_cpu", "deploy.burnin_cpu.aborted"]
    assert aborted["clean_step"] == {}


def test_clean_steps_listing(baremetal) -> None:
    client = baremetal.client()
    node = create(client, name="n1")
    response = client.get("/v1/nodes/n1/cleaning/steps")
    assert response.status_code == 202
    assert response.headers["Retry-Request-After"] == "-1"
    assert "not available yet" in response.json()["message"]
    provision(client, "n1", "manage")
    wait_for_state(client, "n1", "manageable")
    steps = client.get("/v1/nodes/n1/cleaning/steps").json()
    assert steps[0] == {"interface": "vendor", "step": "log_passthrough", "priority": 1, "abortable": False,
                        "args": []}
    assert {(s["interface"], s["step"]) for s in steps} == {
        ("vendor", "log_passthrough"), ("bios", "factory_reset"), ("bios", "cache_bios_settings"),
        ("bios", "apply_configuration"), ("firmware", "update"), ("deploy", "burnin_cpu"),
    }
    priorities = [step["priority"] for step in steps]
    assert priorities == sorted(priorities, reverse=True)
    apply = next(step for step in steps if step["step"] == "apply_configuration")
    assert apply["args"] == [{"name": "settings", "description": "List of BIOS settings, each item needs to "
                              "contain a dictionary with name/value pairs", "required": True}]
    automated = client.get("/v1/nodes/n1/cleaning/steps?min_priority=1").json()
    assert [(s["interface"], s["step"]) for s in automated] == [("vendor", "log_passthrough")]
    for bad in ("x", "-1"):
        response = client.get(f"/v1/nodes/n1/cleaning/steps?min_priority={bad}")
        assert response.status_code == 400
        assert fault(response)["faultcode"] == "Client"
    assert baremetal.client("1.14").get(f"/v1/nodes/{node['uuid']}/cleaning/steps").status_code == 404


def test_full_worker_pool_answers_503_and_changes_nothing(baremetal) -> None:
    client = baremetal.client()
    create(client, name="n1")
    conductor = baremetal.conductor
    original = conductor.pool
    release = threading.Event()
    conductor.pool = WorkerPool(1, name="tiny")
    try:
        conductor.pool.submit(release.wait)
        response = provision(client, "n1", "manage")
        assert response.status_code == 503
        assert faultstring(response) == (
            "Requested action cannot be performed due to lack of free conductor workers."
        )
        node = client.get("/v1/nodes/n1").json()
        assert (node["provision_state"], node["reservation"]) == ("enroll", None)
    finally:
        release.set()
        conductor.pool.stop()
        conductor.pool = original


def test_step_that_never_finishes_times_out(baremetal) -> None:
    client = baremetal.client()
    manageable(client)
    baremetal.conf.set_override("clean_callback_timeout", 1, group="conductor")
    try:
        clean(client, [{"interface": "deploy", "step": "burnin_cpu", "args": {"duration": 600}}])
        failed = wait_for_state(client, "n1", "clean failed")
    finally:
        baremetal.conf.clear_override("clean_callback_timeout", group="conductor")
    assert failed["last_error"].startswith("Timeout reached while cleaning the node.")
    assert "burnin_cpu" in failed["last_error"]


def test_full_worker_pool_leaves_power_unchanged(baremetal) -> None:
    client = baremetal.client()
    create(client, name="n1")
    conductor = baremetal.conductor
    original = conductor.pool
    release = threading.Event()
    conductor.pool = WorkerPool(1, name="tiny")
    try:
        conductor.pool.submit(release.wait)
        response = client.put("/v1/nodes/n1/states/power", json={"target": "power on"})
        assert response.status_code == 503
        node = client.get("/v1/nodes/n1").json()
        assert (node["power_state"], node["target_power_state"], node["reservation"]) == (None, None, None)
    finally:
        release.set()
        conductor.pool.stop()
        conductor.pool = original


def test_the_fake_drivers_record_of_actions_stays_bounded(baremetal) -> None:
    from corral.baremetal.drivers.fake import FAKE_ACTIONS_KEPT

    client = baremetal.client()
    manageable(client)
    step = {"interface": "bios", "step": "apply_configuration", "args": {"settings": SETTINGS}}
    rounds = 3
    per_round = FAKE_ACTIONS_KEPT // 2 + 1
    for index in range(rounds):
        last = {"interface": "bios", "step": "apply_configuration",
                "args": {"settings": [{"name": "round", "value": str(index)}]}}
        assert clean(client, [step] * (per_round - 1) + [last]).status_code == 202
        wait_for_state(client, "n1", "manageable")
    node = client.get("/v1/nodes/n1").json()
    assert len(actions(node)) == FAKE_ACTIONS_KEPT
    assert actions(node)[-1] == "bios.apply_configuration"
    bios = client.get("/v1/nodes/n1/bios").json()["bios"]
    assert ("round", str(rounds - 1)) in [(item["name"], item["value"]) for item in bios]


def test_a_node_resting_in_clean_wait_is_already_unlocked(baremetal, monkeypatch) -> None:
    # A lock released after the node was seen in ``clean wait`` would make an
    # abort sent at that moment fail with 409; a slow release shows it always.
    from corral.baremetal.conductor import locks

    original = locks.release

    def slow_release(*args, **kwargs):
        time.sleep(2)
        return original(*args, **kwargs)

    monkeypatch.setattr(locks, "release", slow_release)
    client = baremetal.client()
    manageable(client)
    clean(client, [{"interface": "deploy", "step": "burnin_cpu", "args": {"duration": 600}}])
    waiting = wait_for(lambda: (node := client.get("/v1/nodes/n1").json())["provision_state"] == "clean wait"
                       and node)
    assert waiting["reservation"] is None
    response = provision(client, "n1", "abort")
    assert response.status_code == 202, response.text
    assert wait_for_state(client, "n1", "clean failed")["last_error"] == "By request, the clean operation was aborted"
