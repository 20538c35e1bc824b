"""Allocation rules (no database) and allocation queries (every backend)."""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator

import pytest

from corral.baremetal.db import allocations as allocation_db
from corral.baremetal.db import conductors as conductor_db
from corral.baremetal.db import nodes as node_db
from corral.baremetal.db.schema import TREE
from corral.baremetal.domain import allocations as domain
from corral.core import migrations
from corral.core.db import Database, create_engine

# ------------------------------------------------------------- domain


def _node(name: str, **values: object) -> dict[str, object]:
    node: dict[str, object] = {
        "uuid": str(uuid.uuid5(uuid.NAMESPACE_DNS, name)), "name": name, "provision_state": "available",
        "maintenance": False, "power_state": "power off", "instance_uuid": None, "resource_class": "rc",
        "owner": None, "lessee": None, "traits": [],
    }
    node.update(values)
    return node


def _allocation(**values: object) -> dict[str, object]:
    return {"uuid": "a-1", "name": None, "resource_class": "rc", "traits": [], "candidate_nodes": [],
            "owner": None, **values}


@pytest.mark.parametrize(
    ("values", "reason"),
    [
        ({"provision_state": "manageable"}, "provision state is manageable"),
        ({"maintenance": True}, "in maintenance"),
        ({"power_state": None}, "power state is unknown"),
        ({"instance_uuid": "x"}, "already associated with x"),
        ({"resource_class": "other"}, "resource class is other"),
    ],
)
def test_unfit_nodes_say_why(values: dict[str, object], reason: str) -> None:
    assert domain.unfit_reason(_allocation(), _node("n", **values)) == reason
    assert domain.unfit_reason(_allocation(), _node("n")) is None


def test_node_traits_must_include_every_requested_trait() -> None:
    node = _node("n", traits=["CUSTOM_A", "CUSTOM_B", "HW_CPU_X86_AVX2"])
    assert domain.unfit_reason(_allocation(traits=["CUSTOM_A", "CUSTOM_B"]), node) is None
    # The node having more traits than requested is fine; fewer is not.
    assert domain.unfit_reason(_allocation(traits=["CUSTOM_A", "CUSTOM_C"]), node) == "lacks traits CUSTOM_C"


def test_candidate_nodes_and_owner_restrict_the_choice() -> None:
    n1, n2 = _node("n1"), _node("n2", owner="p1")
    assert domain.unfit_reason(_allocation(candidate_nodes=[n2["uuid"]]), n1) == "not a candidate node"
    assert domain.unfit_reason(_allocation(owner="p1"), n1) == "not owned by or leased to p1"
    assert domain.unfit_reason(_allocation(owner="p1"), n2) is None
    assert domain.unfit_reason(_allocation(owner="p2"), _node("n3", lessee="p2")) is None


def test_choose_candidates_failure_reasons() -> None:
    with pytest.raises(domain.AllocationFailed, match="^no available nodes match the resource class rc$"):
        domain.choose_candidates(_allocation(), [_node("n", resource_class="other")])
    with pytest.raises(domain.AllocationFailed,
                       match="^none of the requested nodes are available and match the resource class rc$"):
        domain.choose_candidates(_allocation(candidate_nodes=["x"]), [_node("n")])
    with pytest.raises(domain.AllocationFailed,
                       match="^no suitable nodes have the requested traits CUSTOM_B, CUSTOM_A$"):
        domain.choose_candidates(_allocation(traits=["CUSTOM_B", "CUSTOM_A"]), [_node("n", traits=["CUSTOM_A"])])


def test_choose_candidates_shuffles_and_puts_the_named_node_first() -> None:
    nodes = [_node(f"n{i}") for i in range(20)]
    orders = {tuple(node["name"] for node in domain.choose_candidates(_allocation(), nodes, random.Random(seed)))
              for seed in range(5)}
    assert len(orders) > 1  # not always the same order
    for seed in range(5):
        chosen = domain.choose_candidates(_allocation(name="n7"), nodes, random.Random(seed))
        assert chosen[0]["name"] == "n7"
        assert len(chosen) == 20


def test_choose_candidates_filters_by_traits() -> None:
    nodes = [_node("gpu", traits=["CUSTOM_GPU"]), _node("plain")]
    chosen = domain.choose_candidates(_allocation(traits=["CUSTOM_GPU"]), nodes)
    assert [node["name"] for node in chosen] == ["gpu"]


