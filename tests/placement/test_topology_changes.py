"""The topology snapshot follows writes change by change.

Two applications on one database stand for two API processes: every
write goes through one (while another client keeps rewriting other
providers through it), and the very next answer of the other must show
it, whether that process applied the logged changes to its snapshot or
had fallen too far behind and read everything again.
"""

from __future__ import annotations

import gc
import threading
import uuid as uuidlib
from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from corral.core.server import ThreadedServer
from corral.placement.api.app import build_state, make_app
from corral.placement.db import topology
from corral.placement.db.tables import inventories, resource_classes, resource_providers, topology_changes
from corral.placement.db import topology_cache
from corral.placement.db.topology_cache import TopologyCache
from corral.placement.domain.class_index import ClassIndex
from tests.placement.test_candidates_topology import (
    VERSION,
    candidates,
    generation,
    new_provider,
    providers_offered,
    set_inventory,
)
from tests.support.http import ApiClient
from tests.support.process import CorralProcess, write_config


class OtherProcess:
    def __init__(self, conf) -> None:
        self.state = build_state(conf)
        self.server = ThreadedServer(make_app(conf, self.state)).start()

    def client(self, version: str = VERSION) -> ApiClient:
        return ApiClient(self.server.url, {"X-Auth-Token": "admin", "OpenStack-API-Version": f"placement {version}"})

    def stop(self) -> None:
        self.server.stop()
        self.state.db.dispose()


@pytest.fixture
def reader(placement) -> Iterator[OtherProcess]:
    process = OtherProcess(placement.conf)
    yield process
    process.stop()


@pytest.fixture
def writer(placement) -> ApiClient:
    return placement.client(VERSION)


class Churn:
    """Another client rewriting one provider's ``reserved`` and traits
    through the writing process, as compute services do."""

    def __init__(self, client: ApiClient) -> None:
        self.client = client.with_headers()
        self.uuid = new_provider(client, "churning")
        set_inventory(client, self.uuid, VCPU=1, MEMORY_MB=16)
        self.stop_event = threading.Event()
        self.writes = 0
        self.failures: list[str] = []
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        flip = 0
        while not self.stop_event.is_set():
            flip ^= 1
            gen = generation(self.client, self.uuid)
            body = {
                "resource_provider_generation": gen,
                "inventories": {"VCPU": {"total": 1, "reserved": flip}, "MEMORY_MB": {"total": 16}},
            }
            response = self.client.put(f"/resource_providers/{self.uuid}/inventories", json=body)
            if response.status_code != 200:
                self.failures.append(response.text)
            traits = {"traits": ["HW_CPU_X86_SSE"] if flip else [], "resource_provider_generation": gen + 1}
            response = self.client.put(f"/resource_providers/{self.uuid}/traits", json=traits)
            if response.status_code != 200:
                self.failures.append(response.text)
            self.writes += 2

    def __enter__(self) -> Churn:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_event.set()
        self.thread.join()
        assert self.failures == []
        assert self.writes > 0


