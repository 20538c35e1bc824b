"""Claims for new consumers (generation null): refusals change nothing, errors come in upstream's order.

On PostgreSQL these claims take their own two-round-trip path; every
backend must answer them alike.
"""

from __future__ import annotations

import uuid

import pytest
import sqlalchemy as sa

from corral.placement.db.claims_pg import _array

PROJECT, USER = "proj", "user"
UUID_LIKE = "4e8e5957-649f-477b-9e5b-f1f75b21c03c"


@pytest.fixture
def client(placement):
    return placement.client("1.39")


@pytest.fixture
def rp(client) -> str:
    provider = client.post("/resource_providers", json={"name": "cn"}).json()
    client.put(f"/resource_providers/{provider['uuid']}/inventories", json={
        "resource_provider_generation": 0,
        "inventories": {"VCPU": {"total": 4, "max_unit": 2}, "MEMORY_MB": {"total": 1024}},
    })
    return provider["uuid"]


def _claim(client, rp: str, resources: dict[str, int], consumer: str | None = None):
    body = {"allocations": {rp: {"resources": resources}}, "project_id": PROJECT, "user_id": USER,
            "consumer_generation": None, "consumer_type": "INSTANCE"}
    return client.put(f"/allocations/{consumer or uuid.uuid4()}", json=body)


def _state(client, rp: str) -> tuple[int, dict]:
    generation = client.get(f"/resource_providers/{rp}").json()["generation"]
    return generation, client.get(f"/resource_providers/{rp}/usages").json()["usages"]


def test_a_claim_is_written_and_bumps_the_provider(client, rp) -> None:
    before, _ = _state(client, rp)
    consumer = str(uuid.uuid4())
    assert _claim(client, rp, {"VCPU": 2, "MEMORY_MB": 512}, consumer).status_code == 204
    after, usages = _state(client, rp)
    assert after == before + 1
    assert usages == {"VCPU": 2, "MEMORY_MB": 512}
    shown = client.get(f"/allocations/{consumer}").json()
    assert shown["consumer_generation"] == 1 and shown["consumer_type"] == "INSTANCE"
    assert shown["project_id"] == PROJECT and shown["user_id"] == USER


@pytest.mark.parametrize("resources, words", [
    ({"VCPU": 3}, "would violate inventory constraints"),  # over max_unit
    ({"MEMORY_MB": 2048}, "would exceed the capacity"),
    ({"DISK_GB": 1}, "Inventory for 'DISK_GB'"),  # no such inventory here
])
def test_a_refused_claim_changes_nothing(client, rp, resources, words) -> None:
    before = _state(client, rp)
    consumer = str(uuid.uuid4())
    refused = _claim(client, rp, resources, consumer)
    assert refused.status_code == 409
    assert words in refused.json()["errors"][0]["detail"]
    assert _state(client, rp) == before
    assert client.get(f"/allocations/{consumer}").json() == {"allocations": {}}


def test_the_last_unit_goes_to_one_claim(client, rp) -> None:
    assert _claim(client, rp, {"VCPU": 2}).status_code == 204
    assert _claim(client, rp, {"VCPU": 2}).status_code == 204
    assert _claim(client, rp, {"VCPU": 1}).status_code == 409
    assert _state(client, rp)[1]["VCPU"] == 4


def test_a_missing_provider_is_reported_before_an_unknown_class(client) -> None:
    missing = str(uuid.uuid4())
    answer = _claim(client, missing, {"CUSTOM_NOWHERE": 1})
    assert answer.status_code == 400
    assert f"resource provider '{missing}' that does not exist" in answer.json()["errors"][0]["detail"]


def test_an_unknown_class_on_a_real_provider_is_400(client, rp) -> None:
    answer = _claim(client, rp, {"CUSTOM_NOWHERE": 1})
    assert answer.status_code == 400
    assert "CUSTOM_NOWHERE" in answer.json()["errors"][0]["detail"]


def test_several_new_consumers_in_one_post(client, rp) -> None:
    a, b = str(uuid.uuid4()), str(uuid.uuid4())
    section = {"allocations": {rp: {"resources": {"VCPU": 1}}}, "project_id": PROJECT, "user_id": USER,
               "consumer_generation": None, "consumer_type": "INSTANCE"}
    assert client.post("/allocations", json={a: section, b: section}).status_code == 204
    assert _state(client, rp)[1]["VCPU"] == 2
    refused = client.post("/allocations", json={str(uuid.uuid4()): section, a: section})
    assert refused.status_code == 409  # a exists: its null generation is stale
    assert _state(client, rp)[1]["VCPU"] == 2


def test_a_lock_timeout_in_the_claim_is_retried_like_any_statement(placement, client, rp) -> None:
    """The claim's driver-level errors reach the retry loop as SQLAlchemy errors."""
    import datetime
    import threading

    import sqlalchemy as sa

    from corral.placement.db import allocations as allocation_db
    from corral.placement.db import consumers
    from corral.placement.domain import allocations as rules

    db = placement.state.db
    if db.backend != "postgresql":
        pytest.skip("the driver-level claim path is PostgreSQL's")
    request = rules.consumer_from_body(str(uuid.uuid4()), {
        "allocations": {rp: {"resources": {"VCPU": 1}}}, "project_id": PROJECT, "user_id": USER,
        "consumer_generation": None, "consumer_type": "INSTANCE",
    }, (1, 39), default_project="p", default_user="u")
    attempts = []

    def work(conn):
        attempts.append(1)
        conn.exec_driver_sql("SET LOCAL lock_timeout = '20ms'")
        allocation_db.replace(conn, [request], placement.state.standard_classes,
                              datetime.datetime(2026, 1, 1), consumers.IdCache())

    holder = db.engine.connect()
    transaction = holder.begin()
    holder.execute(sa.text("SELECT id FROM resource_providers WHERE uuid = :uuid FOR UPDATE"), {"uuid": rp})
    released = threading.Timer(0.5, transaction.rollback)
    released.start()
    try:
        db.write(work)
    finally:
        released.join()
        holder.close()
    assert len(attempts) > 1  # timed out on the lock at least once, then retried
    assert client.get(f"/allocations/{request.consumer_uuid}").json()["allocations"][rp]["resources"] == {"VCPU": 1}


def test_array_literals_read_back_as_the_values_given(placement) -> None:
    texts = ['a"b', "c\\d", "x,y", "{z}", " spaced ", "NULL", "", UUID_LIKE]
    assert _array([1, None, 256]) == '{"1",NULL,"256"}'
    if placement.state.db.backend != "postgresql":
        pytest.skip("array literals are PostgreSQL's")
    with placement.state.db.read() as conn:
        row = conn.execute(sa.text("SELECT CAST(:t AS varchar[]), CAST(:i AS integer[]), CAST(:e AS integer[])"),
                           {"t": _array(texts), "i": _array([1, None, 2**31 - 1]), "e": _array([])}).one()
    assert list(row) == [texts, [1, None, 2**31 - 1], []]
