"""``POST /v3/auth/tokens`` bodies: validated and read as Keystone reads them.

Validation failures carry Keystone's own wording (its schema, its
"Expecting to find X in Y" messages).  One deliberate difference: a user or
project named without a domain is looked up in the default domain
(``[identity] default_domain_id``), where Keystone answers 400, so that a
client configured with nothing but a URL, a user name, a password and a
project name works.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jsonschema

from corral.core.errors import BadRequest, Unauthorized

METHODS = ("password", "token", "application_credential")

# Keystone's running schema has None in this enum (another of its schemas
# makes the shared definition nullable); "type" still refuses null.
_BOOLEAN = {"type": "boolean", "enum": [True, False, None]}
_ID_OR_NAME = {"type": "object", "properties": {"id": {"type": "string"}, "name": {"type": "string"}}}

# Keystone's schema for token requests, key for key: its error messages
# print the schema, so they match only if the schema is the same.
TOKEN_ISSUE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "identity": {
            "type": "object",
            "properties": {
                "methods": {"type": "array", "items": {"type": "string"}},
                "password": {
                    "type": "object",
                    "properties": {
                        "user": {
                            "type": "object",
                            "properties": {
                                "id": {"type": "string"},
                                "name": {"type": "string"},
                                "password": {"type": "string"},
                                "domain": _ID_OR_NAME,
                            },
                        }
                    },
                },
                "token": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
            },
            "required": ["methods"],
        },
        "scope": {
            "type": ["object", "string"],
            "properties": {
                "project": {
                    "type": "object",
                    "properties": {"name": {"type": "string"}, "id": {"type": "string"}, "domain": _ID_OR_NAME},
                },
                "domain": _ID_OR_NAME,
                "OS-TRUST:trust": {"type": "object", "properties": {"id": {"type": "string"}}},
                "system": {"type": "object", "properties": {"all": _BOOLEAN}},
            },
        },
    },
    "required": ["identity"],
}

_EXPLANATION = (
    " The server could not comply with the request since it is either malformed or otherwise"
    " incorrect. The client is assumed to be in error."
)


def unauthorized() -> Unauthorized:
    """Keystone's one answer to every failed login, whatever failed."""
    return Unauthorized("The request you have made requires authentication.")


def expecting(attribute: str, target: str) -> BadRequest:
    """Keystone's ValidationError wording."""
    return BadRequest(f"Expecting to find {attribute} in {target}.{_EXPLANATION}")


class AuthMethodNotSupported(Unauthorized):
    def __init__(self) -> None:
        super().__init__("Attempted to authenticate with an unsupported method.",
                         identity={"methods": list(METHODS)})


class AppCredentialAuthError(Unauthorized):
    def __init__(self, detail: str) -> None:
        super().__init__(f"Error authenticating with application credential: {detail}", identity={})


@dataclass(frozen=True)
class NamedRef:
    """Something named by id, or by name within a domain (itself by id or name)."""

    id: str | None = None
    name: str | None = None
    domain_id: str | None = None
    domain_name: str | None = None


@dataclass(frozen=True)
class AuthRequest:
    methods: tuple[str, ...]
    user: NamedRef | None = None
    password: str | None = None
    token_id: str | None = None
    app_cred: NamedRef | None = None
    app_cred_user: NamedRef | None = None
    app_cred_secret: str | None = None
    # None (the user's default project, if any), "unscoped", "project", "domain" or "system".
    scope: str | None = None
    scope_ref: NamedRef | None = None


def schema_error(validator: jsonschema.protocols.Validator, body: Any) -> BadRequest | None:
    """The first schema error, in Keystone's words."""
    error = next(iter(validator.iter_errors(body)), None)
    if error is None:
        return None
    if error.path:
        path = "/".join(str(part) for part in error.path)
        return BadRequest(f"Invalid input for field '{path}': {error}")
    return BadRequest(str(error))


