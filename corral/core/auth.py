"""Request authentication strategies.

``corral`` (the default)
    Tokens issued by Corral's own identity service, checked in-process by
    every service (see :mod:`corral.identity.auth`).
``noauth2``
    Like upstream: ``X-Auth-Token: user[:project]``; the user ``admin`` gets
    the admin role (plus reader and member), other users member and reader,
    an ``X-Roles`` header (as upstream Placement reads it) exactly its roles.
    ``X-Project-Id`` and ``OpenStack-System-Scope`` set the project and the
    system scope as they do upstream.  No token header is a 401; an empty
    token is a user without roles.
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
import hmac
import os
import threading
from collections.abc import Callable, Iterable
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
    # As upstream Placement reads a request: ``OpenStack-System-Scope`` makes
    # the request system-scoped (the token then names no project), and an
    # ``X-Project-Id`` header, as keystonemiddleware sends it, wins over the
    # token's project.
    system_scope = req.get_header("OpenStack-System-Scope") or None
    project = req.get_header("X-Project-Id") or (None if system_scope else project or None)
    _fill(req.context, user, project, _noauth2_roles(req, user))
    req.context.system_scope = system_scope


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
    """bcrypt htpasswd checking that neither serializes callers nor names users.

    bcrypt is deliberately slow (~0.1-0.3 s a check) and releases the GIL,
    so checks run side by side in the request threads; a lock is held only
    to swap in a newly read file, never during a check.  A verified
    (user, password) pair is remembered, as an HMAC under a key that lives
    only in this process, until the file changes (at most
    :attr:`MAX_VERIFIED` pairs).  A user name that is not in the file costs
    one bcrypt check too, against a hash of the file's own cost, so the
    answer's timing does not tell which names exist.
    """

    MAX_VERIFIED = 4096

    def __init__(self, path: str) -> None:
        self._path = path
        self._lock = threading.Lock()
        self._users: _HtpasswdUsers | None = None
        self._key = os.urandom(32)

    def _current(self) -> _HtpasswdUsers:
        try:
            mtime = os.stat(self._path).st_mtime_ns
        except OSError:
            raise Unauthorized("Authentication is not available.") from None
        users = self._users
        if users is not None and users.mtime == mtime:
            return users
        with self._lock:
            if self._users is None or self._users.mtime != mtime:
                self._users = _HtpasswdUsers.read(self._path, mtime)
            return self._users

    def __call__(self, req: falcon.Request) -> None:
        user = self.check(req.get_header("Authorization"))
        _fill(req.context, user, req.get_header("X-Project-Id"), ADMIN_ROLES)

    def check(self, authorization: str | None) -> str:
        """The user an ``Authorization: Basic ...`` header proves to be; :class:`Unauthorized` otherwise."""
        user, password = basic_credentials(authorization)
        users = self._current()
        hashed = users.hashes.get(user)
        digest = hmac.new(self._key, user.encode() + b"\0" + password, hashlib.sha256).digest()
        if hashed is None or digest not in users.verified:
            # An unknown name is checked against a stand-in hash: same work.
            valid = _checkpw(password, hashed if hashed is not None else users.stand_in)
            if hashed is None or not valid:
                raise Unauthorized("Invalid credentials.")
            users.remember(digest, self.MAX_VERIFIED)
        return user


class _HtpasswdUsers:
    """One reading of the user file and the pairs verified against it."""

    def __init__(self, mtime: int, hashes: dict[str, bytes]) -> None:
        import bcrypt

        self.mtime = mtime
        self.hashes = hashes
        self.verified: set[bytes] = set()
        self._lock = threading.Lock()
        self.stand_in = bcrypt.hashpw(os.urandom(16), bcrypt.gensalt(rounds=_highest_cost(hashes.values())))

    @classmethod
    def read(cls, path: str, mtime: int) -> _HtpasswdUsers:
        hashes = {}
        try:
            with open(path, encoding="utf-8") as handle:
                for line in handle:
                    line = line.strip()
                    if line and not line.startswith("#") and ":" in line:
                        user, _, hashed = line.partition(":")
                        hashes[user] = hashed.encode()
        except OSError:
            raise Unauthorized("Authentication is not available.") from None
        return cls(mtime, hashes)

    def remember(self, digest: bytes, limit: int) -> None:
        with self._lock:
            if len(self.verified) >= limit:
                self.verified.clear()
            self.verified.add(digest)


def _highest_cost(hashes: Iterable[bytes]) -> int:
    """The largest bcrypt cost among ``$2b$12$...`` hashes (12 when none)."""
    costs = [int(parts[2]) for parts in (value.split(b"$") for value in hashes)
             if len(parts) > 3 and parts[2].isdigit() and 4 <= int(parts[2]) <= 31]
    return max(costs, default=12)


def _checkpw(password: bytes, hashed: bytes) -> bool:
    import bcrypt

    try:
        return bcrypt.checkpw(password, hashed)
    except ValueError:  # not a bcrypt hash, or a password bcrypt refuses
        return False


def basic_credentials(authorization: str | None) -> tuple[str, bytes]:
    header = authorization or ""
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
