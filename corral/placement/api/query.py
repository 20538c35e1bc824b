"""Query-string parsing shared by ``GET /allocation_candidates`` and
``GET /resource_providers``.

The syntax, by microversion:

* ``resources[S]=RC:N,RC:N``
* ``required[S]=T1,!T2`` (``!`` from 1.22); ``required[S]=in:T1,T2`` (any-of,
  from 1.39, when the parameter may also repeat)
* ``member_of[S]=AGG``, ``in:A,B`` (any-of), repeatable from 1.24; from 1.32
  ``!AGG`` and ``!in:A,B,C`` (none of them).  ``in:A,!B`` is malformed.
* ``in_tree[S]=RP_UUID``
* suffixes ``S``: ``[1-9][0-9]*`` from 1.25, ``[A-Za-z0-9_-]{1,64}`` from 1.33.

Keys are validated against one JSON schema per microversion band (unknown
keys are a 400, as upstream answers); values are then parsed here.  The
parsers take the query as ``(key, value)`` pairs in request order so that
repeated keys keep their order, and never touch the database.
"""

from __future__ import annotations

import copy
import functools
import re
import uuid as uuidlib
from collections.abc import Sequence
from typing import Any
from urllib.parse import parse_qsl

import jsonschema

from corral.core.errors import BadRequest
from corral.core.schema import VersionedSchema
from corral.placement.api import errors as codes
from corral.placement.domain.candidates import CandidateRequest, ProviderFilter, RequestGroup

Version = tuple[int, int]
Pairs = Sequence[tuple[str, str]]

GROUP_PATTERN = r"[1-9][0-9]*"
GROUP_PATTERN_1_33 = r"[a-zA-Z0-9_-]{1,64}"
_GROUP_KEYS = ("resources", "required", "member_of", "in_tree")
_KEY_RE = re.compile(r"^(%s)(%s)?$" % ("|".join(_GROUP_KEYS), GROUP_PATTERN))
_KEY_RE_1_33 = re.compile(r"^(%s)(%s)?$" % ("|".join(_GROUP_KEYS), GROUP_PATTERN_1_33))

# Microversions at which the syntax grows.
FORBIDDEN_TRAITS = (1, 22)
MULTI_MEMBER_OF = (1, 24)
GRANULAR = (1, 25)
NESTED = (1, 29)
FORBIDDEN_AGGREGATES = (1, 32)
VERBOSE_SUFFIX = (1, 33)
SAME_SUBTREE = (1, 36)
ANY_TRAITS = (1, 39)

INVALID_QUERY = "Invalid query string parameters: %s"


def query_pairs(query_string: str) -> list[tuple[str, str]]:
    """The query string as ``(key, value)`` pairs, in order, blanks kept."""
    return parse_qsl(query_string, keep_blank_values=True)


def _getall(pairs: Pairs, key: str) -> list[str]:
    return [value for name, value in pairs if name == key]


def _last_values(pairs: Pairs) -> dict[str, str]:
    # Validation looks at one value per key, the last one, as upstream does.
    return dict(pairs)


def is_uuid_like(value: str) -> bool:
    """A UUID in any of the spellings ``uuid.UUID`` accepts (dashes optional)."""
    try:
        parsed = uuidlib.UUID(value)
    except (TypeError, ValueError, AttributeError):
        return False
    normalized = value.lower().replace("urn:", "").replace("uuid:", "").strip("{}").replace("-", "")
    return parsed.hex == normalized


# ------------------------------------------------------------------ schemas


