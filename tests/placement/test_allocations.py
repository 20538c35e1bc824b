"""Allocations: every body form by microversion, capacity rules, consumer generations."""

from __future__ import annotations

import uuid

import pytest

PROJECT, USER = "proj", "user"


@pytest.fixture
def cloud(placement):
    """Two providers: cn1 (8 VCPU, 2048 MB) and cn2 (4 VCPU, max 2 per allocation)."""
    client = placement.client("1.20")
    made = {}
    for name, inventories in (
        ("cn1", {"VCPU": {"total": 8}, "MEMORY_MB": {"total": 2048, "step_size": 256}}),
        ("cn2", {"VCPU": {"total": 4, "max_unit": 2}}),
    ):
        rp = client.post("/resource_providers", json={"name": name}).json()
        put = client.put(f"/resource_providers/{rp['uuid']}/inventories",
                         json={"resource_provider_generation": 0, "inventories": inventories})
        assert put.status_code == 200, put.text
        made[name] = rp["uuid"]
    return made


def _dict_body(allocs, generation="absent", **extra):
    body = {"allocations": {rp: {"resources": res} for rp, res in allocs.items()}, "project_id": PROJECT, "user_id": USER}
    if generation != "absent":
        body["consumer_generation"] = generation
    body.update(extra)
    return body


def test_list_form_before_1_12(placement, cloud) -> None:
    client = placement.client("1.11")
    consumer = str(uuid.uuid4())
    body = {"allocations": [{"resource_provider": {"uuid": cloud["cn1"]}, "resources": {"VCPU": 2}}],
            "project_id": PROJECT, "user_id": USER}
    assert client.put(f"/allocations/{consumer}", json=body).status_code == 204
    shown = client.get(f"/allocations/{consumer}").json()
    assert shown == {"allocations": {cloud["cn1"]: {"generation": 2, "resources": {"VCPU": 2}}}}
    # Before 1.8 project and user may be left out (the incomplete-consumer ids are used).
    anonymous = str(uuid.uuid4())
    assert placement.client("1.7").put(f"/allocations/{anonymous}", json={"allocations": body["allocations"]}).status_code == 204
    assert placement.client("1.12").get(f"/allocations/{anonymous}").json()["project_id"] == "00000000-0000-0000-0000-000000000000"
    assert placement.client("1.8").put(f"/allocations/{anonymous}", json={"allocations": body["allocations"]}).status_code == 400
    assert client.put(f"/allocations/{consumer}", json={**body, "allocations": []}).status_code == 400


def test_dict_form_and_reads(placement, cloud) -> None:
    client = placement.client("1.27")
    consumer = str(uuid.uuid4())
    put = client.put(f"/allocations/{consumer}", json=_dict_body({cloud["cn1"]: {"VCPU": 2, "MEMORY_MB": 512}, cloud["cn2"]: {"VCPU": 1}}))
    assert put.status_code == 204, put.text
    shown = client.get(f"/allocations/{consumer}").json()
    assert shown["project_id"] == PROJECT and shown["user_id"] == USER and "consumer_generation" not in shown
    assert shown["allocations"][cloud["cn1"]]["resources"] == {"VCPU": 2, "MEMORY_MB": 512}
    on_provider = client.get(f"/resource_providers/{cloud['cn1']}/allocations").json()
    assert on_provider["allocations"] == {consumer: {"resources": {"VCPU": 2, "MEMORY_MB": 512}}}
    usages = client.get(f"/resource_providers/{cloud['cn1']}/usages").json()
    assert usages["usages"] == {"VCPU": 2, "MEMORY_MB": 512}
    assert client.get(f"/allocations/{uuid.uuid4()}").json() == {"allocations": {}}
    assert client.delete(f"/allocations/{consumer}").status_code == 204
    assert client.delete(f"/allocations/{consumer}").status_code == 404
    assert client.get(f"/resource_providers/{cloud['cn1']}/usages").json()["usages"] == {"VCPU": 0, "MEMORY_MB": 0}


