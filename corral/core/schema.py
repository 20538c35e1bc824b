"""JSON-schema validation with validators compiled once.

A :class:`VersionedSchema` holds one compiled validator per microversion
range; services build them when their application is built (module-level
schema *dicts* are plain data; the compiled validators live on the app), and
handlers call :meth:`VersionedSchema.validate` with the request's version.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import jsonschema
from jsonschema import FormatChecker
from microversion_parse import Version

from corral.core.errors import BadRequest

_FORMAT_CHECKER = FormatChecker()


def compile_schema(
    schema: dict[str, Any], format_checker: FormatChecker | None = None
) -> jsonschema.protocols.Validator:
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft7Validator)
    cls.check_schema(schema)
    return cls(schema, format_checker=format_checker or _FORMAT_CHECKER)


def best_error(validator: jsonschema.protocols.Validator, instance: Any) -> jsonschema.ValidationError | None:
    """The most relevant validation error, or None when ``instance`` is valid."""
    return jsonschema.exceptions.best_match(validator.iter_errors(instance))


@dataclass(frozen=True)
class _Band:
    min_version: tuple[int, int] | None
    max_version: tuple[int, int] | None
    validator: Any

    def covers(self, version: Version | None) -> bool:
        if version is None:
            return True
        if self.min_version is not None and version < self.min_version:
            return False
        return not (self.max_version is not None and version > self.max_version)


def default_message(error: jsonschema.ValidationError) -> str:
    return f"JSON does not validate: {error.message}"


class VersionedSchema:
    """Schemas for one request body, by microversion band."""

    def __init__(
        self,
        bands: Iterable[tuple[tuple[int, int] | None, tuple[int, int] | None, dict[str, Any]]],
        *,
        message: Callable[[jsonschema.ValidationError], str] = default_message,
        error: type[BadRequest] = BadRequest,
        code: str | None = None,
        format_checker: FormatChecker | None = None,
    ) -> None:
        self._bands = [_Band(low, high, compile_schema(schema, format_checker)) for low, high, schema in bands]
        self._message = message
        self._error = error
        self._code = code

    @classmethod
    def single(cls, schema: dict[str, Any], **kwargs: Any) -> VersionedSchema:
        return cls([(None, None, schema)], **kwargs)

    def validate(self, body: Any, version: Version | None = None) -> None:
        for band in self._bands:
            if band.covers(version):
                problem = best_error(band.validator, body)
                if problem is not None:
                    raise self._error(self._message(problem), code=self._code)
                return
        raise LookupError(f"no schema for version {version}")
