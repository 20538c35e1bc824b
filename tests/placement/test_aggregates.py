"""Provider aggregates: lists before 1.19, generations from 1.19."""

from __future__ import annotations

import uuid


def test_aggregates_by_microversion(placement) -> None:
    rp = placement.client("1.20").post("/resource_providers", json={"name": "rp"}).json()
    path = f"/resource_providers/{rp['uuid']}/aggregates"
    agg1, agg2 = sorted(str(uuid.uuid4()) for _ in range(2))
    assert placement.client("1.0").get(path).status_code == 404
    old = placement.client("1.1")
    assert old.get(path).json() == {"aggregates": []}
    put = old.put(path, json=[agg1, agg2])
    assert put.status_code == 200 and sorted(put.json()["aggregates"]) == [agg1, agg2]
    assert old.put(path, json=[agg1, agg1]).status_code == 400
    assert old.put(path, json=["nope"]).status_code == 400
    new = placement.client("1.19")
    assert new.get(path).json() == {"aggregates": [agg1, agg2], "resource_provider_generation": 0}
    assert new.put(path, json=[agg1]).status_code == 400
    stale = new.put(path, json={"aggregates": [agg1], "resource_provider_generation": 5})
    assert stale.status_code == 409
    done = new.put(path, json={"aggregates": [agg2], "resource_provider_generation": 0})
    assert done.json() == {"aggregates": [agg2], "resource_provider_generation": 1}
    other = placement.client("1.20").post("/resource_providers", json={"name": "other"}).json()
    shared = new.put(f"/resource_providers/{other['uuid']}/aggregates",
                     json={"aggregates": [agg2], "resource_provider_generation": 0})
    assert shared.status_code == 200
