"""Resource classes (1.2) and traits (1.6), standard and custom."""

from __future__ import annotations


def test_resource_classes(placement) -> None:
    client = placement.client("1.7")
    names = [rc["name"] for rc in client.get("/resource_classes").json()["resource_classes"]]
    assert "VCPU" in names and "MEMORY_MB" in names
    assert placement.client("1.1").get("/resource_classes").status_code == 404
    created = client.post("/resource_classes", json={"name": "CUSTOM_GOLD"})
    assert created.status_code == 201 and created.headers["location"].endswith("/resource_classes/CUSTOM_GOLD")
    assert client.post("/resource_classes", json={"name": "CUSTOM_GOLD"}).status_code == 409
    for bad in ({"name": "GOLD"}, {"name": "CUSTOM_lower"}, {}, {"name": "CUSTOM_A", "x": 1}):
        assert client.post("/resource_classes", json=bad).status_code == 400, bad
    shown = client.get("/resource_classes/CUSTOM_GOLD")
    assert shown.json() == {"name": "CUSTOM_GOLD", "links": [{"rel": "self", "href": "/resource_classes/CUSTOM_GOLD"}]}
    assert client.get("/resource_classes/CUSTOM_NOPE").status_code == 404
    assert client.put("/resource_classes/CUSTOM_SILVER").status_code == 201
    assert client.put("/resource_classes/CUSTOM_SILVER").status_code == 204
    assert client.put("/resource_classes/SILVER").status_code == 400
    assert client.delete("/resource_classes/VCPU").status_code == 400
    assert client.delete("/resource_classes/CUSTOM_SILVER").status_code == 204
    assert client.delete("/resource_classes/CUSTOM_SILVER").status_code == 404


def test_resource_class_rename_before_1_7(placement) -> None:
    client = placement.client("1.6")
    client.post("/resource_classes", json={"name": "CUSTOM_OLD"})
    renamed = client.put("/resource_classes/CUSTOM_OLD", json={"name": "CUSTOM_NEW"})
    assert renamed.status_code == 200 and renamed.json()["name"] == "CUSTOM_NEW"
    assert client.get("/resource_classes/CUSTOM_OLD").status_code == 404
    assert client.put("/resource_classes/VCPU", json={"name": "CUSTOM_X"}).status_code == 400
    assert client.put("/resource_classes/CUSTOM_NEW", json={}).status_code == 400


def test_traits(placement) -> None:
    client = placement.client("1.6")
    assert placement.client("1.5").get("/traits").status_code == 404
    assert "HW_CPU_X86_AVX2" in client.get("/traits").json()["traits"]
    assert client.get("/traits/HW_CPU_X86_AVX2").status_code == 204
    assert client.get("/traits/CUSTOM_NOPE").status_code == 404
    assert client.put("/traits/CUSTOM_FAST").status_code == 201
    assert client.put("/traits/CUSTOM_FAST").status_code == 204
    assert client.put("/traits/FAST").status_code == 400
    assert client.get("/traits?name=startswith:CUSTOM_").json()["traits"] == ["CUSTOM_FAST"]
    # Listed in creation order: the standard trait existed first.
    assert client.get("/traits?name=in:CUSTOM_FAST,HW_CPU_X86_AVX2").json()["traits"] == ["HW_CPU_X86_AVX2", "CUSTOM_FAST"]
    assert client.get("/traits?name=CUSTOM_FAST").status_code == 400
    assert client.get("/traits?associated=maybe").status_code == 400
    assert client.get("/traits?color=red").status_code == 400
    assert client.get("/traits?associated=true").json()["traits"] == []
    assert client.delete("/traits/HW_CPU_X86_AVX2").status_code == 400
    assert client.delete("/traits/CUSTOM_FAST").status_code == 204
    assert client.delete("/traits/CUSTOM_FAST").status_code == 404


def test_provider_traits(placement) -> None:
    client = placement.client("1.23")
    rp = client.post("/resource_providers", json={"name": "rp"})
    rp = client.get("/resource_providers?name=rp").json()["resource_providers"][0]
    path = f"/resource_providers/{rp['uuid']}/traits"
    assert client.get(path).json() == {"traits": [], "resource_provider_generation": 0}
    client.put("/traits/CUSTOM_FAST")
    put = client.put(path, json={"traits": ["CUSTOM_FAST", "HW_CPU_X86_AVX2"], "resource_provider_generation": 0})
    assert put.status_code == 200
    # Listed in creation order: the standard trait existed first.
    assert put.json() == {"traits": ["HW_CPU_X86_AVX2", "CUSTOM_FAST"], "resource_provider_generation": 1}
    stale = client.put(path, json={"traits": [], "resource_provider_generation": 0})
    assert stale.status_code == 409 and stale.json()["errors"][0]["code"] == "placement.concurrent_update"
    unknown = client.put(path, json={"traits": ["CUSTOM_NOPE"], "resource_provider_generation": 1})
    assert unknown.status_code == 400 and "CUSTOM_NOPE" in unknown.json()["errors"][0]["detail"]
    assert client.put(path, json={"traits": ["bad"], "resource_provider_generation": 1}).status_code == 400
    assert client.put(path, json={"traits": []}).status_code == 400
    assert client.get(path).json()["traits"] == ["HW_CPU_X86_AVX2", "CUSTOM_FAST"]
    assert client.delete("/traits/CUSTOM_FAST").status_code == 409
    assert client.get("/traits?associated=true").json()["traits"] == ["HW_CPU_X86_AVX2", "CUSTOM_FAST"]
    assert client.delete(path).status_code == 204
    assert client.get(path).json() == {"traits": [], "resource_provider_generation": 2}
