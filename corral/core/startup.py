"""Checks made before ``corral`` changes anything or starts listening.

Each check raises :class:`StartupError` with one sentence for the operator;
the command line prints it on one line and exits non-zero.  They run
before databases are migrated and before the server binds, so a mistake
never leaves a half-started server behind.
"""

from __future__ import annotations

import errno
import ipaddress
import os
import re
import socket
import tempfile
from collections.abc import Iterable

import sqlalchemy as sa
from oslo_config import cfg

NOAUTH_STRATEGIES = ("noauth", "noauth2")


class StartupError(Exception):
    """A configuration or environment problem found before starting."""


def check_values(conf: cfg.ConfigOpts) -> None:
    """Read every option once: oslo.config validates values only when read."""
    for name in list(conf):
        try:
            value = conf[name]
        except cfg.Error as error:
            raise StartupError(_bad_value(None, name, error)) from None
        if isinstance(value, cfg.ConfigOpts.GroupAttr):
            for option in list(value):
                try:
                    value[option]
                except cfg.Error as error:
                    raise StartupError(_bad_value(name, option, error)) from None


def _bad_value(group: str | None, option: str, error: cfg.Error) -> str:
    text = str(error)
    reason = text.rpartition("is not valid: ")[2] or text
    # oslo.config names the file or environment variable the value came from.
    source = re.search(r"detail='([^']*)'", text)
    where = f" (from {source.group(1)})" if source else ""
    return f"invalid value for [{group or 'DEFAULT'}] {option}{where}: {reason}"


def check_port(port: int) -> None:
    if not 1 <= port <= 65535:
        raise StartupError(f"--port must be between 1 and 65535, not {port}")


def check_data_dir(path: str) -> None:
    """The state directory exists (it is created if missing) and is writable."""
    try:
        os.makedirs(path, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as error:
        raise StartupError(f"data directory {path} is not usable: {error.strerror or error}") from None


def check_database_urls(urls: Iterable[tuple[str, str]]) -> None:
    """Every configured database URL names a known backend (the password is never shown)."""
    from corral.core.db import normalize_url

    for name, url in urls:
        try:
            sa.engine.make_url(normalize_url(url)).get_dialect()
        except (sa.exc.ArgumentError, sa.exc.NoSuchModuleError, ValueError):
            raise StartupError(f"the database URL for {name} is not valid") from None


def check_listen(host: str, port: int) -> None:
    """Nothing else listens on ``host:port`` (checked by binding it once)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError as error:
        raise StartupError(f"cannot listen on {host}: {error.strerror or error}") from None
    family, kind, proto, _name, address = infos[0]
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(address)
        except OSError as error:
            reason = "another process is listening there" if error.errno == errno.EADDRINUSE else error.strerror
            raise StartupError(f"cannot listen on {host}:{port}: {reason}") from None


def check_auth_exposure(conf: cfg.ConfigOpts, host: str) -> None:
    """noauth and noauth2 make every caller an admin: loopback only, unless allowed."""
    strategy = conf.api.auth_strategy
    if strategy not in NOAUTH_STRATEGIES or conf.api.allow_noauth_on_network or is_loopback(host):
        return
    raise StartupError(
        f"refusing to serve auth_strategy = {strategy} on {host}, which is not a loopback address: "
        "any client could act as an admin. Use http_basic or keystone, listen on 127.0.0.1, "
        "or set [api] allow_noauth_on_network = true to accept that risk"
    )


def check_auth_files(conf: cfg.ConfigOpts) -> None:
    if conf.api.auth_strategy != "http_basic":
        return
    path = conf.api.http_basic_auth_user_file
    try:
        with open(path, encoding="utf-8"):
            pass
    except OSError as error:
        raise StartupError(
            f"http_basic needs a readable user file; {path}: {error.strerror or error}"
        ) from None


def is_loopback(host: str) -> bool:
    """Whether every address ``host`` names is a loopback address."""
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    return bool(infos) and all(ipaddress.ip_address(info[4][0].split("%")[0]).is_loopback for info in infos)


def metrics_address(conf: cfg.ConfigOpts) -> tuple[str, int] | None:
    """``[metrics] listen`` as (host, port), None when unset; a bare port is on 127.0.0.1."""
    value = (conf.metrics.listen or "").strip()
    if not value:
        return None
    host, separator, port_text = value.rpartition(":")
    if not separator:
        host, port_text = "127.0.0.1", value
    host = host.strip("[]") or "127.0.0.1"
    try:
        port = int(port_text)
    except ValueError:
        port = 0
    if not 1 <= port <= 65535:
        raise StartupError(f"invalid value for [metrics] listen: {value!r} is not host:port with a port "
                           "between 1 and 65535")
    return host, port


def check_metrics(conf: cfg.ConfigOpts, *, listen: bool = True, api_port: int | None = None) -> None:
    """The metrics listener's address is valid, free, and not open to the network unless allowed."""
    address = metrics_address(conf)
    if address is None:
        return
    if listen and address[1] == api_port:
        raise StartupError(f"[metrics] listen needs a port of its own, not the APIs' port {api_port}")
    path = conf.metrics.http_basic_auth_user_file
    if path:
        try:
            with open(path, encoding="utf-8"):
                pass
        except OSError as error:
            raise StartupError(
                f"[metrics] http_basic_auth_user_file must be readable; {path}: {error.strerror or error}"
            ) from None
    if not listen:
        return
    host, port = address
    if not (path or conf.metrics.allow_network or is_loopback(host)):
        raise StartupError(
            f"refusing to serve metrics on {host}, which is not a loopback address, without credentials: "
            "set [metrics] http_basic_auth_user_file, listen on 127.0.0.1, or set [metrics] "
            "allow_network = true"
        )
    check_listen(host, port)