@pytest.mark.parametrize(
    ("allocs", "status"),
    [
        ({"cn1": {"VCPU": 9}}, 409),  # over capacity
        ({"cn2": {"VCPU": 3}}, 409),  # above max_unit
        ({"cn1": {"MEMORY_MB": 100}}, 409),  # not a multiple of step_size
        ({"cn2": {"MEMORY_MB": 256}}, 409),  # no such inventory
        ({"cn1": {"CUSTOM_NOPE": 1}}, 400),  # unknown class
        ({"missing": {"VCPU": 1}}, 400),  # unknown provider
        ({"cn1": {"VCPU": 0}}, 400),
        ({"cn1": {"vcpu": 1}}, 400),
        ({"cn1": {}}, 400),
    ],
)
def test_refused_allocations_change_nothing(placement, cloud, allocs, status) -> None:
    client = placement.client("1.28")
    names = {**cloud, "missing": str(uuid.uuid4())}
    body = _dict_body({names[rp]: res for rp, res in allocs.items()}, None)
    consumer = str(uuid.uuid4())
    response = client.put(f"/allocations/{consumer}", json=body)
    assert response.status_code == status, response.text
    assert client.get(f"/allocations/{consumer}").json() == {"allocations": {}}
    assert client.get(f"/resource_providers/{cloud['cn1']}").json()["generation"] == 1


def test_capacity_counts_overcommit_and_reserved(placement, cloud) -> None:
    client = placement.client("1.28")
    client.put(f"/resource_providers/{cloud['cn1']}/inventories",
               json={"resource_provider_generation": 1, "inventories": {"VCPU": {"total": 8, "reserved": 2, "allocation_ratio": 2.0}}})
    first = str(uuid.uuid4())
    assert client.put(f"/allocations/{first}", json=_dict_body({cloud["cn1"]: {"VCPU": 10}}, None)).status_code == 204
    assert client.put(f"/allocations/{uuid.uuid4()}", json=_dict_body({cloud["cn1"]: {"VCPU": 3}}, None)).status_code == 409
    assert client.put(f"/allocations/{uuid.uuid4()}", json=_dict_body({cloud["cn1"]: {"VCPU": 2}}, None)).status_code == 204
    # Inventory cannot shrink below what is allocated, nor lose an allocated class.
    shrink = placement.client("1.23").put(f"/resource_providers/{cloud['cn1']}/inventories",
                                          json={"resource_provider_generation": 4, "inventories": {"VCPU": {"total": 4}}})
    assert shrink.status_code == 409 and shrink.json()["errors"][0]["code"] == "placement.inventory.inuse"
    drop = placement.client("1.23").delete(f"/resource_providers/{cloud['cn1']}/inventories/VCPU")
    assert drop.status_code == 409 and drop.json()["errors"][0]["code"] == "placement.inventory.inuse"
    assert client.delete(f"/resource_providers/{cloud['cn1']}").status_code == 409


def test_post_allocations_for_several_consumers(placement, cloud) -> None:
    client = placement.client("1.13")
    a, b = str(uuid.uuid4()), str(uuid.uuid4())
    body = {a: _dict_body({cloud["cn1"]: {"VCPU": 4}}), b: _dict_body({cloud["cn1"]: {"VCPU": 4}})}
    assert placement.client("1.12").post("/allocations", json=body).status_code == 404
    assert client.post("/allocations", json=body).status_code == 204
    assert client.get(f"/resource_providers/{cloud['cn1']}/usages").json()["usages"]["VCPU"] == 8
    # Together they would not fit: nothing is written.
    c = str(uuid.uuid4())
    too_much = {c: _dict_body({cloud["cn1"]: {"VCPU": 5}}), b: _dict_body({cloud["cn2"]: {"VCPU": 1}})}
    assert client.post("/allocations", json=too_much).status_code == 409
    assert client.get(f"/allocations/{b}").json()["allocations"][cloud["cn1"]]["resources"] == {"VCPU": 4}
    # Moving a consumer and emptying another in one request.
    move = {a: _dict_body({cloud["cn2"]: {"VCPU": 2}}), b: {**_dict_body({}), "allocations": {}}}
    assert client.post("/allocations", json=move).status_code == 204
    assert client.get(f"/allocations/{b}").json() == {"allocations": {}}
    assert client.post("/allocations", json={}).status_code == 400
    assert client.post("/allocations", json={"not-a-uuid": _dict_body({})}).status_code == 400


def test_consumer_types(placement, cloud) -> None:
    client = placement.client("1.38")
    consumer = str(uuid.uuid4())
    body = _dict_body({cloud["cn1"]: {"VCPU": 1}}, None)
    assert client.put(f"/allocations/{consumer}", json=body).status_code == 400
    assert client.put(f"/allocations/{consumer}", json={**body, "consumer_type": "INSTANCE"}).status_code == 204
    shown = client.get(f"/allocations/{consumer}").json()
    assert shown["consumer_type"] == "INSTANCE" and shown["consumer_generation"] == 1
    assert client.put(f"/allocations/{consumer}", json={**body, "consumer_type": "bad type"}).status_code == 400
