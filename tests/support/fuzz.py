"""A request fuzzer over a service's route table (Hypothesis).

Every request is drawn from the service's own route table: a route and one
of its methods (now and then a method it does not have), its path
parameters filled with known identifiers or hostile text, a query string
and, for writes, a body.  Bodies are valid examples with one value
replaced, or documents built from the names the service's schemas and
constant tables use, or raw junk (truncated, deeply nested, not UTF-8).
Values lean towards the ones that break things: NUL characters, integers
at and beyond 32 and 64 bits, huge floats, dates at the ends of time.

Every answer must be below 500 and, when it is an error, in the service's
own error body.  Routes added later are fuzzed without changes here.

Before the random requests, a sweep puts each of the nastiest values in
every place of every example (path parameters, query values, body
members) once.

``CORRAL_FUZZ_EXAMPLES`` sets the number of random requests per service and
backend (default :data:`CI_EXAMPLES`, drawn from a fixed seed so that a
run is repeatable); ``CORRAL_FUZZ_RANDOM=1`` draws a new sequence each run;
``CORRAL_FUZZ_KEEP_GOING=1`` reports every failing request at the end
instead of stopping at the first.
"""

from __future__ import annotations

import copy
import importlib
import inspect
import json
import os
import pkgutil
import re
import urllib.parse
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import requests
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from corral.core.http import HTTP_METHODS, Endpoint, Route

CI_EXAMPLES = 250
RESEED_EVERY = 100
REPORT = pytest.StashKey[list[str]]()

_PARAM = re.compile(r"{(\w+)}")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]{0,40}$")

# --------------------------------------------------------------- atoms

INT_EDGES = [
    0, 1, -1, 2, 255, 256, 1023, 1024, 65535, 2**31 - 1, 2**31, -(2**31), 2**32, 2**53, 2**63 - 1, 2**63,
    -(2**63), -(2**63) - 1, 2**64 - 1, 2**64, 10**30,
]
FLOAT_EDGES = [0.5, -0.0, 1e308, -1e308, 1.5e19, 1e-308, 3.0]
TEXT_EDGES = [
    "", " ", "\x00", "a\x00b", "%00", "\u2603", "\U0001f600", "\ufffd", "x" * 256, "x" * 4000, "..", "/", "%",
    "%ZZ", "null", "true", "-1", "0", "1.5", "1e308", "18446744073709551615", "9223372036854775808",
    "99999999999999999999999", "0001-01-01T00:00:00+23:59", "9999-12-31T23:59:59-23:59", "2020-02-30",
    "0000-00-00", "in:", "!", "!in:", ",", ":", "=", "VCPU:1", "VCPU:18446744073709551615", "CUSTOM_X",
    "DISK_GB:-1", "MEMORY_MB:1,VCPU:0", "HW_CPU_X86_AVX", "in:,", "' OR 1=1 --", "<script>", "\n", "\t",
    "00000000-0000-0000-0000-000000000000", "latest", "1.", "2.9999999999", "asc", "desc", "id", "name",
]
UUID_LIKE = st.uuids().map(str)


def texts() -> st.SearchStrategy[str]:
    return st.one_of(
        st.sampled_from(TEXT_EDGES),
        st.text(max_size=20),
        st.text(alphabet=st.characters(codec="utf-8"), max_size=8).map(lambda s: s + "\x00"),
        UUID_LIKE,
    )


def numbers() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.sampled_from(INT_EDGES),
        st.integers(),
        st.sampled_from(FLOAT_EDGES),
        st.floats(allow_nan=False, allow_infinity=False),
    )


def scalars() -> st.SearchStrategy[Any]:
    return st.one_of(texts(), st.just("x" * 30000), numbers(), st.booleans(), st.none())


def header_texts() -> st.SearchStrategy[str]:
    """Texts an HTTP client can send as a header value (Latin-1, one line, no leading space)."""
    return texts().map(
        lambda text: text.encode("latin-1", "ignore").decode("latin-1").replace("\r", "").replace("\n", "").lstrip()
    )


def query_values() -> st.SearchStrategy[str]:
    return st.one_of(texts(), st.sampled_from(INT_EDGES).map(str), st.integers().map(str))


