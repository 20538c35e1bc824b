"""Issuing tokens: who is asking, for what scope, with which roles.

Every failure to authenticate is the same 401 whatever failed (unknown
user, wrong password, disabled user or domain, no role on the scope), and
a password check costs one hash whether or not the user exists.
"""

from __future__ import annotations

import datetime
import logging
import time
from dataclasses import dataclass
from typing import Any

from sqlalchemy.engine import Connection

from corral.core.errors import ApiError, Forbidden, NotFound
from corral.identity.db import app_creds, resources
from corral.identity.db import roles as role_db
from corral.identity.domain import roles as role_logic
from corral.identity.domain import tokens
from corral.identity.domain.auth_request import AuthRequest, NamedRef, unauthorized
from corral.identity.domain.passwords import PasswordHasher
from corral.identity.domain.tokens import InvalidToken, TokenPayload
from corral.identity.validator import TokenValidator

LOG = logging.getLogger(__name__)


@dataclass(frozen=True)
class Identity:
    """Who authenticated, before the scope is decided."""

    user: dict[str, Any]
    methods: tuple[str, ...]
    expires_at: int
    audit_chain: str | None = None
    app_cred: dict[str, Any] | None = None
    # Scope fixed by the method (a rescoped token without a new scope, an application credential).
    inherited_scope: tuple[str | None, str | None] | None = None


