"""The filters of ``GET /resource_providers`` as one set-based query.

Every filter applies to the provider itself (aggregates on a root do not
span its tree here, unlike the unsuffixed group of allocation candidates):

* ``name`` / ``uuid``: equality;
* ``in_tree``: providers whose root is the root of the named provider;
* ``resources``: an inventory of each class with room for the amount
  (capacity, min_unit, max_unit, step_size, current usage);
* ``required``: each any-of set matched by one of the provider's traits, no
  forbidden trait;
* ``member_of``: each any-of set matched by one of the provider's
  aggregates, no forbidden aggregate.

:func:`provider_id_query` returns the ``SELECT`` of matching ids so that a
caller can embed it (``WHERE rp.id IN (...)``); :func:`matching_provider_ids`
runs it.  Unknown resource classes or traits are a 400, with upstream's
wording for this endpoint.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from corral.core.errors import BadRequest
from corral.placement.db.candidates import UnknownNames, resolve_names
from corral.placement.db.tables import (
    allocations,
    inventories,
    resource_provider_aggregates,
    resource_provider_traits,
    resource_providers,
)
from corral.placement.domain.candidates import ProviderFilter
from corral.placement.domain.inventory import MAX_INT

_rp = resource_providers


def _unknown(error: UnknownNames) -> BadRequest:
    if error.resource_classes:
        return BadRequest(
            f"Invalid resource class in resources parameter: No such resource class {error.resource_classes[0]}."
        )
    return BadRequest(f'Invalid trait(s) in "required" parameter: No such trait(s): {", ".join(error.traits)}.')


def _has_trait_in(trait_ids: list[int]) -> sa.ColumnElement:
    # EXISTS (SELECT 1 FROM resource_provider_traits AS t
    #         WHERE t.resource_provider_id = rp.id AND t.trait_id IN (:trait_ids))
    t = resource_provider_traits.alias()
    return sa.exists().where(t.c.resource_provider_id == _rp.c.id, t.c.trait_id.in_(trait_ids))


def _in_aggregate(aggregate_ids: list[int]) -> sa.ColumnElement:
    # EXISTS (SELECT 1 FROM resource_provider_aggregates AS a
    #         WHERE a.resource_provider_id = rp.id AND a.aggregate_id IN (:aggregate_ids))
    a = resource_provider_aggregates.alias()
    return sa.exists().where(a.c.resource_provider_id == _rp.c.id, a.c.aggregate_id.in_(aggregate_ids))


def _has_room(rc: int, amount: int) -> sa.ColumnElement:
    # EXISTS (SELECT 1 FROM inventories AS inv
    #         WHERE inv.resource_provider_id = rp.id AND inv.resource_class_id = :rc
    #           AND COALESCE((SELECT SUM(used) FROM allocations
    #                         WHERE resource_provider_id = inv.resource_provider_id
    #                           AND resource_class_id = :rc), 0)
    #               + :amount <= (inv.total - inv.reserved) * inv.allocation_ratio
    #           AND inv.min_unit <= :amount AND inv.max_unit >= :amount
    #           AND MOD(:amount, inv.step_size) = 0)
    if amount > MAX_INT:
        # No inventory's max_unit is larger, and the database could not
        # compare with it (INTEGER on PostgreSQL, 64 bits on SQLite).
        return sa.false()
    inv = inventories.alias()
    used = (
        sa.select(sa.func.coalesce(sa.func.sum(allocations.c.used), 0))
        .where(allocations.c.resource_provider_id == inv.c.resource_provider_id, allocations.c.resource_class_id == rc)
        .scalar_subquery()
    )
    return sa.exists().where(
        inv.c.resource_provider_id == _rp.c.id,
        inv.c.resource_class_id == rc,
        used + amount <= (inv.c.total - inv.c.reserved) * inv.c.allocation_ratio,
        inv.c.min_unit <= amount,
        inv.c.max_unit >= amount,
        sa.literal(amount) % inv.c.step_size == 0,
    )


def provider_id_query(
    conn: Connection,
    wanted: ProviderFilter,
    *,
    standard_classes: dict[str, int] | None = None,
    standard_traits: dict[str, int] | None = None,
) -> sa.Select | None:
    """``SELECT rp.id FROM resource_providers AS rp WHERE <filters>``; None when nothing filters.

    Names are resolved first (one query); an any-of list of aggregates none
    of which exist, or an unknown ``in_tree`` provider, gives a query that
    matches nothing.
    """
    trait_names = set(wanted.forbidden_traits).union(*wanted.required_traits) if wanted.required_traits else set(
        wanted.forbidden_traits
    )
    aggregate_uuids = set(wanted.forbidden_aggs).union(*wanted.member_of) if wanted.member_of else set(
        wanted.forbidden_aggs
    )
    trees = [wanted.in_tree] if wanted.in_tree else []
    if not (wanted.resources or trait_names or aggregate_uuids or trees or wanted.name or wanted.uuid):
        return None
    try:
        names = resolve_names(
            conn,
            wanted.resources,
            trait_names,
            aggregate_uuids,
            trees,
            standard_classes=standard_classes,
            standard_traits=standard_traits,
        )
    except UnknownNames as error:
        raise _unknown(error) from None
    clauses: list[sa.ColumnElement] = []
    if wanted.name is not None:
        clauses.append(_rp.c.name == wanted.name)
    if wanted.uuid is not None:
        clauses.append(_rp.c.uuid == wanted.uuid)
    if wanted.in_tree:
        root = names.tree_roots.get(wanted.in_tree)
        clauses.append(_rp.c.root_provider_id == root if root is not None else sa.false())
    for any_of in wanted.required_traits:
        clauses.append(_has_trait_in(sorted(names.traits[name] for name in any_of)))
    if wanted.forbidden_traits:
        clauses.append(sa.not_(_has_trait_in(sorted(names.traits[name] for name in wanted.forbidden_traits))))
    for any_of in wanted.member_of:
        ids = sorted(names.aggregates[u] for u in any_of if u in names.aggregates)
        clauses.append(_in_aggregate(ids) if ids else sa.false())
    forbidden = sorted(names.aggregates[u] for u in wanted.forbidden_aggs if u in names.aggregates)
    if forbidden:
        clauses.append(sa.not_(_in_aggregate(forbidden)))
    for rc_name, amount in wanted.resources.items():
        clauses.append(_has_room(names.classes[rc_name], amount))
    return sa.select(_rp.c.id).where(*clauses)


def matching_provider_ids(
    conn: Connection,
    wanted: ProviderFilter,
    *,
    standard_classes: dict[str, int] | None = None,
    standard_traits: dict[str, int] | None = None,
) -> set[int] | None:
    """Ids of the providers matching ``wanted``; None when nothing filters (all match)."""
    statement = provider_id_query(conn, wanted, standard_classes=standard_classes, standard_traits=standard_traits)
    if statement is None:
        return None
    return {row[0] for row in conn.execute(statement)}
