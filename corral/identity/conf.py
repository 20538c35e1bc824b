"""Identity's configuration options (upstream Keystone names where Keystone has them).

``[identity_database] connection`` is the identity database (Keystone's own
is ``[database] connection``, which Corral's Compute already uses for its
default cell).  ``[token] expiration``, ``[token] allow_expired_window``,
``[token] allow_rescope_scoped_token``, ``[fernet_tokens] key_repository``,
``[fernet_tokens] max_active_keys``, ``[identity] default_domain_id``,
``[identity] password_hash_algorithm`` and ``[identity] password_hash_rounds``
mean what they mean in keystone.conf.
"""

from __future__ import annotations

import os

from oslo_config import cfg

from corral.core.config import database_opts, sqlite_url

DATABASE_OPTS = database_opts(
    "Database URL for Identity; "
    "an embedded SQLite file under state_path when unset."
)

IDENTITY_OPTS = [
    cfg.StrOpt(
        "default_domain_id",
        default="default",
        help="The domain users and projects belong to when a request names none.",
    ),
    cfg.StrOpt(
        "password_hash_algorithm",
        default="scrypt",
        choices=[("scrypt", "scrypt (memory-hard)"), ("bcrypt", "bcrypt, with passwords pre-hashed by SHA-256")],
        help="How new passwords and application credential secrets are hashed. "
        "Hashes made with either algorithm are always verified.",
    ),
    cfg.IntOpt(
        "password_hash_rounds",
        min=4,
        max=31,
        help="Cost of a hash, as a power of two: scrypt's N (default 15) or bcrypt's rounds (default 12).",
    ),
    cfg.IntOpt(
        "max_password_length",
        default=4096,
        min=1,
        help="Longest password accepted, in characters.",
    ),
    cfg.IntOpt(
        "max_concurrent_password_hashes",
        default=2,
        min=1,
        help="Password hashes one process computes at a time; further logins wait their turn, "
        "so a flood of logins cannot exhaust the memory scrypt needs.",
    ),
    cfg.FloatOpt(
        "password_hash_wait",
        default=3.0,
        min=0.0,
        help="Seconds a login waits for its turn to hash before it is answered 503 (Retry-After), "
        "so that waiting logins do not hold every server thread.",
    ),
]

TOKEN_OPTS = [
    cfg.IntOpt("expiration", default=3600, min=60, help="Seconds a token is valid after it is issued."),
    cfg.IntOpt(
        "allow_expired_window",
        default=172800,
        min=0,
        help="Seconds after expiry during which a service may still validate a token with allow_expired.",
    ),
    cfg.BoolOpt(
        "allow_rescope_scoped_token",
        default=True,
        help="Whether a scoped token may be exchanged for a token of another scope.",
    ),
    cfg.FloatOpt(
        "revocation_check_interval",
        default=0.5,
        min=0.0,
        max=1.0,
        help="Longest time, in seconds, that a process trusts what it last read of the revocation "
        "events: a revoked token is refused by every process at most this long after the "
        "revocation is committed.",
    ),
    cfg.IntOpt(
        "cache_size",
        default=10000,
        min=0,
        help="Decrypted tokens each process keeps, so that a token seen before is checked "
        "without decrypting it again.",
    ),
]

FERNET_OPTS = [
    cfg.StrOpt(
        "key_repository",
        help="Directory of the keys tokens are encrypted with (mode 0700, one file per key, "
        "as keystone-manage fernet_setup makes them); <state_path>/fernet-keys when unset. "
        "Every process that checks tokens needs the same keys.",
    ),
    cfg.IntOpt(
        "max_active_keys",
        default=3,
        min=1,
        help="Keys kept by 'corral identity fernet-rotate': the primary, the staged one and "
        "older ones that tokens still in use may have been made with.",
    ),
]

CATALOG_OPTS = [
    cfg.StrOpt(
        "region_id",
        default="RegionOne",
        help="The region every endpoint in the service catalog belongs to.",
    ),
    cfg.StrOpt(
        "public_url",
        help="Base URL clients reach Corral at (for example a proxy in front, "
        "https://cloud.example.com); every service's endpoint is this plus its path. "
        "Unset: [api] public_endpoint, or else the URL the client used to reach the identity service.",
    ),
    cfg.StrOpt("identity_url", help="Endpoint of the identity service, overriding <public_url>/identity."),
    cfg.StrOpt("placement_url", help="Endpoint of Placement, overriding <public_url>/placement."),
    cfg.StrOpt("baremetal_url", help="Endpoint of Bare Metal, overriding <public_url>/baremetal."),
    cfg.StrOpt("compute_url", help="Endpoint of Compute, overriding <public_url>/compute/v2.1."),
    cfg.StrOpt("image_url", help="Endpoint of Image, overriding <public_url>/image."),
]

BOOTSTRAP_OPTS = [
    cfg.BoolOpt(
        "auto_bootstrap",
        default=True,
        help="On 'corral serve', when the identity database has no domain yet, create the default "
        "domain, the admin project and user (random password), the roles and a clouds.yaml.",
    ),
    cfg.StrOpt(
        "clouds_yaml",
        help="Where 'corral serve' writes the admin's clouds.yaml entry on first start; "
        "<state_path>/clouds.yaml when unset.",
    ),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_opts(DATABASE_OPTS, group="identity_database")
    conf.register_opts(IDENTITY_OPTS + BOOTSTRAP_OPTS, group="identity")
    conf.register_opts(TOKEN_OPTS, group="token")
    conf.register_opts(FERNET_OPTS, group="fernet_tokens")
    conf.register_opts(CATALOG_OPTS, group="catalog")


def database_url(conf: cfg.ConfigOpts) -> str:
    return conf.identity_database.connection or sqlite_url(conf, "identity.sqlite")


def key_repository(conf: cfg.ConfigOpts) -> str:
    return conf.fernet_tokens.key_repository or os.path.join(conf.state_path, "fernet-keys")


def clouds_yaml_path(conf: cfg.ConfigOpts) -> str:
    return conf.identity.clouds_yaml or os.path.join(conf.state_path, "clouds.yaml")