class TokenIssuer:
    def __init__(self, conf: Any, db: Any, hasher: PasswordHasher, validator: TokenValidator) -> None:
        self._conf = conf
        self._db = db
        self._hasher = hasher
        self._validator = validator

    # ------------------------------------------------------------- entry

    def issue(self, request: AuthRequest) -> TokenPayload:
        identity = self._identify(request)
        with self._db.read() as conn:
            scope, scope_id, project_domain_id, role_ids = self._scope(conn, request, identity)
            names = role_db.role_names(conn)
        payload = TokenPayload(
            user_id=identity.user["id"],
            user_domain_id=identity.user["domain_id"],
            methods=identity.methods,
            scope=scope,
            scope_id=scope_id,
            project_domain_id=project_domain_id,
            roles=tuple(names[role_id] for role_id in role_ids if role_id in names),
            issued_at=time.time_ns() // 1000,
            expires_at=identity.expires_at,
            audit_ids=(tokens.new_audit_id(),) + ((identity.audit_chain,) if identity.audit_chain else ()),
            app_cred_id=identity.app_cred["id"] if identity.app_cred else None,
        )
        return payload.with_revocation_keys()

    def service_token(self, user_id: str, project_id: str) -> TokenPayload:
        """A token for one of Corral's own services calling another (no password involved)."""
        with self._db.read() as conn:
            user = resources.get_user(conn, user_id)
            project = resources.get_project(conn, project_id)
            if user is None or not user["enabled"] or project is None or not project["enabled"]:
                raise unauthorized()
            role_ids = self._effective(conn, user_id, role_db.PROJECT, project_id)
            names = role_db.role_names(conn)
        if not role_ids:
            raise unauthorized()
        return TokenPayload(
            user_id=user_id, user_domain_id=user["domain_id"], methods=("service",), scope=tokens.PROJECT,
            scope_id=project_id, project_domain_id=project["domain_id"],
            roles=tuple(names[role_id] for role_id in role_ids), issued_at=time.time_ns() // 1000,
            expires_at=int(time.time()) + self._conf.token.expiration, audit_ids=(tokens.new_audit_id(),),
        ).with_revocation_keys()

    # ---------------------------------------------------------- identity

    def _identify(self, request: AuthRequest) -> Identity:
        lifetime = int(time.time()) + self._conf.token.expiration
        found: Identity | None = None
        if "application_credential" in request.methods:
            found = self._by_app_cred(request, lifetime)
        if "password" in request.methods:
            found = self._merge(found, self._by_password(request, lifetime))
        if "token" in request.methods:
            found = self._merge(found, self._by_token(request))
        if found is None:
            raise unauthorized()
        return found

    @staticmethod
    def _merge(first: Identity | None, second: Identity) -> Identity:
        if first is None:
            return second
        if first.user["id"] != second.user["id"]:
            raise unauthorized()
        return Identity(
            user=first.user, methods=tuple(dict.fromkeys(second.methods + first.methods)),
            expires_at=min(first.expires_at, second.expires_at),
            audit_chain=first.audit_chain or second.audit_chain, app_cred=first.app_cred or second.app_cred,
            inherited_scope=first.inherited_scope or second.inherited_scope,
        )

    def _find_user(self, conn: Connection, ref: NamedRef) -> dict[str, Any] | None:
        if ref.id is not None:
            return resources.get_user(conn, ref.id)
        domain = self._find_domain(conn, NamedRef(id=ref.domain_id, name=ref.domain_name))
        if domain is None or ref.name is None:
            return None
        return resources.get_user_by_name(conn, ref.name, domain["id"])

    @staticmethod
    def _find_domain(conn: Connection, ref: NamedRef) -> dict[str, Any] | None:
        if ref.name is not None:
            return resources.get_domain_by_name(conn, ref.name)
        return resources.get_domain(conn, ref.id) if ref.id is not None else None

    @staticmethod
    def _usable(conn: Connection, user: dict[str, Any] | None) -> bool:
        """An enabled user in an enabled domain."""
        if user is None or not user["enabled"]:
            return False
        domain = resources.get_domain(conn, user["domain_id"])
        return domain is not None and bool(domain["enabled"])

    def _by_password(self, request: AuthRequest, expires_at: int) -> Identity:
        assert request.user is not None
        with self._db.read() as conn:
            user = self._find_user(conn, request.user)
            usable = self._usable(conn, user)
        password = request.password or ""
        acceptable = request.password is not None and len(password) <= self._conf.identity.max_password_length
        stored = user["password_hash"] if user is not None and acceptable else None
        # One hash computed in every case: the answer takes the same work
        # whether the user exists, is disabled, or only the password is wrong.
        matches = self._hasher.verify(password[: self._conf.identity.max_password_length], stored)
        if not (matches and usable and user is not None):
            raise unauthorized()
        return Identity(user=user, methods=("password",), expires_at=expires_at)

    def _by_token(self, request: AuthRequest) -> Identity:
        assert request.token_id is not None
        try:
            payload = self._validator.payload(request.token_id)
        except InvalidToken:
            raise NotFound("Could not recognize Fernet token") from None
        try:
            self._validator.validate(request.token_id, fresh=True)
        except InvalidToken:
            raise NotFound("Failed to validate token") from None
        if payload.app_cred_id is not None and request.scope is not None:
            raise Forbidden("A token created with an application credential cannot be rescoped.")
        if payload.scope is not None and request.scope is not None and not self._conf.token.allow_rescope_scoped_token:
            raise Forbidden("Rescoping scoped token is not allowed.")
        with self._db.read() as conn:
            user = resources.get_user(conn, payload.user_id)
            usable = self._usable(conn, user)
        if not usable or user is None:
            raise unauthorized()
        return Identity(
            user=user, methods=("token",) + tuple(m for m in payload.methods if m != "token"),
            expires_at=payload.expires_at, audit_chain=payload.audit_ids[-1],
            # Without a new scope the token gets the user's default project, as in Keystone,
            # except a token from an application credential, which keeps the credential's.
            inherited_scope=(payload.scope, payload.scope_id) if payload.app_cred_id else None,
            app_cred={"id": payload.app_cred_id} if payload.app_cred_id else None,
        )

    def _by_app_cred(self, request: AuthRequest, expires_at: int) -> Identity:
        assert request.app_cred is not None and request.app_cred_secret is not None
        with self._db.read() as conn:
            credential = None
            if request.app_cred.id is not None:
                credential = app_creds.get(conn, request.app_cred.id)
            elif request.app_cred_user is not None:
                owner = self._find_user(conn, request.app_cred_user)
                if owner is not None:
                    credential = app_creds.get_by_name(conn, owner["id"], request.app_cred.name or "")
            if credential is None:
                # Keystone says so (credential ids are random; nothing to guess from it).
                raise NotFound(f"Could not find Application Credential: {request.app_cred.id or request.app_cred.name}.")
            user = resources.get_user(conn, credential["user_id"])
            usable = self._usable(conn, user)
        matches = self._hasher.verify(request.app_cred_secret, credential["secret_hash"])
        if not (matches and usable and user is not None):
            raise unauthorized()
        if credential["expires_at"] is not None:
            ends = credential["expires_at"].replace(tzinfo=datetime.UTC).timestamp()
            if ends <= time.time():
                raise unauthorized()
            expires_at = min(expires_at, int(ends))
        scope = ("system", "all") if credential["system"] else ("project", credential["project_id"])
        return Identity(user=user, methods=("application_credential",), expires_at=expires_at,
                        app_cred=credential, inherited_scope=scope)

    # ------------------------------------------------------------- scope

    def _effective(self, conn: Connection, user_id: str, target_type: str, target_id: str) -> list[str]:
        direct = role_db.direct_roles(conn, user_id, target_type, target_id)
        return role_logic.expand(direct, role_db.implications(conn)) if direct else []

    def _scope(
        self, conn: Connection, request: AuthRequest, identity: Identity
    ) -> tuple[str | None, str | None, str | None, list[str]]:
        """(scope, scope id, project's domain, role ids) of the token to issue."""
        user_id = identity.user["id"]
        kind, ref = request.scope, request.scope_ref
        if kind is None and identity.inherited_scope is not None and identity.inherited_scope[0] is not None:
            kind, scope_id = identity.inherited_scope
            ref = NamedRef(id=scope_id)
        if kind is None:
            return self._default_project(conn, identity.user)
        if kind == "unscoped":
            return None, None, None, []
        if kind == "system":
            role_ids = self._effective(conn, user_id, role_db.SYSTEM, role_db.SYSTEM_ID)
            return self._checked("system", "all", None, self._restrict(conn, identity, role_ids))
        assert ref is not None
        if kind == "domain":
            domain = self._find_domain(conn, ref)
            if domain is None or not domain["enabled"]:
                raise unauthorized()
            role_ids = self._effective(conn, user_id, role_db.DOMAIN, domain["id"])
            return self._checked("domain", domain["id"], None, role_ids)
        project = self._find_project(conn, ref)
        role_ids = self._effective(conn, user_id, role_db.PROJECT, project["id"])
        return self._checked("project", project["id"], project["domain_id"], self._restrict(conn, identity, role_ids))

    @staticmethod
    def _checked(scope: str, scope_id: str, project_domain: str | None,
                 role_ids: list[str]) -> tuple[str, str, str | None, list[str]]:
        if not role_ids:
            raise unauthorized()
        return scope, scope_id, project_domain, role_ids

    def _find_project(self, conn: Connection, ref: NamedRef) -> dict[str, Any]:
        if ref.id is not None and ref.name is None:
            project = resources.get_project(conn, ref.id)
        else:
            domain = self._find_domain(conn, NamedRef(id=ref.domain_id, name=ref.domain_name))
            if domain is None or not domain["enabled"]:
                raise unauthorized()
            project = resources.get_project_by_name(conn, ref.name or "", domain["id"])
        if project is None or not project["enabled"]:
            raise unauthorized()
        domain = resources.get_domain(conn, project["domain_id"])
        if domain is None or not domain["enabled"]:
            raise unauthorized()
        return project

    def _default_project(self, conn: Connection, user: dict[str, Any]) -> tuple[str | None, str | None,
                                                                             str | None, list[str]]:
        """The user's default project when it is usable, else an unscoped token (as Keystone decides)."""
        project_id = user.get("default_project_id")
        if project_id:
            try:
                project = self._find_project(conn, NamedRef(id=project_id))
            except ApiError:
                project = None
            if project is not None:
                role_ids = self._effective(conn, user["id"], role_db.PROJECT, project["id"])
                if role_ids:
                    return "project", project["id"], project["domain_id"], role_ids
        return None, None, None, []

    def _restrict(self, conn: Connection, identity: Identity, role_ids: list[str]) -> list[str]:
        """An application credential's token carries only the credential's roles, if the user still has them."""
        credential = identity.app_cred
        if credential is None:
            return role_ids
        if "role_ids" not in credential:
            found = app_creds.get(conn, credential["id"])
            if found is None:
                raise unauthorized()
            credential = found
        allowed = role_logic.expand(credential["role_ids"], role_db.implications(conn))
        if not set(credential["role_ids"]) <= set(role_ids):
            raise unauthorized()
        return [role_id for role_id in role_ids if role_id in allowed]
