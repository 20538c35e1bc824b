"""A small builder of Placement data written straight into the tables.

Used by the allocation-candidates tests to lay out provider trees,
inventories, traits, aggregates and allocations in one transaction without
going through the API.  (No tests live here.)
"""

from __future__ import annotations

import uuid as uuidlib
from dataclasses import dataclass, field

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from corral.core.db import Database
from corral.placement.db import tables as t
from corral.placement.db import topology


def make_uuid(name: str) -> str:
    return str(uuidlib.uuid5(uuidlib.NAMESPACE_DNS, f"corral-test-{name}"))


@dataclass
class Cloud:
    """Collects rows, then :meth:`write` s them in one transaction."""

    providers: dict[str, dict] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)
    inventories: list[dict] = field(default_factory=list)
    traits: list[tuple[str, str]] = field(default_factory=list)
    aggregates: list[tuple[str, str]] = field(default_factory=list)
    allocations: list[tuple[str, str, int]] = field(default_factory=list)
    # Traits to create even when no provider has them.
    known_traits: set[str] = field(default_factory=set)

    def provider(self, name: str, parent: str | None = None) -> str:
        self.providers[name] = {"uuid": make_uuid(name), "parent": parent}
        self.order.append(name)
        return self.providers[name]["uuid"]

    def uuid(self, name: str) -> str:
        return self.providers[name]["uuid"]

    def inventory(
        self,
        name: str,
        rc: str,
        total: int,
        *,
        reserved: int = 0,
        min_unit: int = 1,
        max_unit: int | None = None,
        step_size: int = 1,
        allocation_ratio: float = 1.0,
    ) -> None:
        self.inventories.append(
            {
                "provider": name,
                "rc": rc,
                "total": total,
                "reserved": reserved,
                "min_unit": min_unit,
                "max_unit": total if max_unit is None else max_unit,
                "step_size": step_size,
                "allocation_ratio": allocation_ratio,
            }
        )

    def trait(self, name: str, *trait_names: str) -> None:
        self.traits.extend((name, trait) for trait in trait_names)

    def aggregate(self, name: str, *aggregate_names: str) -> None:
        self.aggregates.extend((name, agg) for agg in aggregate_names)

    def allocate(self, name: str, rc: str, used: int) -> None:
        self.allocations.append((name, rc, used))

    # ------------------------------------------------------------ writing

    def write(self, db: Database) -> dict[str, int]:
        return db.write(self._write)

    def _write(self, conn: Connection) -> dict[str, int]:
        ids: dict[str, int] = {}
        for name in self.order:
            info = self.providers[name]
            parent = ids[info["parent"]] if info["parent"] else None
            root = None
            if parent is not None:
                root = conn.execute(
                    sa.select(t.resource_providers.c.root_provider_id).where(t.resource_providers.c.id == parent)
                ).scalar_one()
            new_id = conn.execute(
                t.resource_providers.insert().values(
                    uuid=info["uuid"], name=name, generation=0, parent_provider_id=parent, root_provider_id=root
                )
            ).inserted_primary_key[0]
            if root is None:
                conn.execute(
                    t.resource_providers.update().where(t.resource_providers.c.id == new_id).values(root_provider_id=new_id)
                )
            ids[name] = new_id
        classes = self._ensure(conn, t.resource_classes, {inv["rc"] for inv in self.inventories})
        for inv in self.inventories:
            conn.execute(
                t.inventories.insert().values(
                    resource_provider_id=ids[inv["provider"]],
                    resource_class_id=classes[inv["rc"]],
                    total=inv["total"],
                    reserved=inv["reserved"],
                    min_unit=inv["min_unit"],
                    max_unit=inv["max_unit"],
                    step_size=inv["step_size"],
                    allocation_ratio=inv["allocation_ratio"],
                )
            )
        trait_ids = self._ensure(conn, t.traits, {trait for _name, trait in self.traits} | self.known_traits)
        for name, trait in sorted(set(self.traits)):
            conn.execute(t.resource_provider_traits.insert().values(resource_provider_id=ids[name], trait_id=trait_ids[trait]))
        agg_ids: dict[str, int] = {}
        for agg in sorted({agg for _name, agg in self.aggregates}):
            agg_ids[agg] = conn.execute(t.placement_aggregates.insert().values(uuid=make_uuid(agg))).inserted_primary_key[0]
        for name, agg in sorted(set(self.aggregates)):
            conn.execute(
                t.resource_provider_aggregates.insert().values(resource_provider_id=ids[name], aggregate_id=agg_ids[agg])
            )
        for index, (name, rc, used) in enumerate(self.allocations):
            conn.execute(
                t.allocations.insert().values(
                    resource_provider_id=ids[name],
                    consumer_id=make_uuid(f"consumer-{index}"),
                    resource_class_id=classes[rc],
                    used=used,
                )
            )
        # Written straight to the tables, so the change is announced as the API's writes do.
        topology.changed(conn)
        return ids

    @staticmethod
    def _ensure(conn: Connection, table: sa.Table, names: set[str]) -> dict[str, int]:
        if not names:
            return {}
        found = {
            row.name: row.id for row in conn.execute(sa.select(table.c.name, table.c.id).where(table.c.name.in_(sorted(names))))
        }
        for name in sorted(names - set(found)):
            found[name] = conn.execute(table.insert().values(name=name)).inserted_primary_key[0]
        return found


def seed_tree() -> Cloud:
    """The tree of the forbidden-aggregates design.

    cn1 (aggA) with numa1_1 (aggC) and numa1_2; cn2 (aggB) with numa2_1 and
    numa2_2; sharing storage ss1 (aggB) and ss2 (aggC).  NUMA nodes hold
    VCPU, compute nodes MEMORY_MB, sharing providers DISK_GB, so that every
    provider can be asked for on its own.
    """
    cloud = Cloud()
    for cn, numas in (("cn1", ("numa1_1", "numa1_2")), ("cn2", ("numa2_1", "numa2_2"))):
        cloud.provider(cn)
        cloud.inventory(cn, "MEMORY_MB", 4096)
        for numa in numas:
            cloud.provider(numa, parent=cn)
            cloud.inventory(numa, "VCPU", 8)
    for ss in ("ss1", "ss2"):
        cloud.provider(ss)
        cloud.inventory(ss, "DISK_GB", 1000)
        cloud.trait(ss, "MISC_SHARES_VIA_AGGREGATE")
    cloud.aggregate("cn1", "aggA")
    cloud.aggregate("numa1_1", "aggC")
    cloud.aggregate("cn2", "aggB")
    cloud.aggregate("ss1", "aggB")
    cloud.aggregate("ss2", "aggC")
    return cloud