def _candidate_schemas() -> list[tuple[Version | None, Version | None, dict[str, Any]]]:
    v1_10: dict[str, Any] = {
        "type": "object",
        "properties": {"resources": {"type": "string"}},
        "required": ["resources"],
        "additionalProperties": False,
    }
    v1_16 = copy.deepcopy(v1_10)
    v1_16["properties"]["limit"] = {
        "type": ["integer", "string"],
        "pattern": "^[1-9][0-9]*$",
        "minimum": 1,
        "minLength": 1,
    }
    v1_17 = copy.deepcopy(v1_16)
    v1_17["properties"]["required"] = {"type": ["string"]}
    v1_21 = copy.deepcopy(v1_17)
    v1_21["properties"]["member_of"] = {"type": ["string"]}
    v1_25 = copy.deepcopy(v1_21)
    for key in ("resources", "required", "member_of"):
        del v1_25["properties"][key]
    del v1_25["required"]
    v1_25["patternProperties"] = {f"^{key}({GROUP_PATTERN})?$": {"type": "string"} for key in _GROUP_KEYS[:3]}
    v1_25["properties"]["group_policy"] = {"type": "string", "enum": ["none", "isolate"]}
    v1_31 = copy.deepcopy(v1_25)
    v1_31["patternProperties"][f"^in_tree({GROUP_PATTERN})?$"] = {"type": "string"}
    v1_33 = copy.deepcopy(v1_31)
    v1_33["patternProperties"] = {f"^{key}({GROUP_PATTERN_1_33})?$": {"type": "string"} for key in _GROUP_KEYS}
    v1_35 = copy.deepcopy(v1_33)
    v1_35["properties"]["root_required"] = {"type": ["string"]}
    v1_36 = copy.deepcopy(v1_35)
    v1_36["properties"]["same_subtree"] = {"type": ["string"]}
    return [
        ((1, 10), (1, 15), v1_10),
        ((1, 16), (1, 16), v1_16),
        ((1, 17), (1, 20), v1_17),
        ((1, 21), (1, 24), v1_21),
        ((1, 25), (1, 30), v1_25),
        ((1, 31), (1, 32), v1_31),
        ((1, 33), (1, 34), v1_33),
        ((1, 35), (1, 35), v1_35),
        ((1, 36), None, v1_36),
    ]


def _provider_schemas() -> list[tuple[Version | None, Version | None, dict[str, Any]]]:
    v1_0: dict[str, Any] = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "uuid": {"type": "string", "format": "uuid"}},
        "additionalProperties": False,
    }
    v1_3 = copy.deepcopy(v1_0)
    v1_3["properties"]["member_of"] = {"type": "string"}
    v1_4 = copy.deepcopy(v1_3)
    v1_4["properties"]["resources"] = {"type": "string"}
    v1_14 = copy.deepcopy(v1_4)
    v1_14["properties"]["in_tree"] = {"type": "string", "format": "uuid"}
    v1_18 = copy.deepcopy(v1_14)
    v1_18["properties"]["required"] = {"type": "string"}
    return [
        (None, (1, 2), v1_0),
        ((1, 3), (1, 3), v1_3),
        ((1, 4), (1, 13), v1_4),
        ((1, 14), (1, 17), v1_14),
        ((1, 18), None, v1_18),
    ]


def _schema_message(error: jsonschema.ValidationError) -> str:
    # Upstream's wording: the whole validation error, schema and instance included.
    return INVALID_QUERY % error


@functools.cache
def candidate_schema() -> VersionedSchema:
    return VersionedSchema(_candidate_schemas(), message=_schema_message)


@functools.cache
def provider_schema() -> VersionedSchema:
    return VersionedSchema(_provider_schemas(), message=_schema_message)


# ------------------------------------------------------------ value parsers


def parse_resources(value: str) -> dict[str, int]:
    """``VCPU:2,MEMORY_MB:1024`` -> ``{"VCPU": 2, "MEMORY_MB": 1024}``."""
    if value.strip() == "":
        raise BadRequest(
            "Badly formed resources parameter. Expected resources query string parameter in form: "
            "?resources=VCPU:2,MEMORY_MB:1024. Got: empty string."
        )
    result: dict[str, int] = {}
    for item in value.split(","):
        try:
            name, amount_text = item.split(":")
        except ValueError:
            raise BadRequest(
                "Badly formed resources parameter. Expected resources query string parameter in form: "
                f"?resources=VCPU:2,MEMORY_MB:1024. Got: {item}."
            ) from None
        try:
            amount = int(amount_text)
        except ValueError:
            raise BadRequest(
                f"Requested resource {name} expected positive integer amount. Got: {amount_text}."
            ) from None
        if amount < 1:
            raise BadRequest(f"Requested resource {name} requires amount >= 1. Got: {amount}.")
        result[name] = amount
    return result