def test_every_kind_of_write_shows_in_the_other_process_under_churn(placement, writer, reader) -> None:
    other = reader.client()
    cn1 = new_provider(writer, "cn1")
    cn2 = new_provider(writer, "cn2")
    set_inventory(writer, cn1, VCPU=4, MEMORY_MB=2048)
    set_inventory(writer, cn2, VCPU=4, MEMORY_MB=2048)
    assert providers_offered(candidates(other, "resources=VCPU:4")) == {cn1, cn2}
    loads = reader.state.topology.loads
    with Churn(writer):
        # Inventory: reserved changes.
        body = {
            "resource_provider_generation": generation(writer, cn1),
            "inventories": {"VCPU": {"total": 4, "reserved": 1}, "MEMORY_MB": {"total": 2048}},
        }
        assert writer.put(f"/resource_providers/{cn1}/inventories", json=body).status_code == 200
        answer = candidates(other, "resources=VCPU:4")
        assert providers_offered(answer) == {cn2}
        assert providers_offered(candidates(other, "resources=VCPU:3")) >= {cn1, cn2}
        assert candidates(other, "resources=VCPU:3")["provider_summaries"][cn1]["resources"]["VCPU"] == {
            "capacity": 3, "used": 0,
        }
        # Traits.
        traits = {"traits": ["HW_CPU_X86_AVX2"], "resource_provider_generation": generation(writer, cn2)}
        assert writer.put(f"/resource_providers/{cn2}/traits", json=traits).status_code == 200
        answer = candidates(other, "resources=VCPU:1&required=HW_CPU_X86_AVX2")
        assert providers_offered(answer) == {cn2}
        assert answer["provider_summaries"][cn2]["traits"] == ["HW_CPU_X86_AVX2"]
        assert cn2 not in providers_offered(candidates(other, "resources=VCPU:1&required=!HW_CPU_X86_AVX2"))
        # Aggregates.
        agg = str(uuidlib.uuid4())
        aggregates = {"aggregates": [agg], "resource_provider_generation": generation(writer, cn1)}
        assert writer.put(f"/resource_providers/{cn1}/aggregates", json=aggregates).status_code == 200
        assert providers_offered(candidates(other, f"resources=VCPU:1&member_of={agg}")) == {cn1}
        aggregates = {"aggregates": [], "resource_provider_generation": generation(writer, cn1)}
        assert writer.put(f"/resource_providers/{cn1}/aggregates", json=aggregates).status_code == 200
        assert candidates(other, f"resources=VCPU:1&member_of={agg}")["allocation_requests"] == []
        # Providers created, moved to another tree, deleted.
        numa = new_provider(writer, "numa", parent=cn1)
        set_inventory(writer, numa, VGPU=2)
        answer = candidates(other, "resources=VCPU:1&resources1=VGPU:1")
        assert providers_offered(answer) == {cn1, numa}
        assert answer["provider_summaries"][numa]["root_provider_uuid"] == cn1
        moved = writer.put(f"/resource_providers/{numa}", json={"name": "numa", "parent_provider_uuid": cn2})
        assert moved.status_code == 200, moved.text
        answer = candidates(other, "resources=VCPU:1&resources1=VGPU:1")
        assert providers_offered(answer) == {cn2, numa}
        assert answer["provider_summaries"][numa]["root_provider_uuid"] == cn2
        assert answer["provider_summaries"][numa]["parent_provider_uuid"] == cn2
        assert writer.delete(f"/resource_providers/{numa}").status_code == 204
        assert candidates(other, "resources=VGPU:1")["allocation_requests"] == []
        # Resource classes renamed and deleted.
        old = placement.client("1.2")
        assert old.post("/resource_classes", json={"name": "CUSTOM_GOLD"}).status_code == 201
        set_inventory(writer, cn1, VCPU=4, CUSTOM_GOLD=2)
        assert candidates(other, "resources=CUSTOM_GOLD:1")["provider_summaries"][cn1]["resources"]["CUSTOM_GOLD"] == {
            "capacity": 2, "used": 0,
        }
        assert old.put("/resource_classes/CUSTOM_GOLD", json={"name": "CUSTOM_SILVER"}).status_code == 200
        answer = candidates(other, "resources=CUSTOM_SILVER:1")
        assert answer["provider_summaries"][cn1]["resources"] == {
            "VCPU": {"capacity": 4, "used": 0},
            "CUSTOM_SILVER": {"capacity": 2, "used": 0},
        }
        assert other.get("/allocation_candidates?resources=CUSTOM_GOLD:1").status_code == 400
        set_inventory(writer, cn1, VCPU=4)
        assert old.delete("/resource_classes/CUSTOM_SILVER").status_code == 204
        assert other.get("/allocation_candidates?resources=CUSTOM_SILVER:1").status_code == 400
        assert candidates(other, "resources=VCPU:4")["provider_summaries"][cn1]["resources"] == {
            "VCPU": {"capacity": 4, "used": 0},
        }
    # The other process applied the changes to its snapshot: never read whole.
    assert reader.state.topology.loads == loads
    assert reader.state.topology.updates > 0