# ------------------------------------------------------- what to fuzz


@dataclass(frozen=True)
class Case:
    template: str
    method: str
    params: tuple[str, ...]
    # What serves it, unwrapped (the same for a route mounted twice).
    handler: Any = None


def cases(routes: Iterable[Route]) -> list[Case]:
    """Every (path, method) the route table serves."""
    found = []
    for route in routes:
        params = tuple(_PARAM.findall(route.path))
        for method, spec in route.methods.items():
            found.append(Case(route.path, method.upper(), params, _handlers(spec)))
    return found


def _handlers(spec: Any) -> Any:
    if isinstance(spec, Endpoint):
        return (inspect.unwrap(spec.handler), spec.min_version, spec.max_version)
    if callable(spec):
        return inspect.unwrap(spec)
    return tuple(_handlers(item) for item in spec)


def names_in(package: str) -> list[str]:
    """Names a service's code knows: schema properties and the strings of its constant tables.

    They seed query parameter names and body keys, so that new fields and
    filters are fuzzed as soon as they are declared.
    """
    found: set[str] = set()
    root = importlib.import_module(package)
    modules = [root]
    for info in pkgutil.walk_packages(root.__path__, package + "."):
        modules.append(importlib.import_module(info.name))
    for module in modules:
        for value in vars(module).values():
            _collect(value, found, 0)
    return sorted(found)


def _collect(value: Any, found: set[str], depth: int) -> None:
    if depth > 12:
        return
    if isinstance(value, dict):
        for key in ("properties", "patternProperties"):
            members = value.get(key)
            if isinstance(members, dict):
                found.update(name for name in members if isinstance(name, str) and _NAME.match(name))
        for item in value.values():
            _collect(item, found, depth + 1)
    elif isinstance(value, (list, tuple, set, frozenset)):
        for item in value:
            if isinstance(item, str) and _NAME.match(item):
                found.add(item)
            else:
                _collect(item, found, depth + 1)


# ------------------------------------------------------------ bodies


def documents(keys: list[str]) -> st.SearchStrategy[Any]:
    names = st.one_of(st.sampled_from(keys), texts()) if keys else texts()
    return st.recursive(
        scalars(),
        lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(names, inner, max_size=5)),
        max_leaves=12,
    )


_DIGITS = re.compile(r"[0-9]+")


def hostile_like(value: Any, keys: list[str]) -> st.SearchStrategy[Any]:
    """Values to put where ``value`` was: mostly of its own kind, at the edges."""
    if isinstance(value, bool) or value is None:
        return st.one_of(scalars(), documents(keys))
    if isinstance(value, (int, float)):
        return st.one_of(st.sampled_from(INT_EDGES + FLOAT_EDGES), numbers(), scalars())
    if isinstance(value, str):
        runs = list(_DIGITS.finditer(value))
        variants = [texts(), st.just(value + "\x00"), st.just(value * 300)]
        if runs:
            # Numbers inside text ("VCPU:1", "limit=5", dates) are where ranges break.
            edge = st.tuples(st.sampled_from(runs), st.sampled_from(INT_EDGES)).map(
                lambda pair: value[: pair[0].start()] + str(pair[1]) + value[pair[0].end():]
            )
            negative = st.sampled_from(runs).map(lambda run: value[: run.start()] + "-" + value[run.start():])
            variants += [edge] * 5 + [negative]
        return st.one_of(*variants)
    return st.one_of(scalars(), documents(keys))


@st.composite
def mutated(draw: st.DrawFn, example: Any, keys: list[str]) -> Any:
    """``example`` with one value replaced, one member removed or one added."""
    paths = list(_paths(example))
    path = draw(st.sampled_from(paths))
    action = draw(st.sampled_from(["replace", "replace", "replace", "remove", "add"]))
    document = copy.deepcopy(example)
    if not path:
        return draw(st.one_of(scalars(), documents(keys)))
    parent = document
    for step in path[:-1]:
        parent = parent[step]
    last = path[-1]
    if action == "remove":
        del parent[last]
    elif action == "add" and isinstance(parent, dict):
        parent[draw(st.sampled_from(keys) if keys else texts())] = draw(st.one_of(scalars(), documents(keys)))
    else:
        parent[last] = draw(hostile_like(parent[last], keys))
    return document


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterable[tuple[Any, ...]]:
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, prefix + (key,))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, prefix + (index,))