def parse_traits(value: str, allow_forbidden: bool, allow_any: bool) -> tuple[list[frozenset[str]], set[str]]:
    """One ``required`` value: (any-of sets to AND, forbidden names)."""
    if value.startswith("in:"):
        if not allow_any:
            raise BadRequest(
                INVALID_QUERY % "The format 'in:HW_CPU_X86_VMX,CUSTOM_MAGIC' only supported since "
                f"microversion 1.39. Got: {value}"
            )
        any_of = frozenset(part.strip() for part in value[3:].split(","))
        if not all(any_of):
            raise BadRequest(
                INVALID_QUERY % "Expected 'required' parameter value of the form: "
                f"in:HW_CPU_X86_VMX,CUSTOM_MAGIC. Got an empty trait in: {value}"
            )
        if any(name.startswith("!") for name in any_of):
            raise BadRequest(
                INVALID_QUERY % "The format 'in:HW_CPU_X86_VMX,CUSTOM_MAGIC' does not support "
                f"forbidden traits. Got: {value}"
            )
        return [any_of], set()
    names = [part.strip() for part in value.split(",")]
    # Any run of leading '!' marks a forbidden trait (upstream strips them all).
    forbidden = {name.lstrip("!") for name in names if name.startswith("!")}
    if not all(names) or not all(forbidden):
        form = "HW_CPU_X86_VMX,!CUSTOM_MAGIC" if allow_forbidden else "HW_CPU_X86_VMX,CUSTOM_MAGIC"
        raise BadRequest(
            INVALID_QUERY % f"Expected 'required' parameter value of the form: {form}. Got an empty trait in: {value}"
        )
    if forbidden and not allow_forbidden:
        raise BadRequest(
            INVALID_QUERY % f"Expected 'required' parameter value of the form: HW_CPU_X86_VMX,CUSTOM_MAGIC. Got: {value}"
        )
    required = [frozenset((name,)) for name in names if not name.startswith("!")]
    return required, forbidden


def parse_required_params(
    values: list[str], version: Version
) -> tuple[list[frozenset[str]], set[str]]:
    """Every ``required[S]`` value of one group (only the last before 1.39)."""
    allow_any = version >= ANY_TRAITS
    if not allow_any:
        values = values[-1:]
    required: list[frozenset[str]] = []
    forbidden: set[str] = set()
    for value in values:
        more_required, more_forbidden = parse_traits(value, version >= FORBIDDEN_TRAITS, allow_any)
        required += more_required
        forbidden |= more_forbidden
    return required, forbidden


def parse_member_of(value: str) -> tuple[frozenset[str], frozenset[str]]:
    """One ``member_of`` value: (any-of required UUIDs, forbidden UUIDs)."""
    if "," in value and not (value.startswith("in:") or value.startswith("!in:")):
        raise BadRequest(
            "Multiple values for 'member_of' must be prefixed with the 'in:' or '!in:' keyword "
            f"using the valid microversion. Got: {value}"
        )
    required: frozenset[str] = frozenset()
    forbidden: frozenset[str] = frozenset()
    if value.startswith("!in:"):
        forbidden = frozenset(value[4:].split(","))
    elif value.startswith("!"):
        forbidden = frozenset((value[1:],))
    elif value.startswith("in:"):
        # 'in:a,!b' lands here and fails the UUID check: '!' belongs before 'in:'.
        required = frozenset(value[3:].split(","))
    else:
        required = frozenset((value,))
    for agg_uuid in sorted(required | forbidden):
        if not is_uuid_like(agg_uuid):
            raise BadRequest(
                INVALID_QUERY % f"Expected 'member_of' parameter to contain valid UUID(s). Got: {agg_uuid}"
            )
    return required, forbidden


