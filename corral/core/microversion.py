"""Microversion negotiation shared by every service.

Each service declares one :class:`VersionSpec` next to its canonical,
commented list of microversions.  The HTTP layer negotiates the request's
version with it before routing and stamps the service's version headers on
every response, errors included.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import microversion_parse
from microversion_parse import Version

from corral.core.errors import VersionNotAcceptable


def parse(text: str) -> Version:
    """'1.28' -> Version(1, 28); raises TypeError on malformed input."""
    version = microversion_parse.parse_version_string(text)
    if version.major < 0 or version.minor < 0 or "." not in text.strip():
        raise TypeError(f"invalid version string: {text}")
    return version


def _no_extra_headers(_version: Version | None, _spec: VersionSpec) -> list[tuple[str, str]]:
    return []


@dataclass(frozen=True)
class VersionSpec:
    service_type: str
    # Every supported version, oldest first, as "major.minor" strings.
    versions: Sequence[str]
    # Older per-service headers to read when the standard one is absent.
    legacy_headers: Sequence[str] = ()
    # Response headers for a negotiated version (None when negotiation failed).
    response_headers: Callable[[Version | None, VersionSpec], list[tuple[str, str]]] = field(
        default=_no_extra_headers
    )

    @property
    def min(self) -> Version:
        return parse(self.versions[0])

    @property
    def max(self) -> Version:
        return parse(self.versions[-1])

    def negotiate(self, headers: Mapping[str, str]) -> Version:
        """The version a request asks for, the minimum when it asks for none.

        Raises :class:`VersionNotAcceptable` for versions outside the range
        and, with ``malformed=True``, for text that is not a version at all.
        """
        requested = microversion_parse.get_version(
            headers, service_type=self.service_type, legacy_headers=list(self.legacy_headers)
        )
        if requested is None:
            return self._with_bounds(self.min)
        requested = requested.strip()
        if requested.lower() == "latest":
            return self._with_bounds(self.max)
        try:
            version = parse(requested)
        except TypeError:
            raise VersionNotAcceptable(
                f"Invalid version string: {requested}", requested=requested, malformed=True
            ) from None
        if not self.min <= version <= self.max:
            raise VersionNotAcceptable(
                f"Unacceptable version header: {requested}", requested=requested
            )
        return self._with_bounds(version)

    def _with_bounds(self, version: Version) -> Version:
        version.min_version = self.min
        version.max_version = self.max
        return version
