"""The consumer-generation matrix: three consumer states x three microversion bands."""

from __future__ import annotations

import uuid

import pytest
import sqlalchemy as sa

from corral.placement.db.tables import allocations, consumers, resource_classes, resource_providers

PROJECT, USER = "proj", "user"


@pytest.fixture
def rp(placement):
    client = placement.client("1.20")
    provider = client.post("/resource_providers", json={"name": "cn"}).json()
    client.put(f"/resource_providers/{provider['uuid']}/inventories",
               json={"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 64}}})
    return provider["uuid"]


def _old_allocation_without_consumer(placement, rp_uuid: str) -> str:
    """An allocation written before consumer records existed."""
    consumer = str(uuid.uuid4())

    def work(conn):
        rp_id = conn.execute(sa.select(resource_providers.c.id).where(resource_providers.c.uuid == rp_uuid)).scalar_one()
        rc_id = conn.execute(sa.select(resource_classes.c.id).where(resource_classes.c.name == "VCPU")).scalar_one()
        conn.execute(allocations.insert().values(resource_provider_id=rp_id, consumer_id=consumer, resource_class_id=rc_id, used=1))

    placement.state.db.write(work)
    return consumer


def _consumer_exists(placement, consumer: str) -> bool:
    with placement.state.db.read() as conn:
        return conn.execute(sa.select(consumers.c.id).where(consumers.c.uuid == consumer)).first() is not None


def _put(placement, version, consumer, rp, generation="absent", amount=2):
    body = {"allocations": {rp: {"resources": {"VCPU": amount}}}, "project_id": PROJECT, "user_id": USER}
    if version in ("1.0", "1.7"):
        body = {"allocations": [{"resource_provider": {"uuid": rp}, "resources": {"VCPU": amount}}]}
    elif version == "1.8":
        body["allocations"] = [{"resource_provider": {"uuid": rp}, "resources": {"VCPU": amount}}]
    if generation != "absent":
        body["consumer_generation"] = generation
    return placement.client(version).put(f"/allocations/{consumer}", json=body)


@pytest.mark.parametrize("version", ["1.7", "1.8", "1.27"])
@pytest.mark.parametrize("state", ["new", "allocations_only", "both"])
def test_before_1_28_always_succeeds_and_creates_a_consumer(placement, rp, version, state) -> None:
    consumer = str(uuid.uuid4())
    if state == "allocations_only":
        consumer = _old_allocation_without_consumer(placement, rp)
    elif state == "both":
        assert _put(placement, "1.28", consumer, rp, None).status_code == 204
    response = _put(placement, version, consumer, rp)
    assert response.status_code == 204, response.text
    assert _consumer_exists(placement, consumer)
    shown = placement.client("1.28").get(f"/allocations/{consumer}").json()
    assert shown["consumer_generation"] == (2 if state == "both" else 1)
    assert shown["project_id"] == ("00000000-0000-0000-0000-000000000000" if version == "1.7" else PROJECT)
    # Before 1.28 a consumer_generation member is a schema error.
    assert _put(placement, version, consumer, rp, 1).status_code == 400


@pytest.mark.parametrize("state", ["new", "allocations_only"])
def test_1_28_without_consumer_record_needs_null(placement, rp, state) -> None:
    consumer = str(uuid.uuid4()) if state == "new" else _old_allocation_without_consumer(placement, rp)
    missing = _put(placement, "1.28", consumer, rp)
    assert missing.status_code == 400  # the member is required
    wrong = _put(placement, "1.28", consumer, rp, 1)
    assert wrong.status_code == 409 and wrong.json()["errors"][0]["code"] == "placement.concurrent_update"
    assert _put(placement, "1.28", consumer, rp, None).status_code == 204
    shown = placement.client("1.28").get(f"/allocations/{consumer}").json()
    assert shown["consumer_generation"] == 1
    assert shown["allocations"][rp]["resources"] == {"VCPU": 2}


def test_1_28_existing_consumer_needs_its_generation(placement, rp) -> None:
    consumer = str(uuid.uuid4())
    assert _put(placement, "1.28", consumer, rp, None).status_code == 204
    stale_null = _put(placement, "1.28", consumer, rp, None, amount=3)
    assert stale_null.status_code == 409 and stale_null.json()["errors"][0]["code"] == "placement.concurrent_update"
    assert _put(placement, "1.28", consumer, rp, 0, amount=3).status_code == 409
    assert _put(placement, "1.28", consumer, rp, 1, amount=3).status_code == 204
    assert placement.client("1.28").get(f"/allocations/{consumer}").json()["consumer_generation"] == 2
    provider_view = placement.client("1.28").get(f"/resource_providers/{rp}/allocations").json()
    assert provider_view["allocations"][consumer] == {"resources": {"VCPU": 3}, "consumer_generation": 2}


def test_empty_allocations_are_a_generation_safe_delete(placement, rp) -> None:
    client = placement.client("1.28")
    consumer = str(uuid.uuid4())
    assert _put(placement, "1.28", consumer, rp, None).status_code == 204
    empty = {"allocations": {}, "project_id": PROJECT, "user_id": USER, "consumer_generation": 0}
    assert client.put(f"/allocations/{consumer}", json=empty).status_code == 409
    assert client.get(f"/allocations/{consumer}").json()["allocations"] != {}
    assert client.put(f"/allocations/{consumer}", json={**empty, "consumer_generation": 1}).status_code == 204
    assert client.get(f"/allocations/{consumer}").json() == {"allocations": {}}
    assert not _consumer_exists(placement, consumer)
    # Before 1.28 an empty dict is still refused.
    assert placement.client("1.27").put(f"/allocations/{consumer}", json={**empty, "consumer_generation": None}).status_code == 400


def test_post_allocations_generations(placement, rp) -> None:
    client = placement.client("1.28")
    a, b = str(uuid.uuid4()), str(uuid.uuid4())
    section = lambda gen: {"allocations": {rp: {"resources": {"VCPU": 1}}}, "project_id": PROJECT, "user_id": USER, "consumer_generation": gen}  # noqa: E731
    assert client.post("/allocations", json={a: section(None), b: section(None)}).status_code == 204
    conflict = client.post("/allocations", json={a: section(1), b: section(None)})
    assert conflict.status_code == 409 and conflict.json()["errors"][0]["code"] == "placement.concurrent_update"
    assert client.get(f"/allocations/{a}").json()["consumer_generation"] == 1
    assert client.post("/allocations", json={a: section(1), b: section(1)}).status_code == 204
    # 1.13-1.27: existing consumers are bumped without protection.
    old = {a: {k: v for k, v in section(None).items() if k != "consumer_generation"}}
    assert placement.client("1.27").post("/allocations", json=old).status_code == 204
    assert client.get(f"/allocations/{a}").json()["consumer_generation"] == 3


def test_delete_is_unchanged(placement, rp) -> None:
    consumer = str(uuid.uuid4())
    assert _put(placement, "1.28", consumer, rp, None).status_code == 204
    assert placement.client("1.28").delete(f"/allocations/{consumer}").status_code == 204
    assert not _consumer_exists(placement, consumer)
    assert _put(placement, "1.28", consumer, rp, None).status_code == 204
