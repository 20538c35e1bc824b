"""Checking tokens in every service process, without a database round trip per request.

:class:`TokenValidator` decrypts a token with the key ring (and keeps the
result, so a token seen before costs a dictionary look-up), checks its
expiry, and checks it against the revocation events.

:class:`RevocationCache` holds this process's copy of the events.  A check
uses the copy if it was read less than ``[token] revocation_check_interval``
seconds ago (0.5 by default); otherwise the checking thread first reads the
one-row version of the events and, when it changed, the events themselves.
The time stamp recorded is the moment the read *started*, so every event
committed before that moment is in the copy: a token revoked at time T is
refused by every process for every check that starts after T plus the
interval, however busy the process is.  A process that gets no requests
reads nothing.  When the database cannot be read the check fails (503)
rather than trusting an old copy.
"""

from __future__ import annotations

import logging
import threading
import time

import sqlalchemy as sa
from oslo_config import cfg

from corral.core import metrics
from corral.core.db import Database, is_connection_error
from corral.core.errors import DatabaseUnavailable, ServiceUnavailable
from corral.identity.db import revocations
from corral.identity.domain.revocation import RevocationIndex
from corral.identity.domain.tokens import InvalidToken, TokenPayload, decode
from corral.identity.keys import KeyRing

LOG = logging.getLogger(__name__)


class TokenExpired(InvalidToken):
    pass


class TokenRevoked(InvalidToken):
    pass


class RevocationCache:
    def __init__(self, db: Database, interval: float) -> None:
        self._db = db
        self._interval = interval
        self._lock = threading.Lock()
        self._index = RevocationIndex()
        self._version: str | None = None
        self._read_at = float("-inf")
        # Database reads so far (the benchmark reports them).
        self.reads = 0

    def current(self) -> RevocationIndex:
        if time.monotonic() - self._read_at <= self._interval:
            return self._index
        with self._lock:
            started = time.monotonic()
            if started - self._read_at <= self._interval:
                return self._index
            self._read(started)
        return self._index

    def expire(self) -> None:
        """Forget when the copy was read: the next check reads again (this process just revoked something)."""
        self._read_at = float("-inf")

    def refresh(self) -> RevocationIndex:
        """Read now, whatever the age of the copy (the identity service's own checks)."""
        with self._lock:
            self._read(time.monotonic())
        return self._index

    def _read(self, started: float) -> None:
        result = "unchanged"
        try:
            with self._db.read() as conn:
                version = revocations.version(conn)
                if version != self._version:
                    self._index = RevocationIndex(revocations.events_in_force(conn))
                    self._version = version
                    result = "changed"
        except sa.exc.SQLAlchemyError as error:
            metrics.TOKEN_REVOCATION_READS.labels("failed").inc()
            if is_connection_error(error):
                # Logged by the database (once every few seconds), not here for every request.
                raise DatabaseUnavailable("Token revocations cannot be read; try again later.") from None
            LOG.error("cannot read token revocations: %s", error.__class__.__name__)
            raise ServiceUnavailable("Token revocations cannot be read; try again later.") from None
        self.reads += 1
        metrics.TOKEN_REVOCATION_READS.labels(result).inc()
        self._read_at = started


class TokenValidator:
    def __init__(self, keys: KeyRing, revocations_cache: RevocationCache, cache_size: int = 10000) -> None:
        self.keys = keys
        self.revocations = revocations_cache
        self._cache_size = cache_size
        self._cache: dict[str, TokenPayload] = {}
        self._cache_lock = threading.Lock()
        self._key_generation = -1

    def payload(self, token: str) -> TokenPayload:
        """The decrypted token, neither expiry nor revocation checked."""
        fernet = self.keys.fernet()
        if self.keys.generation != self._key_generation:
            with self._cache_lock:
                self._cache = {}
                self._key_generation = self.keys.generation
        cached = self._cache.get(token)
        if cached is not None:
            metrics.TOKEN_CACHE_HITS.inc()
            return cached
        metrics.TOKEN_CACHE_MISSES.inc()
        payload = decode(fernet, token)
        if self._cache_size:
            with self._cache_lock:
                if len(self._cache) >= self._cache_size:
                    # Oldest first: dictionaries keep insertion order.
                    del self._cache[next(iter(self._cache))]
                self._cache[token] = payload
        return payload

    def validate(self, token: str, *, expired_window: int = 0, fresh: bool = False) -> TokenPayload:
        """The token's payload if it is valid now; :class:`InvalidToken` (or a subclass) if not.

        ``expired_window``: seconds after expiry still accepted.  ``fresh``:
        read the revocation events now instead of trusting this process's copy.
        """
        payload = self.payload(token)
        if payload.expires_at + expired_window <= time.time():
            raise TokenExpired()
        index = self.revocations.refresh() if fresh else self.revocations.current()
        if index.revokes(payload):
            raise TokenRevoked()
        return payload


def make_validator(conf: cfg.ConfigOpts, db: Database | None = None) -> TokenValidator:
    from corral.core.db import database_from_conf
    from corral.identity import conf as identity_conf

    if db is None:
        db = database_from_conf(conf, identity_conf.database_url(conf), "identity_database")
    return TokenValidator(
        KeyRing(identity_conf.key_repository(conf)),
        RevocationCache(db, conf.token.revocation_check_interval),
        conf.token.cache_size,
    )
