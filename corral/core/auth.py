"""Request authentication strategies.

``corral`` (the default)
    Tokens issued by Corral's own identity service, checked in-process by
    every service (see :mod:`corral.identity.auth`).
``noauth2``
    Like upstream: ``X-Auth-Token: user[:project]``; the user ``admin`` gets
    the admin role (plus reader and member), other users member and reader,
    an ``X-Roles`` header (as upstream Placement reads it) exactly its roles.
    No token header is a 401; an empty token is a user without roles.
``noauth``
    No authentication at all; every request is an admin (standalone Ironic's
    ``noauth``).
``http_basic``
    HTTP basic auth against an Apache htpasswd file of bcrypt hashes, as
    standalone Ironic uses.  Authenticated users are admins.
``keystone``
    keystonemiddleware validates the token (see :func:`wrap_wsgi`) and
    leaves the identity in ``X-*`` headers, read here.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import threading
from collections.abc import Callable
from typing import Any

import falcon
from oslo_config import cfg

from corral.core.context import RequestContext
from corral.core.errors import Unauthorized

ADMIN_ROLES = ("admin", "member", "reader")
MEMBER_ROLES = ("member", "reader")

Authenticator = Callable[[falcon.Request], None]


def make_authenticator(conf: cfg.ConfigOpts) -> Authenticator:
    strategy = conf.api.auth_strategy
    if strategy == "corral":
        from corral.core import services

        (identity,) = services.load(["identity"])
        return identity.make_authenticator(conf)  # type: ignore[no-any-return]
    if strategy == "noauth2":
        return authenticate_noauth2
    if strategy == "noauth":
        return authenticate_noauth
    if strategy == "http_basic":
        return HtpasswdAuthenticator(conf.api.http_basic_auth_user_file)
    if strategy == "keystone":
        return authenticate_keystone
    raise ValueError(f"unknown auth_strategy {strategy!r}")


def _fill(context: RequestContext, user: str, project: str | None, roles: tuple[str, ...]) -> None:
    context.user_id = user
    context.project_id = project
    context.roles = roles
    context.authenticated = True


def authenticate_noauth2(req: falcon.Request) -> None:
    token = req.get_header("X-Auth-Token")
    if token is None:
        raise Unauthorized("The request you have made requires authentication.")
    user, _, project = token.partition(":")
    _fill(req.context, user, project or None, _noauth2_roles(req, user))


def _noauth2_roles(req: falcon.Request, user: str) -> tuple[str, ...]:
    """An ``X-Roles`` header wins; otherwise the roles the user's name implies.

    An empty token is a nameless user without roles: like upstream, policy
    refuses it (403) rather than authentication (401).
    """
    header = req.get_header("X-Roles")
    if header is not None:
        return tuple(role.strip().lower() for role in header.split(",") if role.strip())
    if user == "admin":
        return ADMIN_ROLES
    return MEMBER_ROLES if user else ()


def authenticate_noauth(req: falcon.Request) -> None:
    project = req.get_header("X-Project-Id")
    _fill(req.context, "admin", project, ADMIN_ROLES)


def authenticate_keystone(req: falcon.Request) -> None:
    if req.get_header("X-Identity-Status", default="Invalid") != "Confirmed":
        raise Unauthorized("The request you have made requires authentication.")
    roles = tuple(
        role.strip().lower() for role in req.get_header("X-Roles", default="").split(",") if role.strip()
    )
    _fill(req.context, req.get_header("X-User-Id", default=""), req.get_header("X-Project-Id"), roles)
    req.context.system_scope = req.get_header("OpenStack-System-Scope")
    req.context.domain_id = req.get_header("X-Domain-Id")


class HtpasswdAuthenticator:
    """bcrypt htpasswd checking, with verified credentials remembered.

    bcrypt is deliberately slow (~0.1-0.3 s a check), so a successful
    (user, password) pair is cached by its SHA-256 for the file's lifetime.
    The file is re-read when it changes on disk.
    """

    def __init__(self, path: str) -> None:
        self._path = path
        self._lock = threading.Lock()
        self._mtime: float | None = None
        self._hashes: dict[str, bytes] = {}
        self._verified: set[bytes] = set()

    def _reload(self) -> None:
        import os

        try:
            mtime = os.stat(self._path).st_mtime
        except OSError:
            raise Unauthorized("Authentication is not available.") from None
        if mtime == self._mtime:
            return
        hashes = {}
        with open(self._path, encoding="utf-8") as handle:
            for line in handle:
                line = line.strip()
                if line and not line.startswith("#") and ":" in line:
                    user, _, hashed = line.partition(":")
                    hashes[user] = hashed.encode()
        self._hashes, self._verified, self._mtime = hashes, set(), mtime

    def __call__(self, req: falcon.Request) -> None:
        import bcrypt

        user, password = _basic_credentials(req)
        with self._lock:
            self._reload()
            hashed = self._hashes.get(user)
            digest = hashlib.sha256(b"%s\0%s\0%s" % (user.encode(), password, hashed or b"")).digest()
            if hashed is None:
                raise Unauthorized("Invalid credentials.")
            if digest not in self._verified:
                try:
                    valid = bcrypt.checkpw(password, hashed)
                except ValueError:
                    valid = False
                if not valid:
                    raise Unauthorized("Invalid credentials.")
                self._verified.add(digest)
        _fill(req.context, user, req.get_header("X-Project-Id"), ADMIN_ROLES)


def _basic_credentials(req: falcon.Request) -> tuple[str, bytes]:
    header = req.get_header("Authorization") or ""
    scheme, _, encoded = header.partition(" ")
    if scheme.lower() != "basic" or not encoded:
        raise Unauthorized(
            "The request you have made requires authentication.",
            headers={"WWW-Authenticate": 'Basic realm="Corral"'},
        )
    try:
        user, sep, password = base64.b64decode(encoded.strip(), validate=True).partition(b":")
        if not sep:
            raise ValueError
        return user.decode("utf-8"), password
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise Unauthorized("Invalid authentication header.") from None


def wrap_wsgi(app: Any, conf: cfg.ConfigOpts) -> Any:
    """Put keystonemiddleware in front of ``app`` when Keystone is in use.

    Auth decisions are delayed so that unauthenticated version documents
    stay reachable; :func:`authenticate_keystone` refuses everything else.
    """
    if conf.api.auth_strategy != "keystone":
        return app
    try:
        from keystonemiddleware import auth_token
    except ImportError as error:  # pragma: no cover - depends on the optional extra
        raise RuntimeError(
            "auth_strategy = keystone needs the 'keystone' extra: pip install 'corral[keystone]'"
        ) from error
    return auth_token.AuthProtocol(app, {"oslo_config_config": conf, "delay_auth_decision": True})