def parse_member_of_params(
    values: list[str], version: Version, suffix: str = ""
) -> tuple[list[frozenset[str]], set[str]]:
    """Every ``member_of[S]`` value of one group."""
    if version < MULTI_MEMBER_OF and len(values) > 1:
        raise BadRequest(f"Multiple member_of{suffix} parameters are not supported")
    required_aggs: list[frozenset[str]] = []
    forbidden_aggs: set[str] = set()
    for value in values:
        required, forbidden = parse_member_of(value)
        if required:
            required_aggs.append(required)
        if forbidden:
            if version < FORBIDDEN_AGGREGATES:
                raise BadRequest(
                    f"Forbidden member_of{suffix} parameters are not supported in the specified microversion"
                )
            forbidden_aggs |= forbidden
    return required_aggs, forbidden_aggs


def parse_in_tree(value: str) -> str:
    stripped = value.strip()
    if not is_uuid_like(stripped):
        raise BadRequest(INVALID_QUERY % f"Expected 'in_tree' parameter to be a format of uuid. Got: {value}")
    return stripped


# ------------------------------------------------------ allocation candidates


def _request_wide(pairs: Pairs, request: CandidateRequest) -> None:
    limits = _getall(pairs, "limit")
    if limits:
        # The schema has checked the form of the last one; use the first.
        try:
            request.limit = int(limits[0])
        except ValueError:
            raise BadRequest(INVALID_QUERY % f"{limits[0]!r} does not match '^[1-9][0-9]*$'") from None
        if request.limit < 1:
            raise BadRequest(INVALID_QUERY % f"{limits[0]!r} does not match '^[1-9][0-9]*$'")
    policies = _getall(pairs, "group_policy")
    if policies:
        request.group_policy = policies[0]
    roots = _getall(pairs, "root_required")
    if roots:
        if len(roots) > 1:
            raise BadRequest(
                "Query parameter 'root_required' may be specified only once.",
                code=codes.ILLEGAL_DUPLICATE_QUERYPARAM,
            )
        required, forbidden = parse_traits(roots[0], allow_forbidden=True, allow_any=False)
        request.root_required = {name for any_of in required for name in any_of}
        request.root_forbidden = forbidden
        conflicts = request.root_required & forbidden
        if conflicts:
            raise BadRequest(
                "Conflicting required and forbidden traits found in root_required: " + ", ".join(sorted(conflicts)),
                code=codes.QUERYPARAM_BAD_VALUE,
            )
    for value in _getall(pairs, "same_subtree"):
        suffixes = {part.strip() for part in value.split(",")}
        if "" in suffixes:
            raise BadRequest(
                "Empty string (unsuffixed group) can not be specified in `same_subtree` ",
                code=codes.QUERYPARAM_BAD_VALUE,
            )
        request.same_subtrees.append(suffixes)


def _groups(pairs: Pairs, version: Version) -> dict[str, RequestGroup]:
    pattern = _KEY_RE_1_33 if version >= VERBOSE_SUFFIX else _KEY_RE
    groups: dict[str, RequestGroup] = {}
    seen: set[tuple[str, str]] = set()
    for key, value in pairs:
        match = pattern.match(key)
        if not match:
            continue
        prefix, suffix = match.group(1), match.group(2) or ""
        group = groups.get(suffix)
        if group is None:
            group = groups[suffix] = RequestGroup(suffix=suffix)
        if prefix == "resources":
            group.resources = parse_resources(value)
        elif prefix == "in_tree":
            group.in_tree = parse_in_tree(value)
        elif (prefix, suffix) not in seen:
            # required and member_of read all their values at once.
            seen.add((prefix, suffix))
            values = _getall(pairs, key)
            if prefix == "required":
                group.required_traits, group.forbidden_traits = parse_required_params(values, version)
            else:
                group.member_of, group.forbidden_aggs = parse_member_of_params(values, version, suffix)
    return groups


