"""Credentials one of Corral's services uses to call another service's API.

``[api] auth_strategy``:

``corral``
    A token minted in-process for Corral's service user
    (:mod:`corral.identity.service_token`).
``keystone``
    keystoneauth with the options of the called service's group, as
    upstream's services configure them (``[placement] auth_type``,
    ``auth_url``, ``username``, ``password``, ``project_name``,
    ``user_domain_name``, ``project_domain_name``...).
others
    The group's ``token`` option, sent as it is (``noauth2``'s ``admin``).

Whatever the strategy, a group whose keystoneauth ``auth_type`` is
``none`` sends no credentials and one whose ``auth_type`` is
``http_basic`` sends its ``username`` and ``password`` in an
``Authorization: Basic`` header, as keystoneauth's plugins of those names
do for upstream's services: how Nova reaches a standalone Ironic
(``[ironic] auth_type = http_basic`` or ``none``, with
``endpoint_override``).
"""

from __future__ import annotations

import base64
from typing import Any

from oslo_config import cfg


class ServiceCredentials:
    def __init__(self, conf: cfg.ConfigOpts, group: str) -> None:
        self._strategy = conf.api.auth_strategy
        self._source: Any = None
        self._headers: dict[str, str] | None = None
        auth_type = _auth_type(conf, group)
        if auth_type == "none":
            self._headers = {}
        elif auth_type == "http_basic":
            self._headers = {"Authorization": _basic_authorization(conf, group)}
        elif self._strategy == "corral":
            from corral.identity.service_token import ServiceTokenSource

            self._source = ServiceTokenSource(conf)
        elif self._strategy == "keystone":
            self._source = _keystone_session(conf, group)
        else:
            self._static = conf[group].token

    def headers(self) -> dict[str, str]:
        """What authenticates a request: the group's Basic credentials, none at all, or a token."""
        if self._headers is not None:
            return dict(self._headers)
        return {"X-Auth-Token": self.token()}

    def token(self) -> str:
        if self._headers is not None:
            raise ValueError("no token: this service's auth_type authenticates without one")
        if self._strategy == "corral":
            return str(self._source.token())
        if self._strategy == "keystone":
            return str(self._source.get_token())
        return str(self._static)

    def refused(self) -> None:
        """The callee answered 401: get a new token next time."""
        if self._headers is not None:
            return
        if self._strategy == "corral":
            self._source.invalidate()
        elif self._strategy == "keystone":
            self._source.invalidate()


def _keystone_session(conf: cfg.ConfigOpts, group: str) -> Any:
    try:
        from keystoneauth1 import loading
    except ImportError as error:  # pragma: no cover - depends on the optional extra
        raise RuntimeError(
            "auth_strategy = keystone needs the 'keystone' extra: pip install 'corral[keystone]'"
        ) from error
    loading.register_auth_conf_options(conf, group)
    loading.register_session_conf_options(conf, group)
    auth = loading.load_auth_from_conf_options(conf, group)
    return loading.load_session_from_conf_options(conf, group, auth=auth)


def _auth_type(conf: cfg.ConfigOpts, group: str) -> str | None:
    """The group's ``auth_type``, registered as keystoneauth registers it when that is installed.

    keystoneauth registers the option again under ``auth_strategy =
    keystone``: the same option objects keep that from clashing.
    """
    try:
        from keystoneauth1 import loading
    except ImportError:
        _register_missing(conf, group, [cfg.StrOpt("auth_type", help="Authentication type to load.")])
    else:
        loading.register_auth_conf_options(conf, group)
        section = conf[group].auth_section
        if section:
            return conf[section].auth_type  # type: ignore[no-any-return]
    return conf[group].auth_type  # type: ignore[no-any-return]


def _basic_authorization(conf: cfg.ConfigOpts, group: str) -> str:
    try:
        from keystoneauth1 import loading
    except ImportError:
        _register_missing(conf, group, [cfg.StrOpt("username", help="Username."),
                                        cfg.StrOpt("password", secret=True, help="User's password.")])
    else:
        conf.register_opts(loading.get_auth_plugin_conf_options("http_basic"), group=group)
    options = conf[group]
    if options.username is None or options.password is None:
        raise ValueError(f"[{group}] auth_type = http_basic needs username and password")
    credentials = f"{options.username}:{options.password}".encode()
    return "Basic " + base64.b64encode(credentials).decode()


def _register_missing(conf: cfg.ConfigOpts, group: str, opts: list[cfg.Opt]) -> None:
    existing = set(conf[group].keys()) if group in conf else set()
    conf.register_opts([opt for opt in opts if opt.dest not in existing], group=group)
