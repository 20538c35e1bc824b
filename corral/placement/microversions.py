"""Placement's microversions: the one canonical list.

Every supported version, oldest first, with what it changed.  Handlers and
schemas refer to versions by number; nothing else lists them.
"""

from __future__ import annotations

from microversion_parse import Version

from corral.core.microversion import VersionSpec

SERVICE_TYPE = "placement"

VERSIONS = (
    "1.0",   # resource providers, inventories, allocations, usages
    "1.1",   # provider aggregates: GET/PUT /resource_providers/{uuid}/aggregates
    "1.2",   # custom resource classes: /resource_classes
    "1.3",   # member_of filter on GET /resource_providers
    "1.4",   # resources filter on GET /resource_providers
    "1.5",   # DELETE /resource_providers/{uuid}/inventories
    "1.6",   # traits: /traits and /resource_providers/{uuid}/traits
    "1.7",   # PUT /resource_classes/{name} creates without a body
    "1.8",   # project_id and user_id required in PUT /allocations/{consumer}
    "1.9",   # GET /usages per project (and user)
    "1.10",  # GET /allocation_candidates
    "1.11",  # 'allocations' link in provider representations
    "1.12",  # allocations as a dict keyed by provider in PUT and candidates
    "1.13",  # POST /allocations for several consumers at once
    "1.14",  # parent_provider_uuid / root_provider_uuid; in_tree filter
    "1.15",  # last-modified and cache-control headers
    "1.16",  # limit on GET /allocation_candidates
    "1.17",  # required traits on candidates; traits in provider summaries
    "1.18",  # required traits on GET /resource_providers
    "1.19",  # aggregates carry the provider generation (409 on mismatch)
    "1.20",  # POST /resource_providers answers 200 with the provider
    "1.21",  # member_of on GET /allocation_candidates
    "1.22",  # forbidden traits (!TRAIT) in required
    "1.23",  # 'code' in error bodies
    "1.24",  # member_of repeatable on GET /resource_providers
    "1.25",  # numbered request groups on candidates; group_policy
    "1.26",  # inventory reserved may equal total
    "1.27",  # every inventory of a provider in provider summaries
    "1.28",  # consumer generations on allocations
    "1.29",  # nested providers in allocation candidates
    "1.30",  # POST /reshaper
    "1.31",  # in_tree (and in_tree<N>) on candidates
    "1.32",  # forbidden aggregates: member_of=!agg and !in:
    "1.33",  # request-group suffixes [A-Za-z0-9_-]{1,64}
    "1.34",  # 'mappings' in allocation requests
    "1.35",  # root_required on candidates
    "1.36",  # same_subtree; resourceless request groups
    "1.37",  # re-parenting and un-parenting providers
    "1.38",  # consumer types (allocations, usages, reshaper)
    "1.39",  # any-of traits: required=in:T1,T2
)


def _response_headers(version: Version | None, spec: VersionSpec) -> list[tuple[str, str]]:
    shown = version if version is not None else spec.min
    return [
        ("openstack-api-version", f"{SERVICE_TYPE} {shown}"),
        ("vary", "openstack-api-version"),
    ]


# Placement reads only the standard header; the legacy per-service header
# is ignored (as upstream does).
SPEC = VersionSpec(
    service_type=SERVICE_TYPE,
    versions=VERSIONS,
    legacy_headers=(),
    response_headers=_response_headers,
)