def test_state_machine_and_names() -> None:
    assert domain.next_state("allocating", "success") == "active"
    assert domain.next_state("allocating", "fail") == "error"
    assert domain.next_state("active", "fail") is None
    assert domain.next_state("error", "success") is None
    assert domain.is_valid_name("host-1.example_~")
    assert not domain.is_valid_name("not a valid name!")
    assert not domain.is_valid_name("")
    assert not domain.is_valid_name("x" * 256)


def test_instance_info_records_the_requested_traits() -> None:
    info = domain.instance_info_for(_allocation(traits=["CUSTOM_A"]), {"instance_info": {"image": "i"}})
    assert info == {"image": "i", "traits": ["CUSTOM_A"]}
    assert domain.instance_info_for(_allocation(), {"instance_info": {}}) == {"traits": []}


def test_delete_refusal() -> None:
    allocation = {"uuid": "a"}
    assert domain.delete_refusal(allocation, None) is None
    assert domain.delete_refusal(allocation, _node("n")) is None
    assert "because the node is active" in str(domain.delete_refusal(allocation, _node("n", provision_state="active")))
    assert domain.delete_refusal(allocation, _node("n", provision_state="active", maintenance=True)) is None
    assert "where updates are not allowed" in str(
        domain.delete_refusal(allocation, _node("n", provision_state="deploying"))
    )


# ---------------------------------------------------------- database


@pytest.fixture
def db(database_factory) -> Iterator[Database]:
    engine = create_engine(database_factory.new_url("alloc"))
    migrations.upgrade(engine, TREE)
    engine.dispose()
    database = Database.from_url(str(engine.url.render_as_string(hide_password=False)))
    yield database
    database.dispose()


def _insert_node(db: Database, name: str, **values: object) -> int:
    row = {"uuid": str(uuid.uuid4()), "name": name, "driver": "fake-hardware", "provision_state": "available",
           "power_state": "power off", "resource_class": "rc", "maintenance": False, "console_enabled": False,
           "protected": False, **values}
    return db.write(lambda conn: node_db.insert(conn, row))


def _conductor(db: Database, host: str) -> int:
    return db.write(lambda conn: conductor_db.register(conn, host, drivers=["fake-hardware"], group="",
                                                       rpc_address=None, interfaces=[]))


def test_insert_get_and_traits_keep_their_order(db: Database) -> None:
    me = _conductor(db, "c1")
    allocation_id = db.write(lambda conn: allocation_db.insert(
        conn, {"uuid": "1be26c0b-03f2-4d2e-ae87-c02d7f33c123", "name": "a1", "state": "allocating",
               "resource_class": "rc", "candidate_nodes": [], "extra": {"x": 1}, "conductor_affinity": me},
        ["CUSTOM_Z", "CUSTOM_A"]))
    with db.read() as conn:
        by_name = allocation_db.get(conn, name="a1")
        by_uuid = allocation_db.get(conn, uuid="1be26c0b-03f2-4d2e-ae87-c02d7f33c123")
    assert by_name == by_uuid
    assert by_name is not None
    assert by_name["id"] == allocation_id
    assert by_name["traits"] == ["CUSTOM_Z", "CUSTOM_A"]
    assert by_name["extra"] == {"x": 1}
    assert by_name["node_uuid"] is None


def test_candidate_query_matches_the_domain_rule(db: Database) -> None:
    good = _insert_node(db, "good")
    _insert_node(db, "maint", maintenance=True)
    _insert_node(db, "nopower", power_state=None)
    _insert_node(db, "taken", instance_uuid=str(uuid.uuid4()))
    _insert_node(db, "other", resource_class="other")
    _insert_node(db, "managed", provision_state="manageable")
    db.write(lambda conn: node_db.set_traits(conn, good, ["CUSTOM_GPU"]))
    with db.read() as conn:
        found = allocation_db.candidate_nodes(conn, "rc")
    assert [node["name"] for node in found] == ["good"]
    assert found[0]["traits"] == ["CUSTOM_GPU"]