def test_a_process_too_far_behind_reads_everything_again(placement, writer, reader) -> None:
    other = reader.client()
    cn1 = new_provider(writer, "cn1")
    set_inventory(writer, cn1, VCPU=4)
    assert providers_offered(candidates(other, "resources=VCPU:4")) == {cn1}
    reader.state.topology.max_positions_behind = 2
    loads = reader.state.topology.loads
    with Churn(writer):
        set_inventory(writer, cn1, VCPU=2)
        cn2 = new_provider(writer, "cn2")
        set_inventory(writer, cn2, VCPU=8)
        traits = {"traits": ["HW_CPU_X86_AVX2"], "resource_provider_generation": generation(writer, cn2)}
        assert writer.put(f"/resource_providers/{cn2}/traits", json=traits).status_code == 200
        answer = candidates(other, "resources=VCPU:3&required=HW_CPU_X86_AVX2")
        assert providers_offered(answer) == {cn2}
        assert reader.state.topology.loads > loads
        # Later changes are applied to the snapshot read whole.
        reader.state.topology.max_positions_behind = 1000
        loads = reader.state.topology.loads
        assert writer.delete(f"/resource_providers/{cn2}/traits").status_code == 204
        assert candidates(other, "resources=VCPU:3&required=HW_CPU_X86_AVX2")["allocation_requests"] == []
        set_inventory(writer, cn1, VCPU=3)
        assert providers_offered(candidates(other, "resources=VCPU:3")) == {cn1, cn2}
    assert reader.state.topology.loads == loads


def test_changes_pruned_from_the_log_make_a_process_read_everything(placement, writer, reader) -> None:
    other = reader.client()
    cn1 = new_provider(writer, "cn1")
    set_inventory(writer, cn1, VCPU=4)
    assert providers_offered(candidates(other, "resources=VCPU:4")) == {cn1}
    loads = reader.state.topology.loads
    set_inventory(writer, cn1, VCPU=2)
    set_inventory(writer, cn1, VCPU=1)
    with placement.state.db.transaction() as conn:
        # DELETE FROM topology_changes (as the writers prune old positions)
        conn.execute(topology_changes.delete())
    assert candidates(other, "resources=VCPU:2")["allocation_requests"] == []
    assert providers_offered(candidates(other, "resources=VCPU:1")) == {cn1}
    assert reader.state.topology.loads == loads + 1


def _provider_id(conn: sa.Connection, uuid: str) -> int:
    return conn.execute(sa.select(resource_providers.c.id).where(resource_providers.c.uuid == uuid)).scalar_one()


def test_a_write_committing_after_a_later_one_began_is_not_missed(placement, writer, reader) -> None:
    """A transaction takes its position, then another writer starts and a
    search runs before the first commits: the first write must show as
    soon as it commits, and the second's once it commits (it waits for
    the first, so positions commit in order)."""
    other = reader.client()
    cn1 = new_provider(writer, "cn1")
    cn2 = new_provider(writer, "cn2")
    set_inventory(writer, cn1, VCPU=4)
    set_inventory(writer, cn2, VCPU=4)
    assert providers_offered(candidates(other, "resources=VCPU:4")) == {cn1, cn2}
    second_done = threading.Event()
    second_status: list[int] = []

    def second_writer() -> None:
        client = reader.client()
        body = {"resource_provider_generation": generation(client, cn2), "inventories": {"VCPU": {"total": 2}}}
        second_status.append(client.put(f"/resource_providers/{cn2}/inventories", json=body).status_code)
        second_done.set()

    with placement.state.db.transaction() as conn:
        rp_id = _provider_id(conn, cn1)
        # UPDATE inventories SET reserved = 1 WHERE resource_provider_id = :id
        conn.execute(inventories.update().where(inventories.c.resource_provider_id == rp_id).values(reserved=1))
        topology.changed(conn, [rp_id])
        thread = threading.Thread(target=second_writer)
        thread.start()
        # Neither write is committed (the second waits for the first).
        assert providers_offered(candidates(other, "resources=VCPU:4")) == {cn1, cn2}
        assert not second_done.is_set()
    thread.join()
    assert second_status == [200]
    assert candidates(other, "resources=VCPU:4")["allocation_requests"] == []
    answer = candidates(other, "resources=VCPU:2")
    assert answer["provider_summaries"][cn1]["resources"]["VCPU"] == {"capacity": 3, "used": 0}
    assert answer["provider_summaries"][cn2]["resources"]["VCPU"] == {"capacity": 2, "used": 0}


