"""The quick schema check never lets through what jsonschema refuses.

Documents are generated from Placement's request schemas (shaped like them,
with wrong types, bools for integers, odd uuids and extra keys mixed in) and
checked both ways.
"""

from __future__ import annotations

import copy
import random
import uuid
from typing import Any

import pytest

from corral.core.errors import BadRequest
from corral.core.schema import VersionedSchema, best_error, compile_fast, compile_schema
from corral.placement.api.schemas import aggregates, allocations, catalog, inventories, reshaper, resource_providers
from corral.placement.api.schemas.common import FORMAT_CHECKER

BANDS = {
    "allocations.put": allocations.PUT, "allocations.post": allocations.POST,
    "resource_providers.post": resource_providers.POST, "resource_providers.put": resource_providers.PUT,
    "inventories.post": inventories.POST, "inventories.put_one": inventories.PUT_ONE,
    "inventories.put_all": inventories.PUT_ALL, "resource_classes": catalog.RESOURCE_CLASS,
    "provider_traits": catalog.PROVIDER_TRAITS, "aggregates": aggregates.PUT, "reshaper": reshaper.POST,
}
UUID = "4e8e5957-649f-477b-9e5b-f1f75b21c03c"
ODD = [None, True, False, 0, 1, -1, 1.0, 1.5, 2**31, -(2**31) - 1, 10**20, "", "A", "VCPU", "CUSTOM_X", "VCPU\n",
       UUID, UUID.upper(), UUID.replace("-", ""), "{" + UUID + "}", UUID[:-1] + "g", "x" * 300, [], [UUID], {},
       {"a": 1}, "INSTANCE"]
KEYS = [UUID, str(uuid.UUID(int=7)), "VCPU", "MEMORY_MB", "CUSTOM_A", "bad key", "_", "a" * 65, "vcpu", "extra"]


def _document(rng: random.Random, schema: dict[str, Any], noise: float, depth: int = 0) -> Any:
    """A document roughly shaped by ``schema``: often valid, often subtly not."""
    if depth > 6 or rng.random() < noise:
        return rng.choice(ODD)
    for combined in ("anyOf", "oneOf"):
        if combined in schema:
            return _document(rng, rng.choice(schema[combined]), noise, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = rng.choice(kind)
    if kind == "object" or "properties" in schema or "patternProperties" in schema:
        out = {name: _document(rng, sub, noise, depth + 1) for name, sub in schema.get("properties", {}).items()
               if rng.random() < 1 - noise}
        for sub in schema.get("patternProperties", {}).values():
            for _ in range(rng.randint(0, 2)):
                out[rng.choice(KEYS[:5] if rng.random() > noise else KEYS)] = _document(rng, sub, noise, depth + 1)
        return out
    if kind == "array":
        return [_document(rng, schema.get("items", {}), noise, depth + 1) for _ in range(rng.randint(0, 3))]
    if "enum" in schema:
        return rng.choice(schema["enum"] if rng.random() > noise else [True, 1, "x"])
    # (likely valid, likely not) per type
    choices = {
        "integer": ([1, 5, 64], [0, -1, 1.0, True, 2**31, 10**20, 3.0]),
        "number": ([1.5, 1, 16.0], [0, True, "1", 10**20]),
        "string": ([UUID, "VCPU", "INSTANCE", "CUSTOM_A", "x"], ["", "a" * 256, "VCPU\n", "bad!", UUID.upper()]),
        "boolean": ([True, False], [0, 1]),
        "null": ([None], [0]),
    }
    likely, unlikely = choices.get(kind, (ODD, ODD))
    return rng.choice(likely if rng.random() > max(noise, 0.02) else unlikely)


def _accepted_by_quick_check(name: str) -> int:
    """Check 300 documents per band; how many the quick check accepted."""
    rng = random.Random(name)
    accepted = 0
    for low, _high, schema in BANDS[name]:
        quick = compile_fast(schema, FORMAT_CHECKER)
        assert quick is not None
        full = compile_schema(schema, FORMAT_CHECKER)
        for _ in range(300):
            document = _document(rng, schema, rng.choice([0.0, 0.05, 0.2]))
            try:
                quick(copy.deepcopy(document))
            except Exception:
                continue
            accepted += 1
            assert best_error(full, document) is None, (low, document)
    return accepted


@pytest.mark.parametrize("name", sorted(BANDS))
def test_the_quick_check_accepts_only_what_jsonschema_accepts(name: str) -> None:
    _accepted_by_quick_check(name)


def test_the_generated_documents_are_often_valid() -> None:
    assert _accepted_by_quick_check("allocations.put") > 50
    assert _accepted_by_quick_check("resource_providers.post") > 50


def test_a_refused_document_reports_jsonschemas_error() -> None:
    schema = VersionedSchema.single({"type": "object", "properties": {"n": {"type": "integer"}},
                                     "additionalProperties": False})
    schema.validate({"n": 1})
    with pytest.raises(BadRequest, match="'x' is not of type 'integer'"):
        schema.validate({"n": "x"})


def test_what_the_quick_check_refuses_jsonschema_may_still_accept() -> None:
    schema = VersionedSchema.single({"type": "string", "format": "uuid"}, format_checker=FORMAT_CHECKER)
    for band in schema._bands:
        object.__setattr__(band, "fast", lambda _document: (_ for _ in ()).throw(ValueError("refused")))
    schema.validate(UUID)
    with pytest.raises(BadRequest):
        schema.validate("not a uuid")
