"""Bare Metal microversions: the one canonical list.

Every version this service implements, oldest first, with what it
changed.  Requests without a version header get the oldest (1.1), as
upstream answers.  The newest listed version is the maximum advertised;
clients negotiate down to it.
"""

from __future__ import annotations

from microversion_parse import Version

from corral.core.microversion import VersionSpec

SERVICE_TYPE = "baremetal"
LEGACY_HEADER = "X-OpenStack-Ironic-API-Version"

VERSIONS = (
    "1.1",   # nodes, drivers; the initial API
    "1.2",   # 'available' replaces the empty provision state
    "1.3",   # driver_internal_info on nodes
    "1.4",   # 'manageable' state and the manage verb
    "1.5",   # node names (GET/PATCH/DELETE by name)
    "1.6",   # inspection fields on nodes
    "1.7",   # clean_step on nodes
    "1.8",   # ?fields= on node show and list
    "1.9",   # ?provision_state= filter on the node list
)


def _no_headers(_version: Version | None, _spec: VersionSpec) -> list[tuple[str, str]]:
    # Ironic's headers depend on the request (a malformed version header
    # gets none), so corral.baremetal.api.app adds them per request.
    return []


SPEC = VersionSpec(
    service_type=SERVICE_TYPE,
    versions=VERSIONS,
    legacy_headers=(LEGACY_HEADER,),
    response_headers=_no_headers,
)

MIN_VERSION = VERSIONS[0]
MAX_VERSION = VERSIONS[-1]
