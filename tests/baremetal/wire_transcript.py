"""Read an Ironic wire transcript and compare answers against it.

The transcript (``reference/ironic/wire-transcript.md`` in the shared
directory beside the checkout) holds fenced blocks, one per exchange::

    METHOD /path
    Request-Header: value
    <request body on one line, if any>
    --> STATUS
    response-header: value
    <JSON body over several lines, or "(empty body)">
    # a comment

Values that differ from run to run are placeholders: ``<uuid-N>`` (the same
N is the same UUID everywhere), ``<ts>``, ``<base>`` (the endpoint's URL)
and ``<links: rel,...>`` (a list of link objects with those relations).
Lines starting with ``> `` between blocks are notes about steps that were
not recorded.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
# CI checks the shared directory out beside the repository.
SHARED = Path(os.environ.get("CORRAL_SHARED_DIR", REPO_ROOT.parent / "shared"))
TRANSCRIPT = SHARED / "reference" / "ironic" / "wire-transcript.md"

_REQUEST_LINE = re.compile(r"^(GET|POST|PUT|PATCH|DELETE|HEAD) (\S+)$")
_HEADER = re.compile(r"^([A-Za-z][A-Za-z0-9-]*): (.*)$")
_PLACEHOLDER = re.compile(r"<uuid-\d+>|<ts>|<base>")
_UUID = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
# Record timestamps end in +00:00; a few upstream stamps inside
# driver_internal_info are naive UTC.
_TIMESTAMP = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,6})?(\+00:00)?"
_LINKS = re.compile(r"^<links: ([a-z,]+)>$")


@dataclass
class Exchange:
    line: int  # of the request line, 1-based
    section: str
    notes: list[str]
    method: str
    path: str
    request_headers: dict[str, str]
    request_body: str | None
    status: int
    response_headers: dict[str, str]  # names lower case
    response_body: Any = field(default=None)  # None for "(empty body)"

    @property
    def request(self) -> str:
        body = f" {self.request_body}" if self.request_body is not None else ""
        return f"{self.method} {self.path}{body}"


def parse(text: str) -> list[Exchange]:
    exchanges: list[Exchange] = []
    section, notes = "", []
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        if line.startswith("## "):
            section = line[3:].strip()
        elif line.startswith("> "):
            notes.append(line[2:].strip())
        elif line == "```":
            end = lines.index("```", index + 1)
            exchanges.append(_exchange(lines[index + 1:end], index + 2, section, notes))
            notes = []
            index = end
        index += 1
    return exchanges


def _exchange(block: list[str], first_line: int, section: str, notes: list[str]) -> Exchange:
    match = _REQUEST_LINE.match(block[0])
    assert match, f"line {first_line}: not a request line: {block[0]!r}"
    arrow = next(i for i, line in enumerate(block) if line.startswith("--> "))
    request_headers: dict[str, str] = {}
    request_body = None
    for line in block[1:arrow]:
        header = _HEADER.match(line)
        if header and request_body is None:
            request_headers[header.group(1)] = header.group(2)
        else:
            request_body = line
    response_headers: dict[str, str] = {}
    rest = block[arrow + 1:]
    while rest and _HEADER.match(rest[0]):
        header = _HEADER.match(rest[0])
        assert header
        response_headers[header.group(1).lower()] = header.group(2)
        rest = rest[1:]
    body_lines = [line for line in rest if not line.startswith("# ")]
    body = None if body_lines == ["(empty body)"] else json.loads("\n".join(body_lines))
    return Exchange(first_line, section, list(notes), match.group(1), match.group(2), request_headers,
                    request_body, int(block[arrow][4:]), response_headers, body)


class Placeholders:
    """Values bound to the transcript's placeholders during a replay.

    ``hosts`` maps host names seen upstream to the ones the server under
    test uses (a conductor's host name is the machine's).
    """

    def __init__(self, base: str, hosts: dict[str, str]) -> None:
        self.base = base
        self.hosts = hosts
        self.uuids: dict[str, str] = {}
        self.extra_keys: set[tuple[str, str]] = set()

    def fill(self, text: str, fresh: Any) -> str:
        """``text`` with every ``<uuid-N>`` replaced; unbound ones get ``fresh()``."""
        def one(match: re.Match[str]) -> str:
            name = match.group(0)
            if name == "<base>":
                return self.base
            if name not in self.uuids:
                self.uuids[name] = str(fresh())
            return self.uuids[name]

        return re.sub(r"<uuid-\d+>|<base>", one, text)

    def match(self, expected: str, actual: str, bound: dict[str, str]) -> bool:
        """Whether ``actual`` is ``expected`` with placeholders filled in.

        Unbound UUID placeholders take the values they match (into ``bound``),
        provided no other placeholder holds that value already.
        """
        for upstream, ours in self.hosts.items():
            expected = expected.replace(upstream, ours)
        pattern, groups, pos = "", {}, 0
        for token in _PLACEHOLDER.finditer(expected):
            pattern += re.escape(expected[pos:token.start()])
            name = token.group(0)
            if name == "<ts>":
                pattern += _TIMESTAMP
            elif name == "<base>":
                pattern += re.escape(self.base)
            elif name in bound:
                pattern += re.escape(bound[name])
            elif name in groups:
                pattern += f"(?P={groups[name]})"
            else:
                groups[name] = f"u{len(groups)}"
                pattern += f"(?P<{groups[name]}>{_UUID})"
            pos = token.end()
        pattern += re.escape(expected[pos:])
        found = re.fullmatch(pattern, actual, re.DOTALL)
        if not found:
            return False
        taken = set(bound.values())
        for name, group in groups.items():
            if found.group(group) in taken:
                return False
            bound[name] = found.group(group)
        return True


def differences(expected: Any, actual: Any, names: Placeholders, bound: dict[str, str],
                where: str = "body") -> list[str]:
    """How ``actual`` differs from ``expected``: keys, types and values.

    Keys listed in ``names.extra_keys`` for a place may appear in ``actual``
    only.
    """
    if isinstance(expected, str):
        links = _LINKS.match(expected)
        if links:
            return _link_differences(links.group(1).split(","), actual, names, where)
        if isinstance(actual, str) and expected.startswith("{") and where.endswith("error_message"):
            return differences(json.loads(expected), json.loads(actual), names, bound, where + "(decoded)")
        if not isinstance(actual, str) or not names.match(expected, actual, bound):
            return [f"{where}: expected {expected!r}, got {actual!r}"]
        return []
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return [f"{where}: expected an object, got {actual!r}"]
        found = []
        allowed = {key for place, key in names.extra_keys if where.endswith(place)}
        if set(expected) != set(actual) - allowed:
            missing, extra = sorted(set(expected) - set(actual)), sorted(set(actual) - set(expected) - allowed)
            found.append(f"{where}: keys missing {missing}, unexpected {extra}")
        for key in expected.keys() & actual.keys():
            found += differences(expected[key], actual[key], names, bound, f"{where}.{key}")
        return found
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            return [f"{where}: expected {expected!r}, got {actual!r}"]
        found = []
        for position, (one, other) in enumerate(zip(expected, actual)):
            found += differences(one, other, names, bound, f"{where}[{position}]")
        return found
    # null, booleans and numbers: equal values of the same type (True is not 1).
    if type(expected) is not type(actual) or expected != actual:
        return [f"{where}: expected {expected!r}, got {actual!r}"]
    return []


def _link_differences(rels: list[str], actual: Any, names: Placeholders, where: str) -> list[str]:
    """Upstream's links: ``href`` and ``rel``, ``type`` on documentation links."""
    if not isinstance(actual, list) or [link.get("rel") for link in actual if isinstance(link, dict)] != rels:
        return [f"{where}: expected links {rels}, got {actual!r}"]
    for link in actual:
        ours = link["rel"] in ("self", "bookmark")
        if not {"href", "rel"} <= set(link) <= {"href", "rel", "type"} or (
                ours and (not link["href"].startswith(names.base + "/") or "type" in link)):
            return [f"{where}: malformed links {actual!r}"]
    return []