def parse(body: Any, validator: jsonschema.protocols.Validator, default_domain_id: str) -> AuthRequest:
    if not isinstance(body, dict) or not body.get("auth"):
        raise expecting("auth", "request body")
    auth = body["auth"]
    problem = schema_error(validator, auth)
    if problem is not None:
        raise problem
    _check_id_or_name(auth)
    identity = auth["identity"]
    methods = tuple(identity["methods"])
    for method in methods:
        if method not in identity:
            raise expecting(method, "identity")
    for method in methods:
        if method not in METHODS:
            raise AuthMethodNotSupported()
    fields: dict[str, Any] = {"methods": methods}
    if "application_credential" in methods:
        if "scope" in auth:
            raise AppCredentialAuthError("Application credentials cannot request a scope.")
        fields.update(_app_cred(identity["application_credential"], default_domain_id))
    else:
        fields.update(_scope(auth, default_domain_id))
    if "password" in methods:
        fields.update(_password(identity["password"], default_domain_id))
    if "token" in methods:
        fields["token_id"] = identity["token"]["id"]
    return AuthRequest(**fields)


def _check_id_or_name(auth: dict[str, Any]) -> None:
    checks = [(auth["identity"].get("password", {}).get("user"), "identity/password/user")]
    scope = auth.get("scope")
    if isinstance(scope, dict):
        checks += [(scope.get("project"), "scope/project"), (scope.get("domain"), "scope/domain")]
    for item, where in checks:
        if item is None:
            continue
        if "id" not in item and "name" not in item:
            raise BadRequest(f"Invalid input for field {where}: id or name must be present.")
        domain = item.get("domain") if where != "scope/domain" else None
        if domain is not None and "id" not in domain and "name" not in domain:
            raise BadRequest(f"Invalid input for field {where}/domain: id or name must be present.")


def _named(data: dict[str, Any], default_domain_id: str) -> NamedRef:
    if "id" in data and "name" not in data:
        return NamedRef(id=data["id"])
    domain = data.get("domain") or {}
    if not domain:
        return NamedRef(name=data.get("name"), domain_id=default_domain_id)
    return NamedRef(name=data.get("name"), domain_id=domain.get("id"), domain_name=domain.get("name"))


def _password(section: Any, default_domain_id: str) -> dict[str, Any]:
    user = section.get("user") if isinstance(section, dict) else None
    if not isinstance(user, dict):
        # Keystone's own (odd) wording for this case.
        raise expecting("user", "None")
    # No password: refused like a wrong one (401), after the same work.
    return {"user": _named(user, default_domain_id), "password": user.get("password")}


def _app_cred(section: Any, default_domain_id: str) -> dict[str, Any]:
    if not isinstance(section, dict):
        raise expecting("name or ID", "application credential")
    if not isinstance(section.get("secret"), str):
        raise expecting("secret", "application credential")
    if isinstance(section.get("id"), str):
        return {"app_cred": NamedRef(id=section["id"]), "app_cred_secret": section["secret"]}
    if not isinstance(section.get("name"), str):
        raise expecting("name or ID", "application credential")
    user = section.get("user")
    if not isinstance(user, dict) or not isinstance(user.get("id", user.get("name")), str):
        raise expecting("user", "application credential")
    return {
        "app_cred": NamedRef(name=section["name"]),
        "app_cred_user": _named(user, default_domain_id),
        "app_cred_secret": section["secret"],
    }


def _scope(auth: dict[str, Any], default_domain_id: str) -> dict[str, Any]:
    if "scope" not in auth:
        return {}
    scope = auth["scope"]
    if isinstance(scope, str):
        if scope != "unscoped":
            raise expecting("system, project, domain, OS-TRUST:trust or unscoped", "scope")
        return {"scope": "unscoped"}
    kinds = [kind for kind in ("project", "domain", "unscoped", "system", "OS-TRUST:trust") if kind in scope]
    if len(kinds) != 1:
        raise expecting("system, project, domain, OS-TRUST:trust or unscoped", "scope")
    kind = kinds[0]
    if kind == "OS-TRUST:trust":
        raise unauthorized()
    if kind in ("unscoped", "system"):
        return {"scope": kind}
    ref = scope[kind]
    if kind == "domain":
        return {"scope": "domain", "scope_ref": NamedRef(id=ref.get("id"), name=ref.get("name"))}
    return {"scope": "project", "scope_ref": _named(ref, default_domain_id)}