RAW_BODIES = [
    b"", b"{", b"[", b"null", b"[]", b"{}", b'"x"', b"\xff\xfe", b"\x00", b'{"a": "\\ud800"}',
    b"[" * 127 + b"]" * 127, b"[" * 129 + b"]" * 129, b"[" * 1000, b"[" * 1023 + b"]" * 1023, b"[" * 5000,
    b'{"a":' * 200 + b"1" + b"}" * 200, b"1e400", b"18446744073709551616", b'{"x": 1e308}',
]


# --------------------------------------------------------------- fuzzer


@dataclass
class Target:
    """One service, served over HTTP, to fuzz."""

    name: str
    base_url: str
    routes: list[Route]
    # Headers choosing a microversion, one dict per choice ({} for none).
    versions: list[dict[str, str]]
    # Answers to the errors' shape: raises AssertionError when ``body`` is not the service's error body.
    check_error: Callable[[int, Any], None]
    # Values for path parameters by name ("*" for any parameter).
    identifiers: dict[str, list[str]] = field(default_factory=dict)
    # The header naming a microversion.
    version_header: str = "OpenStack-API-Version"
    # Valid bodies by (method, path template).
    examples: dict[tuple[str, str], list[Any]] = field(default_factory=dict)
    # Valid query strings (lists of name, value pairs) by path template.
    queries: dict[str, list[list[tuple[str, str]]]] = field(default_factory=dict)
    keys: list[str] = field(default_factory=list)
    tokens: list[str] = field(default_factory=lambda: ["admin"])
    # Creates the resources to aim at again and gives their identifiers
    # (requests delete them now and then).
    reseed: Callable[[], dict[str, list[str]]] | None = None
    # Path templates allowed to answer a given 5xx status (an upstream "not implemented", say).
    allowed_5xx: dict[str, set[int]] = field(default_factory=dict)
    statuses: Counter[int] = field(default_factory=Counter)

    @property
    def requests(self) -> int:
        return sum(self.statuses.values())

    def fill(self, template: str, params: dict[str, tuple[str, Any]]) -> str:
        """The path for ``template`` with each parameter's known identifier or text."""
        path = template
        for param, (kind, value) in params.items():
            if kind == "known":
                known = self.identifiers.get(param, []) + self.identifiers.get("*", [])
                value = known[value % len(known)] if known else "unknown"
            path = path.replace("{" + param + "}", urllib.parse.quote(value, safe=""), 1)
        return path


def slots(case: Case) -> list[str]:
    """What one request gets wrong: one thing at a time, so that the rest of
    the request is plausible and reaches deep into the service."""
    chosen = ["none", "header", "version", "method"]
    if case.params:
        chosen += ["path"] * 2
    if case.method in ("POST", "PUT", "PATCH"):
        chosen += ["body"] * 8
    else:
        chosen += ["query"] * 6
    return chosen


def requests_for(target: Target, all_cases: list[Case]) -> st.SearchStrategy[dict[str, Any]]:
    """Drawn requests.  Identifiers are drawn as indexes into the target's
    current ones (``("known", i)``), so the drawing never depends on what
    the service holds at the time; :meth:`Target.fill` resolves them."""

    @st.composite
    def draw_request(draw: st.DrawFn) -> dict[str, Any]:
        case = draw(st.sampled_from(all_cases))
        slot = draw(st.sampled_from(slots(case)))
        method = draw(st.sampled_from(HTTP_METHODS)) if slot == "method" else case.method
        hostile_param = draw(st.sampled_from(case.params)) if case.params and slot == "path" else None
        params = {
            param: ("text", draw(texts())) if param == hostile_param else ("known", draw(st.integers(0, 7)))
            for param in case.params
        }
        query = list(draw(st.sampled_from(target.queries.get(case.template, []) + [[]])))
        if slot == "query":
            query = draw(mutated_query(query, target.keys))
        headers = dict(draw(st.sampled_from(target.versions)))
        if slot == "version":
            headers = {name: draw(header_texts()) for name in headers} or {target.version_header: draw(header_texts())}
        headers["X-Auth-Token"] = draw(st.sampled_from(target.tokens))
        if slot == "header":
            name = draw(st.sampled_from(["X-OpenStack-Request-Id", "X-Auth-Token", "X-Roles", "Accept", "User-Agent"]))
            headers[name] = draw(header_texts())
        body: bytes | None = None
        if method in ("POST", "PUT", "PATCH"):
            body = draw(bodies(target.examples.get((method, case.template), []), target.keys, hostile=slot == "body"))
            headers["Content-Type"] = "application/json"
            if slot == "header" and draw(st.booleans()):
                headers["Content-Type"] = draw(st.sampled_from(["text/plain", "application/json; charset=latin-1", ""]))
        return {"method": method, "template": case.template, "params": params, "query": query, "headers": headers,
                "body": body}

    return draw_request()


