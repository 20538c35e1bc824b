"""Configuration: one oslo.config ``ConfigOpts`` per process, built on demand.

Options keep upstream names (``[placement_database] connection``,
``[api] auth_strategy``, ``[conductor] automated_clean`` ...) so that an
operator's existing files work.  oslo.config already reads environment
overrides named ``OS_<GROUP>__<OPTION>`` (for example
``OS_API__AUTH_STRATEGY=noauth2``); nothing here re-implements that.

Nothing is registered at import time: :func:`make_conf` creates a fresh
``ConfigOpts``, registers the core options and every service's options, and
parses the given files.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

from oslo_config import cfg

DEFAULT_STATE_PATH = os.path.join(
    os.environ.get("XDG_DATA_HOME") or os.path.expanduser("~/.local/share"), "corral"
)

CORE_OPTS = [
    cfg.StrOpt(
        "state_path",
        default=DEFAULT_STATE_PATH,
        help="Directory holding Corral's local state, including the embedded "
        "SQLite databases used when no database URL is configured.",
    ),
    cfg.StrOpt(
        "host",
        default=os.uname().nodename,
        sample_default="<hostname>",
        help="Name of this host, used by conductors and compute services to "
        "register themselves.",
    ),
    cfg.BoolOpt("debug", default=False, help="Log at DEBUG level."),
]

API_OPTS = [
    cfg.StrOpt(
        "auth_strategy",
        default="corral",
        choices=[
            ("corral", "Tokens of Corral's own identity service, checked in every process"),
            ("noauth2", "X-Auth-Token: user[:project]; user 'admin' is an admin"),
            ("noauth", "No authentication; every request is an admin"),
            ("http_basic", "HTTP basic auth against a bcrypt htpasswd file"),
            ("keystone", "Keystone tokens through keystonemiddleware"),
        ],
        help="How API requests are authenticated.",
    ),
    cfg.StrOpt(
        "http_basic_auth_user_file",
        default="/etc/corral/htpasswd",
        help="Apache-format htpasswd file with bcrypt hashes, used by the "
        "http_basic strategy.",
    ),
    cfg.IntOpt(
        "max_request_body_size",
        default=114688,
        min=1,
        help="Largest request body accepted, in bytes; larger bodies get 413.",
    ),
    cfg.IntOpt(
        "max_limit",
        default=1000,
        min=1,
        help="The largest number of items a collection returns in one response.",
    ),
    cfg.StrOpt(
        "public_endpoint",
        help="Public URL prefix used in links instead of the request's own host.",
    ),
    cfg.BoolOpt(
        "allow_noauth_on_network",
        default=False,
        help="Let the noauth and noauth2 strategies serve on an address other "
        "than loopback. Both let any client act as an admin: only for a "
        "network where every client is trusted.",
    ),
]

DATABASE_TUNING_OPTS = [
    cfg.IntOpt(
        "sqlite_busy_timeout",
        default=30,
        min=1,
        help="Seconds a SQLite writer waits for the write lock before retrying.",
    ),
    cfg.IntOpt("max_pool_size", default=10, min=1, help="Connections kept per engine."),
    cfg.IntOpt("max_overflow", default=20, min=0, help="Extra connections allowed per engine."),
    cfg.IntOpt(
        "db_max_retries",
        default=20,
        min=0,
        help="Times a transaction is retried after a deadlock or serialization failure.",
    ),
    cfg.IntOpt(
        "connection_recycle_time",
        default=3600,
        min=-1,
        help="Seconds after which a pooled connection is replaced by a new one on its next "
        "checkout (-1: never).",
    ),
    cfg.IntOpt(
        "pool_timeout",
        default=10,
        min=1,
        help="Seconds a request waits for a free pooled connection before it is answered 503.",
    ),
    # How long to wait on a database host that stopped answering: see
    # docs/operations.md, "Production".  A value in a database URL's query string
    # (?connect_timeout=10) wins over these.
    cfg.IntOpt(
        "connect_timeout",
        default=5,
        min=1,
        help="Seconds to open a connection, handshake included (PostgreSQL: libpq's "
        "connect_timeout, at least 2; MariaDB: PyMySQL's connect_timeout, and its read and "
        "write timeouts during the handshake).",
    ),
    cfg.IntOpt(
        "keepalives_idle",
        default=5,
        min=1,
        help="Seconds without traffic before TCP keepalive probes are sent on a database connection.",
    ),
    cfg.IntOpt("keepalives_interval", default=2, min=1, help="Seconds between TCP keepalive probes."),
    cfg.IntOpt(
        "keepalives_count",
        default=3,
        min=1,
        help="Unanswered TCP keepalive probes after which a database connection is dropped.",
    ),
    cfg.IntOpt(
        "tcp_user_timeout",
        default=10000,
        min=0,
        help="Milliseconds data sent to a database may stay unacknowledged before the "
        "connection is dropped (0: the system's default).",
    ),
    cfg.FloatOpt(
        "liveness_check_after",
        default=3.0,
        min=0.0,
        help="Seconds a connection may be in use before its database is checked with a new "
        "connection (bounded by connect_timeout). A database that does not answer has every "
        "connection to it cut, so the requests waiting on it are answered 503 at once, and new "
        "ones too until it answers again; one that answers is left alone, however long its "
        "statements run. 0 turns the check off.",
    ),
]


def database_opts(connection_help: str) -> list[cfg.Opt]:
    """A service's ``[..._database]`` group: its URL and oslo.db's pool options.

    Pool options left unset take their value from ``[corral_database]``.
    """
    return [
        cfg.StrOpt("connection", secret=True, help=connection_help),
        cfg.IntOpt("max_pool_size", min=1, help="Connections kept per engine ([corral_database] when unset)."),
        cfg.IntOpt("max_overflow", min=0, help="Extra connections allowed ([corral_database] when unset)."),
        cfg.IntOpt(
            "pool_timeout",
            min=1,
            help="Seconds to wait for a free pooled connection before answering 503 "
            "([corral_database] when unset).",
        ),
        cfg.IntOpt(
            "connection_recycle_time",
            min=-1,
            help="Seconds after which a pooled connection is replaced ([corral_database] when unset).",
        ),
    ]


# How ``corral serve`` treats clients (see corral/core/front.py).  A slow
# or silent client costs the server a socket, never a thread, and only for
# these many seconds.
SERVER_OPTS = [
    cfg.FloatOpt(
        "header_timeout",
        default=10.0,
        min=0.1,
        help="Seconds a client has to send a request's line and headers, from "
        "the moment it connects (or sends the first byte of a request on a "
        "kept-alive connection). Later, the server answers 408 and closes.",
    ),
    cfg.FloatOpt(
        "body_timeout",
        default=30.0,
        min=0.1,
        help="Seconds a client has to send a request's whole body once its "
        "headers have arrived. Later, the server answers 408 and closes. "
        "A streamed body (an image upload) must instead bring 1 MiB (or its "
        "end) within this many seconds, again and again, or the connection "
        "is closed.",
    ),
    cfg.FloatOpt(
        "keepalive_timeout",
        default=75.0,
        min=1.0,
        help="Seconds an idle kept-alive connection stays open. Well above the intervals clients poll at "
        "(the openstack CLI's --wait every 5 s): a client reusing its connection just as the server "
        "closes it fails with 'Remote end closed connection without response'.",
    ),
    cfg.FloatOpt(
        "send_timeout",
        default=60.0,
        min=0.1,
        help="Seconds a client has to read an answer before the connection is dropped.",
    ),
    cfg.IntOpt(
        "max_connections",
        default=1000,
        min=1,
        help="Connections one API worker process holds at once; a connection "
        "beyond that is answered 503 with Retry-After and closed.",
    ),
    cfg.IntOpt(
        "max_streamed_requests",
        default=16,
        min=1,
        help="Requests one API worker process runs at once whose body or "
        "answer streams (image uploads and downloads), on threads of their "
        "own; one more is answered 503 with Retry-After.",
    ),
    cfg.FloatOpt(
        "healthcheck_timeout",
        default=2.0,
        min=0.1,
        help="Seconds GET /healthcheck waits for its checks (run side by side); a part that "
        "has not answered by then is reported down.",
    ),
]


# Prometheus metrics (see corral/core/metrics.py and docs/metrics.md): off
# unless an operator names where to serve them.
METRICS_OPTS = [
    cfg.StrOpt(
        "listen",
        help="Serve Prometheus metrics at http://<listen>/metrics, as host:port (a bare port means "
        "127.0.0.1). Unset (the default), no metrics are served or counted. With --workers N, the "
        "one listener reports every worker and the background process.",
    ),
    cfg.StrOpt(
        "http_basic_auth_user_file",
        help="Apache-format htpasswd file with bcrypt hashes: when set, a scrape must authenticate "
        "as one of its users (HTTP basic).",
    ),
    cfg.BoolOpt(
        "allow_network",
        default=False,
        help="Serve metrics without credentials on an address other than loopback. Without this "
        "(or http_basic_auth_user_file), a listen address that is not loopback is refused.",
    ),
    cfg.FloatOpt(
        "refresh_interval",
        default=10.0,
        min=1.0,
        help="Seconds between a conductor's counts of the nodes by provision state (one grouped "
        "query each time).",
    ),
]


def register_core_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_opts(CORE_OPTS)
    conf.register_opts(API_OPTS, group="api")
    conf.register_opts(DATABASE_TUNING_OPTS, group="corral_database")
    conf.register_opts(SERVER_OPTS, group="corral_server")
    conf.register_opts(METRICS_OPTS, group="metrics")
    from oslo_middleware import cors
    from oslo_policy import opts as policy_opts

    conf.register_opts(cors.CORS_OPTS, group="cors")
    # [oslo_policy] policy_file, enforce_new_defaults, ...
    policy_opts.set_defaults(conf)


def make_conf(
    config_files: Sequence[str] = (),
    *,
    state_path: str | None = None,
    overrides: dict[str, dict[str, object]] | None = None,
    services: Iterable[str] | None = None,
) -> cfg.ConfigOpts:
    """Build and parse a configuration object.

    ``overrides`` maps group name ('DEFAULT' for the default group) to
    option values; tests and the CLI use it instead of writing files.
    """
    from corral.core import services as service_registry

    conf = cfg.ConfigOpts()
    register_core_opts(conf)
    for service in service_registry.load(services):
        service.register_opts(conf)
    missing = [path for path in config_files if not os.path.exists(path)]
    if missing:
        raise FileNotFoundError(f"configuration file not found: {', '.join(missing)}")
    conf([], project="corral", default_config_files=list(config_files), validate_default_values=True)
    if state_path:
        conf.set_override("state_path", os.path.abspath(state_path))
    for group, values in (overrides or {}).items():
        for name, value in values.items():
            conf.set_override(name, value, group=None if group == "DEFAULT" else group)
    return conf


def sqlite_url(conf: cfg.ConfigOpts, filename: str) -> str:
    """URL of an embedded SQLite database under ``state_path``."""
    return "sqlite:///" + os.path.join(conf.state_path, filename)