def _limits(index: ClassIndex | None) -> list[float]:
    assert index is not None
    return [limit for limit, _rp in index.ordered()]


def _normal(snapshot: topology.Topology) -> dict:
    """A snapshot's content, independent of insertion orders."""
    indexes = {}
    for rc in sorted(snapshot.inventory):
        index = snapshot.index_of(rc)
        assert index is not None
        indexes[rc] = (
            {anchor: sorted(found) for anchor, found in index.by_anchor.items() if found},
            index.ordered(),
            sorted(index.special),
        )
    return {
        "providers": snapshot.providers,
        "uuids": snapshot.uuids,
        "ids_by_uuid": snapshot.ids_by_uuid,
        "root_of": snapshot.root_of,
        "members_of": {root: sorted(found) for root, found in snapshot.members_of.items()},
        "inventory": snapshot.inventory,
        "capacities": snapshot.capacities,
        "traits_of": snapshot.traits_of,
        "trait_names_of": snapshot.trait_names_of,
        "aggs_of": snapshot.aggs_of,
        "class_names": snapshot.class_names,
        "sharing": snapshot.sharing,
        "anchors_of": snapshot.anchors_of,
        "indexes": indexes,
    }


def test_a_snapshot_kept_up_to_date_equals_one_read_whole(placement, writer) -> None:
    """After every kind of write, the snapshot built change by change holds
    exactly what a whole read finds, class indexes included."""
    cache = TopologyCache()
    db = placement.state.db

    def check() -> None:
        with db.read() as conn:
            kept = cache.snapshot(conn)
            # Indexes are built, so that the next change patches them.
            for rc in kept.inventory:
                kept.index_of(rc)
            label = topology.current_label(conn)
            assert label is not None
            whole = topology.load(conn, *label)
        assert kept.position == whole.position
        assert _normal(kept) == _normal(whole)

    agg_shared = str(uuidlib.uuid4())
    cn1 = new_provider(writer, "cn1")
    set_inventory(writer, cn1, VCPU=4, MEMORY_MB=1024)
    check()
    cn2 = new_provider(writer, "cn2")
    set_inventory(writer, cn2, VCPU=8, MEMORY_MB=2048)
    check()
    loads = cache.loads
    numa = new_provider(writer, "numa", parent=cn1)
    check()
    set_inventory(writer, numa, VCPU=2, VGPU=1)
    check()
    body = {
        "resource_provider_generation": generation(writer, cn1),
        "inventories": {"VCPU": {"total": 4, "reserved": 2, "step_size": 2}, "MEMORY_MB": {"total": 1024}},
    }
    assert writer.put(f"/resource_providers/{cn1}/inventories", json=body).status_code == 200
    check()
    assert writer.put(f"/resource_providers/{numa}", json={"name": "numa", "parent_provider_uuid": cn2}).status_code == 200
    check()
    disk = new_provider(writer, "disk")
    set_inventory(writer, disk, DISK_GB=100)
    check()
    traits = {"traits": ["MISC_SHARES_VIA_AGGREGATE"], "resource_provider_generation": generation(writer, disk)}
    assert writer.put(f"/resource_providers/{disk}/traits", json=traits).status_code == 200
    check()
    for uuid in (disk, cn1):
        aggregates = {"aggregates": [agg_shared], "resource_provider_generation": generation(writer, uuid)}
        assert writer.put(f"/resource_providers/{uuid}/aggregates", json=aggregates).status_code == 200
        check()
    set_inventory(writer, cn2, VCPU=16)
    check()
    assert writer.put(f"/resource_providers/{numa}", json={"name": "numa", "parent_provider_uuid": None}).status_code == 200
    check()
    old = placement.client("1.2")
    assert old.post("/resource_classes", json={"name": "CUSTOM_GOLD"}).status_code == 201
    set_inventory(writer, cn2, VCPU=16, CUSTOM_GOLD=3)
    check()
    assert old.put("/resource_classes/CUSTOM_GOLD", json={"name": "CUSTOM_SILVER"}).status_code == 200
    check()
    assert writer.delete(f"/resource_providers/{disk}").status_code == 204
    check()
    assert writer.delete(f"/resource_providers/{numa}").status_code == 204
    check()
    assert cache.loads == loads
    with db.read() as conn:
        names = dict(conn.execute(sa.select(resource_classes.c.name, resource_classes.c.id)).all())
    assert "CUSTOM_SILVER" in names


