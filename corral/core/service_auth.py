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
"""

from __future__ import annotations

from typing import Any

from oslo_config import cfg


class ServiceCredentials:
    def __init__(self, conf: cfg.ConfigOpts, group: str) -> None:
        self._strategy = conf.api.auth_strategy
        self._source: Any = None
        if self._strategy == "corral":
            from corral.identity.service_token import ServiceTokenSource

            self._source = ServiceTokenSource(conf)
        elif self._strategy == "keystone":
            self._source = _keystone_session(conf, group)
        else:
            self._static = conf[group].token

    def token(self) -> str:
        if self._strategy == "corral":
            return str(self._source.token())
        if self._strategy == "keystone":
            return str(self._source.get_token())
        return str(self._static)

    def refused(self) -> None:
        """The callee answered 401: get a new token next time."""
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