@st.composite
def bodies(draw: st.DrawFn, examples: list[Any], keys: list[str], *, hostile: bool) -> bytes:
    """A valid example, or (``hostile``) a mutated one, a document of known names or raw junk."""
    if not hostile:
        return _encode(draw(st.sampled_from(examples)) if examples else draw(documents(keys)))
    kind = draw(st.sampled_from(["raw", "generic"] + ["example"] * (3 if examples else 0)))
    if kind == "example":
        return _encode(draw(mutated(draw(st.sampled_from(examples)), keys)))
    if kind == "generic":
        return _encode(draw(documents(keys)))
    return draw(st.sampled_from(RAW_BODIES))


@st.composite
def mutated_query(draw: st.DrawFn, query: list[tuple[str, str]], keys: list[str]) -> list[tuple[str, str]]:
    """``query`` with one value replaced, or one parameter added."""
    if query and draw(st.booleans()):
        index = draw(st.integers(0, len(query) - 1))
        name, value = query[index]
        query[index] = (name, draw(hostile_like(value, [])))
        return query
    names = st.one_of(st.sampled_from(keys), texts()) if keys else texts()
    query.append((draw(names), draw(query_values())))
    return query


def _encode(document: Any) -> bytes:
    # The standard library writes any integer, however large.
    return json.dumps(document, allow_nan=False).encode()


# The nastiest values, tried in every place of every example (the sweep).
SWEEP_NUMBERS: list[Any] = [2**31, 2**63, 2**64 - 1, -(2**63) - 1, 1e308]
SWEEP_DATES = ["0001-01-01T00:00:00+23:59", "9999-12-31T23:59:59-23:59"]
SWEEP_PATH = ["\x00", "-1", "9223372036854775808", "x" * 300]
SWEEP_QUERY_NAMES = ["limit", "marker"]


def _text_variants(value: str) -> list[str]:
    variants = ["\x00", value + "\x00"]
    for run in _DIGITS.finditer(value):
        for number in (2**63, 10**30):
            variants.append(value[: run.start()] + str(number) + value[run.end():])
    if _DIGITS.match(value) and "-" in value:
        variants += SWEEP_DATES
    return variants


def _variants(value: Any) -> list[Any]:
    if isinstance(value, bool) or value is None:
        return [2**64, "\x00"]
    if isinstance(value, (int, float)):
        return SWEEP_NUMBERS
    if isinstance(value, str):
        return _text_variants(value)
    return []


def sweep(target: Target) -> Iterator[dict[str, Any]]:
    """Every example with one place replaced by each of the nastiest values."""
    version = target.versions[-2] if len(target.versions) > 1 else target.versions[0]
    headers = {**version, "X-Auth-Token": target.tokens[0]}
    swept: set[tuple[str, Any]] = set()
    for case in cases(target.routes):
        # Routes mounted twice (Compute's with and without a project) share a handler: sweep it once.
        handler = (case.method, case.handler)
        if handler in swept:
            continue
        swept.add(handler)
        known: dict[str, tuple[str, Any]] = {param: ("known", 0) for param in case.params}
        examples = target.examples.get((case.method, case.template), [])
        writes = case.method in ("POST", "PUT", "PATCH")
        request = {"method": case.method, "template": case.template, "params": known, "query": [],
                   "headers": {**headers, "Content-Type": "application/json"} if writes else headers,
                   "body": _encode(examples[0]) if examples else None}
        for param in case.params:
            for value in SWEEP_PATH:
                yield {**request, "params": {**known, param: ("text", value)}}
        if writes:
            for example in examples:
                for document in _swept(example):
                    yield {**request, "body": _encode(document)}
        elif case.method == "GET":
            queries = target.queries.get(case.template, []) + [[(name, "1")] for name in SWEEP_QUERY_NAMES]
            for query in queries:
                for index, (name, value) in enumerate(query):
                    for variant in _text_variants(value):
                        yield {**request, "query": query[:index] + [(name, variant)] + query[index + 1:]}