def test_updates_are_guarded_by_affinity_and_takeover_is_exclusive(db: Database) -> None:
    dead, me, other = _conductor(db, "dead"), _conductor(db, "me"), _conductor(db, "other")
    allocation_id = db.write(lambda conn: allocation_db.insert(
        conn, {"uuid": str(uuid.uuid4()), "state": "allocating", "resource_class": "rc", "conductor_affinity": dead},
        []))
    # The conductor that does not hold the allocation changes nothing.
    assert not db.write(lambda conn: allocation_db.update(conn, allocation_id, {"state": "error"}, affinity=me))
    with db.read() as conn:
        assert allocation_db.orphaned(conn, [me, other]) == [(allocation_id, dead)]
        assert allocation_db.orphaned(conn, [dead, me]) == []
    assert db.write(lambda conn: allocation_db.take_over(conn, allocation_id, dead, me))
    assert not db.write(lambda conn: allocation_db.take_over(conn, allocation_id, dead, other))
    # The dead conductor, should it come back, can no longer write.
    assert not db.write(lambda conn: allocation_db.update(conn, allocation_id, {"state": "error"}, affinity=dead))
    assert db.write(lambda conn: allocation_db.update(conn, allocation_id, {"last_error": "x"}, affinity=me))
    with db.read() as conn:
        resumed = allocation_db.in_state(conn, "allocating", affinity=me)
    assert [allocation["id"] for allocation in resumed] == [allocation_id]


def test_reserve_node_is_all_or_nothing(db: Database) -> None:
    me = _conductor(db, "me")
    node_id = _insert_node(db, "n1", reservation="me")
    allocation_uuid = str(uuid.uuid4())
    allocation_id = db.write(lambda conn: allocation_db.insert(
        conn, {"uuid": allocation_uuid, "state": "allocating", "resource_class": "rc", "conductor_affinity": me}, []))
    # Wrong affinity: the node update is rolled back with the allocation's.
    with pytest.raises(allocation_db.ReservationFailed) as failure:
        db.write(lambda conn: allocation_db.reserve_node(conn, allocation_id, allocation_uuid, node_id, {},
                                                         host="me", affinity=me + 1000, generation=0))
    assert failure.value.what == "allocation"
    with db.read() as conn:
        node = node_db.get(conn, node_id=node_id)
    assert node is not None and node["instance_uuid"] is None and node["allocation_id"] is None
    db.write(lambda conn: allocation_db.reserve_node(conn, allocation_id, allocation_uuid, node_id,
                                                     {"traits": []}, host="me", affinity=me, generation=0))
    with db.read() as conn:
        node = node_db.get(conn, node_id=node_id)
        allocation = allocation_db.get(conn, allocation_id=allocation_id)
        by_node = allocation_db.get(conn, node_id=node_id)
    assert node is not None and node["instance_uuid"] == allocation_uuid and node["allocation_id"] == allocation_id
    assert node["instance_info"] == {"traits": []}
    assert allocation is not None and allocation["state"] == "active" and allocation["node_uuid"] == node["uuid"]
    assert by_node == allocation
    # Deleting frees the node in the same transaction.
    assert db.write(lambda conn: allocation_db.delete(conn, allocation_id))
    with db.read() as conn:
        node = node_db.get(conn, node_id=node_id)
        assert allocation_db.get(conn, allocation_id=allocation_id) is None
    assert node is not None and node["instance_uuid"] is None and node["allocation_id"] is None


def test_list_filters_sorting_and_markers(db: Database) -> None:
    me = _conductor(db, "me")
    for index, state in enumerate(["error", "active", "error", "allocating"]):
        db.write(lambda conn, index=index, state=state: allocation_db.insert(
            conn, {"uuid": str(uuid.uuid4()), "name": f"a{index}", "state": state, "resource_class": "rc",
                   "conductor_affinity": me}, []))
    with db.read() as conn:
        errors = allocation_db.list_allocations(conn, {"state": "error"})
        first = allocation_db.list_allocations(conn, {}, sort_key="name", sort_dir="desc", limit=2)
        rest = allocation_db.list_allocations(conn, {}, sort_key="name", sort_dir="desc", marker=first[-1])
    assert [allocation["name"] for allocation in errors] == ["a0", "a2"]
    assert [allocation["name"] for allocation in first] == ["a3", "a2"]
    assert [allocation["name"] for allocation in rest] == ["a1", "a0"]
