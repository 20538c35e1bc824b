"""Request-body schemas of the identity API (Keystone's shapes), compiled once per application."""

from __future__ import annotations

from typing import Any

import jsonschema

from corral.core.schema import compile_schema
from corral.identity.domain.auth_request import TOKEN_ISSUE_SCHEMA

_BOOLEAN = {"type": "boolean", "enum": [True, False]}
_NAME = {"type": "string", "minLength": 1, "maxLength": 255, "pattern": r"[\S]+"}
_PROJECT_NAME = {"type": "string", "minLength": 1, "maxLength": 64, "pattern": r"[\S]+"}
_ID = {"type": "string", "minLength": 1, "maxLength": 64, "pattern": r"^[a-zA-Z0-9-]+$"}
_NULLABLE_STRING = {"type": ["string", "null"]}


def _wrapped(key: str, properties: dict[str, Any], *, required: list[str] | None = None,
             extra: bool = True) -> dict[str, Any]:
    inner: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": extra}
    if required:
        inner["required"] = required
    else:
        inner["minProperties"] = 1
    return {"type": "object", "properties": {key: inner}, "required": [key], "additionalProperties": False}


_USER = {
    "default_project_id": _NULLABLE_STRING,
    "description": _NULLABLE_STRING,
    "domain_id": _ID,
    "enabled": _BOOLEAN,
    "name": _NAME,
    "password": _NULLABLE_STRING,
}
_PROJECT = {
    "description": _NULLABLE_STRING,
    "domain_id": {"type": ["string", "null"], "minLength": 1, "maxLength": 64, "pattern": r"^[a-zA-Z0-9-]+$"},
    "enabled": _BOOLEAN,
    "is_domain": {"type": "boolean", "enum": [False]},
    "parent_id": {"type": ["string", "null"]},
    "name": _PROJECT_NAME,
    "tags": {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 255}, "maxItems": 80},
}
_DOMAIN = {"description": _NULLABLE_STRING, "enabled": _BOOLEAN, "name": _PROJECT_NAME}
_ROLE = {"name": _NAME, "description": _NULLABLE_STRING, "options": {"type": "object"}}
_ROLE_REF = {
    "type": "object",
    "properties": {"id": {"type": "string"}, "name": {"type": "string"}},
    "minProperties": 1,
    "additionalProperties": False,
}
_APP_CRED = {
    "name": _NAME,
    "description": _NULLABLE_STRING,
    "secret": {"type": ["string", "null"], "minLength": 1},
    "expires_at": {"type": ["string", "null"]},
    "roles": {"type": "array", "items": _ROLE_REF},
    "unrestricted": {"type": ["boolean", "null"]},
    "access_rules": {"type": "array", "maxItems": 0},
}
_PASSWORD_CHANGE = {
    "type": "object",
    "properties": {
        "user": {
            "type": "object",
            "properties": {"password": {"type": "string"}, "original_password": {"type": "string"}},
            "required": ["password", "original_password"],
            "additionalProperties": False,
        }
    },
    "required": ["user"],
    "additionalProperties": False,
}

SCHEMAS: dict[str, dict[str, Any]] = {
    "token_issue": TOKEN_ISSUE_SCHEMA,
    "user_create": _wrapped("user", _USER, required=["name"]),
    "user_update": _wrapped("user", _USER),
    "password_change": _PASSWORD_CHANGE,
    "project_create": _wrapped("project", _PROJECT, required=["name"]),
    "project_update": _wrapped("project", _PROJECT),
    "domain_create": _wrapped("domain", _DOMAIN, required=["name"]),
    "domain_update": _wrapped("domain", _DOMAIN),
    "role_create": _wrapped("role", _ROLE, required=["name"], extra=False),
    "role_update": _wrapped("role", _ROLE, extra=False),
    "app_cred_create": _wrapped("application_credential", _APP_CRED, required=["name"], extra=False),
}


def compile_all() -> dict[str, jsonschema.protocols.Validator]:
    compiled = {name: compile_schema(schema) for name, schema in SCHEMAS.items()}
    # Keystone validates token requests with draft 2020-12, as here.
    compiled["token_issue"] = jsonschema.Draft202012Validator(TOKEN_ISSUE_SCHEMA)
    return compiled