def _swept(example: Any) -> Iterator[Any]:
    """``example`` with each place replaced, in turn, by each of its nastiest variants."""
    for place in _paths(example):
        if not place:
            continue
        parent = example
        for step in place[:-1]:
            parent = parent[step]
        for value in _variants(parent[place[-1]]):
            document = copy.deepcopy(example)
            holder = document
            for step in place[:-1]:
                holder = holder[step]
            holder[place[-1]] = value
            yield document


def examples_wanted() -> int:
    return int(os.environ.get("CORRAL_FUZZ_EXAMPLES", CI_EXAMPLES))


def timeout() -> float:
    """Seconds a fuzzing test may take: the default, or more for a larger run on a busy machine."""
    return max(300.0, 300.0 + examples_wanted() * 0.3)


def fuzz(target: Target, request: pytest.FixtureRequest, backend: str) -> None:
    """Send the sweep, then the drawn requests; every answer must be below 500 and well-formed."""
    examples = examples_wanted()
    randomized = os.environ.get("CORRAL_FUZZ_RANDOM") == "1"
    keep_going = os.environ.get("CORRAL_FUZZ_KEEP_GOING") == "1"
    all_cases = cases(target.routes)
    session = requests.Session()
    failures: list[str] = []

    def send(drawn: dict[str, Any]) -> None:
        try:
            check(drawn)
        except AssertionError as failure:
            if not keep_going:
                raise
            failures.append(str(failure)[:3000])

    def check(drawn: dict[str, Any]) -> None:
        url = target.base_url + target.fill(drawn["template"], drawn["params"])
        if drawn["query"]:
            url += "?" + urllib.parse.urlencode(drawn["query"])
        response = session.request(
            drawn["method"], url, data=drawn["body"], headers=drawn["headers"], timeout=60, allow_redirects=False
        )
        target.statuses[response.status_code] += 1
        assert response.status_code < 500 or response.status_code in target.allowed_5xx.get(drawn["template"], ()), (
            drawn, response.status_code, response.text[:2000])
        # An Accept header without JSON in it may get the error in another format.
        if response.status_code >= 400 and drawn["method"] != "HEAD" and "Accept" not in drawn["headers"]:
            try:
                body = response.json()
            except ValueError:
                raise AssertionError((drawn, response.status_code, response.text[:2000])) from None
            target.check_error(response.status_code, body)

    @settings(
        max_examples=examples,
        derandomize=not randomized,
        database=None,
        deadline=None,
        phases=[Phase.generate, Phase.shrink],
        suppress_health_check=list(HealthCheck),
        print_blob=True,
    )
    @given(requests_for(target, all_cases))
    def one(drawn: dict[str, Any]) -> None:
        if target.reseed is not None and target.requests % RESEED_EVERY == 0:
            target.identifiers.update(target.reseed())
        send(drawn)

    try:
        for drawn in sweep(target):
            send(drawn)
        one()
        assert not failures, "\n\n".join(failures)
    finally:
        session.close()
        summary = ", ".join(f"{status}: {count}" for status, count in sorted(target.statuses.items()))
        allowed = set().union(*target.allowed_5xx.values())
        line = f"{target.name} on {backend}: {target.requests} requests, 0 5xx ({summary})"
        if allowed & set(target.statuses):
            line = f"{target.name} on {backend}: {target.requests} requests, 0 unexpected 5xx ({summary})"
        if any(status >= 500 and status not in allowed for status in target.statuses):
            line = f"{target.name} on {backend}: {target.requests} requests, FAILED ({summary})"
        request.config.stash.setdefault(REPORT, []).append(line)