def _check_orphans(groups: dict[str, RequestGroup]) -> None:
    orphans = [f"required{s}" for s, g in groups.items() if (g.required_traits or g.forbidden_traits) and not g.resources]
    if orphans:
        raise BadRequest(
            "All traits parameters must be associated with resources.  "
            "Found the following orphaned traits keys: " + ", ".join(orphans)
        )
    orphans = [f"member_of{s}" for s, g in groups.items() if (g.member_of or g.forbidden_aggs) and not g.resources]
    if orphans:
        raise BadRequest(
            "All member_of parameters must be associated with resources. "
            "Found the following orphaned member_of keys: " + ", ".join(orphans)
        )
    if not all(group.resources for group in groups.values()):
        raise BadRequest("All request groups must specify resources.")
    if not groups:
        raise BadRequest("At least one request group (`resources` or `resources{$S}`) is required.")


def _check_resourceless(groups: dict[str, RequestGroup], same_subtrees: list[set[str]]) -> None:
    resourceless = [suffix for suffix, group in groups.items() if not group.resources]
    if len(resourceless) == len(groups):
        raise BadRequest(
            "There must be at least one resources or resources[$S] parameter.",
            code=codes.QUERYPARAM_MISSING_VALUE,
        )
    in_subtrees = set().union(*same_subtrees)
    bad = [suffix for suffix in resourceless if suffix not in in_subtrees]
    if bad:
        raise BadRequest(
            "Resourceless suffixed group request should be specified in `same_subtree` query param: "
            f"bad group(s) - {bad}.",
            code=codes.QUERYPARAM_BAD_VALUE,
        )
    unknown = [suffix for suffix in sorted(in_subtrees) if suffix not in groups]
    if unknown:
        raise BadRequest(
            f"Real suffixes should be specified in `same_subtree`: {unknown} not found in {list(groups)}.",
            code=codes.QUERYPARAM_BAD_VALUE,
        )


def _check_conflicts(groups: dict[str, RequestGroup]) -> None:
    conflicts = []
    for suffix, group in groups.items():
        for any_of in group.required_traits:
            if all(name in group.forbidden_traits for name in any_of):
                conflicts.append(f"required{suffix}: ({', '.join(sorted(any_of))})")
    if conflicts:
        raise BadRequest(
            "Conflicting required and forbidden traits found in the following traits keys: "
            + ", ".join(sorted(conflicts))
        )


def parse_candidate_request(pairs: Pairs, version: Version) -> CandidateRequest:
    """Validate and parse an allocation-candidates query (400 on any fault)."""
    candidate_schema().validate(_last_values(pairs), version)  # type: ignore[arg-type]
    request = CandidateRequest(groups={}, nested_aware=version >= NESTED)
    _request_wide(pairs, request)
    request.groups = _groups(pairs, version)
    if version >= SAME_SUBTREE:
        _check_resourceless(request.groups, request.same_subtrees)
    else:
        _check_orphans(request.groups)
    if version >= FORBIDDEN_TRAITS:
        _check_conflicts(request.groups)
    if request.group_policy is None and sum(1 for g in request.groups.values() if g.use_same_provider) > 1:
        raise BadRequest(
            'The "group_policy" parameter is required when specifying more than one "resources{N}" parameter.'
        )
    return request


# ------------------------------------------------------- resource providers


def parse_provider_filter(pairs: Pairs, version: Version) -> ProviderFilter:
    """Validate and parse the filters of ``GET /resource_providers``."""
    provider_schema().validate(_last_values(pairs), version)  # type: ignore[arg-type]
    result = ProviderFilter()
    members = _getall(pairs, "member_of")
    if members:
        result.member_of, result.forbidden_aggs = parse_member_of_params(members, version)
    required = _getall(pairs, "required")
    if required:
        result.required_traits, result.forbidden_traits = parse_required_params(required, version)
    last = _last_values(pairs)
    result.uuid = last.get("uuid")
    result.name = last.get("name")
    result.in_tree = last.get("in_tree")
    if "resources" in last:
        result.resources = parse_resources(last["resources"])
    return result