def test_writers_prune_old_changes(placement, writer, reader, monkeypatch) -> None:
    monkeypatch.setattr(topology, "PRUNE_EVERY", 4)
    monkeypatch.setattr(topology, "KEEP_POSITIONS", 3)
    other = reader.client()
    cn1 = new_provider(writer, "cn1")
    assert candidates(other, "resources=VCPU:1")["allocation_requests"] == []
    loads = reader.state.topology.loads
    for total in range(1, 9):
        set_inventory(writer, cn1, VCPU=total)
    with placement.state.db.read() as conn:
        label = topology.current_label(conn)
        kept = sorted(conn.execute(sa.select(topology_changes.c.position)).scalars())
    assert label is not None and label[1] == 9
    # Pruned at position 8: positions up to 5 are gone.
    assert kept == [6, 7, 8, 9]
    # The other process, at position 1, finds changes missing and reads everything.
    assert providers_offered(candidates(other, "resources=VCPU:8")) == {cn1}
    assert reader.state.topology.loads == loads + 1


def test_writes_through_a_separate_server_process_show_at_once(placement, writer, tmp_path) -> None:
    """``corral serve`` in a child process writes (while another client
    churns through it too); this process answers."""
    config = write_config(tmp_path / "corral.conf", {
        "placement_database": {"connection": placement.url_db}, "api": {"auth_strategy": "noauth2"},
    })
    child = CorralProcess(config, tmp_path, role="api", extra_args=["--workers", "1", "--no-migrate"]).start("/placement/")
    try:
        through_child = ApiClient(
            child.url + "/placement", {"X-Auth-Token": "admin", "OpenStack-API-Version": f"placement {VERSION}"}
        )
        cn1 = new_provider(through_child, "cn1")
        set_inventory(through_child, cn1, VCPU=4)
        assert providers_offered(candidates(writer, "resources=VCPU:4")) == {cn1}
        loads = placement.state.topology.loads
        with Churn(through_child):
            set_inventory(through_child, cn1, VCPU=2)
            assert candidates(writer, "resources=VCPU:4")["allocation_requests"] == []
            traits = {"traits": ["HW_CPU_X86_AVX2"], "resource_provider_generation": generation(through_child, cn1)}
            assert through_child.put(f"/resource_providers/{cn1}/traits", json=traits).status_code == 200
            assert providers_offered(candidates(writer, "resources=VCPU:2&required=HW_CPU_X86_AVX2")) == {cn1}
            agg = str(uuidlib.uuid4())
            aggregates = {"aggregates": [agg], "resource_provider_generation": generation(through_child, cn1)}
            assert through_child.put(f"/resource_providers/{cn1}/aggregates", json=aggregates).status_code == 200
            assert providers_offered(candidates(writer, f"resources=VCPU:2&member_of={agg}")) == {cn1}
            cn2 = new_provider(through_child, "cn2", parent=cn1)
            set_inventory(through_child, cn2, VGPU=1)
            answer = candidates(writer, "resources=VCPU:1&resources1=VGPU:1")
            assert providers_offered(answer) == {cn1, cn2}
            assert through_child.put(f"/resource_providers/{cn2}", json={"name": "cn2", "parent_provider_uuid": None}).status_code == 200
            assert candidates(writer, "resources=VCPU:1&resources1=VGPU:1")["allocation_requests"] == []
            assert through_child.delete(f"/resource_providers/{cn2}").status_code == 204
            assert candidates(writer, "resources=VGPU:1")["allocation_requests"] == []
            # And the other way round: this process writes, the child answers.
            set_inventory(writer, cn1, VCPU=6)
            assert providers_offered(candidates(through_child, "resources=VCPU:6")) == {cn1}
        assert placement.state.topology.loads == loads
    finally:
        child.stop()


