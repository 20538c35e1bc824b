"""Rendered provider summaries are kept across snapshots, checked before use.

Later snapshots share the kept summaries instead of copying them; a
search on an older snapshot may still store its own summary of a provider
that changed since.  Each kept summary names the capacities, traits and
provider row it was made from, so an answer never shows another
snapshot's summary.
"""

from __future__ import annotations

from corral.placement.api.handlers.allocation_candidates import render
from corral.placement.db.candidates import Answer
from corral.placement.db.topology import ProviderRow

VCPU = 0
ROWS = ((VCPU, 8, 0),)


def answer(derived: dict, traits: dict, rows=ROWS, row=ProviderRow("rp-uuid", None, 1)) -> Answer:
    return Answer(
        candidates=[],
        providers={1: row},
        uuids={1: "rp-uuid", 2: "root-uuid"},
        summarised=[1],
        inventories={1: rows},
        unused_rows={1: rows},
        derived=derived,
        traits=traits,
        class_names={VCPU: "VCPU"},
    )


def summary(found: Answer) -> dict:
    return render(found, (1, 39))["provider_summaries"]["rp-uuid"]


def test_a_summary_is_made_once_and_reused() -> None:
    derived: dict = {}
    first = summary(answer(derived, {1: ["HW_CPU_X86_AVX2"]}))
    traits = derived[next(iter(derived))][1][1]
    again = summary(answer(derived, {1: traits}))
    assert again is first


def test_an_older_snapshots_summary_is_not_shown_by_a_newer_one() -> None:
    derived: dict = {}
    old_traits, new_traits = ["HW_CPU_X86_AVX2"], ["HW_CPU_X86_SSE"]
    assert summary(answer(derived, {1: old_traits}))["traits"] == ["HW_CPU_X86_AVX2"]
    assert summary(answer(derived, {1: new_traits}))["traits"] == ["HW_CPU_X86_SSE"]
    # A search still on the older snapshot stores its summary again ...
    assert summary(answer(derived, {1: old_traits}))["traits"] == ["HW_CPU_X86_AVX2"]
    # ... and the newer snapshot does not take it.
    assert summary(answer(derived, {1: new_traits}))["traits"] == ["HW_CPU_X86_SSE"]
    assert summary(answer(derived, {}))["traits"] == []


def test_changed_capacities_or_provider_row_make_a_new_summary() -> None:
    derived: dict = {}
    assert summary(answer(derived, {}))["resources"] == {"VCPU": {"capacity": 8, "used": 0}}
    bigger = ((VCPU, 16, 0),)
    assert summary(answer(derived, {}, rows=bigger))["resources"] == {"VCPU": {"capacity": 16, "used": 0}}
    assert summary(answer(derived, {}, rows=bigger))["root_provider_uuid"] == "rp-uuid"
    moved = ProviderRow("rp-uuid", 2, 2)
    found = summary(answer(derived, {}, rows=bigger, row=moved))
    assert (found["root_provider_uuid"], found["parent_provider_uuid"]) == ("root-uuid", "root-uuid")