def test_a_large_whole_read_is_settled_out_of_the_collectors_way(placement, writer) -> None:
    gc.unfreeze()
    try:
        new_provider(writer, "cn1")
        small, large = TopologyCache(settle_at=2), TopologyCache(settle_at=1)
        with placement.state.db.read() as conn:
            small.snapshot(conn)
            assert gc.get_freeze_count() == 0
            large.snapshot(conn)
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()


def _snapshot(placement, cache: TopologyCache):
    with placement.state.db.read() as conn:
        return cache.snapshot(conn)


def test_row_changes_are_made_in_place_and_key_changes_on_copies(placement, writer) -> None:
    """A search still using an older snapshot may see a later row of a
    provider, but never a map whose providers change under it."""
    cn1 = new_provider(writer, "cn1")
    set_inventory(writer, cn1, VCPU=4)
    cache = TopologyCache()
    first = _snapshot(placement, cache)
    (vcpu,) = first.inventory
    first.index_of(vcpu)
    rows_before = first.inventory[vcpu]
    set_inventory(writer, cn1, VCPU=8)
    second = _snapshot(placement, cache)
    assert cache.updates == 1
    assert second.inventory[vcpu] is rows_before and second.capacities is first.capacities
    assert rows_before[topology_id(placement, cn1)][0] == 8
    # The class index is patched on a copy: the first snapshot's stays as it was.
    assert _limits(first.index_of(vcpu)) == [4] and _limits(second.index_of(vcpu)) == [8]
    cn2 = new_provider(writer, "cn2")
    set_inventory(writer, cn2, VCPU=2)
    third = _snapshot(placement, cache)
    assert third.inventory[vcpu] is not rows_before and len(rows_before) == 1
    assert third.capacities is not second.capacities and len(second.capacities) == 1
    assert _limits(third.index_of(vcpu)) == [2, 8]


def topology_id(placement, uuid: str) -> int:
    with placement.state.db.read() as conn:
        return conn.execute(sa.select(resource_providers.c.id).where(resource_providers.c.uuid == uuid)).scalar_one()


def test_a_failed_catch_up_makes_the_next_search_read_everything(placement, writer, monkeypatch) -> None:
    cn1 = new_provider(writer, "cn1")
    set_inventory(writer, cn1, VCPU=4)
    cache = TopologyCache()
    _snapshot(placement, cache)
    set_inventory(writer, cn1, VCPU=8)

    def broken(self, ids, known):
        raise RuntimeError("the database went away")

    with monkeypatch.context() as patched:
        patched.setattr(topology_cache._Patch, "_traits", broken)
        with pytest.raises(RuntimeError):
            _snapshot(placement, cache)
    assert cache.current is None
    loads = cache.loads
    found = _snapshot(placement, cache)
    assert cache.loads == loads + 1
    assert found.inventory[next(iter(found.inventory))][topology_id(placement, cn1)][0] == 8


def test_snapshot_reads_and_lag_are_counted(placement, writer) -> None:
    from corral.core import metrics

    def count(name: str, **labels: str) -> float:
        return metrics.REGISTRY.get_sample_value(name, labels) or 0.0

    cn1 = new_provider(writer, "cn1")
    set_inventory(writer, cn1, VCPU=4)
    full, changes = count("corral_placement_snapshot_reads_total", kind="full"), \
        count("corral_placement_snapshot_reads_total", kind="changes")
    behind, lags = count("corral_placement_snapshot_positions_behind_sum"), \
        count("corral_placement_snapshot_positions_behind_count")
    cache = TopologyCache()
    _snapshot(placement, cache)
    assert count("corral_placement_snapshot_reads_total", kind="full") == full + 1
    _snapshot(placement, cache)  # up to date: nothing read, nothing counted
    assert count("corral_placement_snapshot_reads_total", kind="full") == full + 1
    set_inventory(writer, cn1, VCPU=8)
    set_inventory(writer, cn1, VCPU=6)
    _snapshot(placement, cache)
    assert count("corral_placement_snapshot_reads_total", kind="changes") == changes + 1
    assert count("corral_placement_snapshot_read_seconds_count", kind="changes") >= 1
    # Two positions behind, found once.
    assert count("corral_placement_snapshot_positions_behind_count") == lags + 1
    assert count("corral_placement_snapshot_positions_behind_sum") == behind + 2
