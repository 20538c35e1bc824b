"""Calls from one of Corral's services to another's HTTP API (Compute and Bare Metal to Image).

Services never import one another: they talk over HTTP as upstream's do.
A :class:`ServiceClient` reaches the service at ``[<group>]
endpoint_override`` (keystoneauth's option name, as nova.conf and
ironic.conf spell it), or at this Corral's own API on ``[<group>]
local_port``, and authenticates as Corral's service user (see
:mod:`corral.core.service_auth`) unless a call forwards a user's token, as
Nova forwards the user's token to Glance so that the user's view of
images counts; ``[<group>] auth_type = none`` or ``http_basic`` reach a
standalone service (see :mod:`corral.core.service_auth`).  Connection
failures and 5xx answers are retried ``num_retries`` times.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import requests
from oslo_config import cfg

from corral.core import local_calls
from corral.core.service_auth import ServiceCredentials

LOG = logging.getLogger(__name__)


def client_opts(service: str, path: str, retries: int) -> list[cfg.Opt]:
    return [
        cfg.StrOpt("endpoint_override",
                   help=f"URL of the {service} API. Unset: the one this Corral serves "
                   f"(http://127.0.0.1:<local_port>{path})."),
        cfg.PortOpt("local_port", default=6385,
                    help="Port of this Corral's own API server, used when endpoint_override is unset."),
        cfg.StrOpt("token", default="admin", secret=True,
                   help=f"X-Auth-Token sent to the {service} API under the noauth2 strategy. Under 'corral' a "
                   "token of Corral's service user is minted; under 'keystone' this group's keystoneauth "
                   "options (auth_type, auth_url, username...) authenticate."),
        cfg.IntOpt("num_retries", default=retries, min=0,
                   help=f"Times a call to the {service} API is retried after a connection failure or a 5xx."),
        cfg.FloatOpt("request_timeout", default=30.0, min=0.1,
                     help=f"Seconds to wait for the {service} API to connect, and between two reads."),
    ]


def register_client_opts(conf: cfg.ConfigOpts, group: str, opts: list[cfg.Opt]) -> None:
    """Register what the group lacks (several services share one client group)."""
    existing = set(conf[group].keys()) if group in conf else set()
    conf.register_opts([opt for opt in opts if opt.dest not in existing], group=group)


class ServiceUnavailable(Exception):
    """The other service cannot be reached, or keeps failing."""


class ServiceClient:
    def __init__(self, conf: cfg.ConfigOpts, group: str, path: str) -> None:
        self._conf = conf
        self._group = group
        options = conf[group]
        self.endpoint = (options.endpoint_override or f"http://127.0.0.1:{options.local_port}{path}").rstrip("/")
        self._local = threading.local()
        self._credentials: ServiceCredentials | None = None
        self._credentials_lock = threading.Lock()

    def _session(self) -> requests.Session:
        session = getattr(self._local, "session", None)
        if session is None:
            session = requests.Session()
            session.trust_env = False
            session.headers["Accept"] = "application/json"
            local = self._local_app()
            if local is not None:
                session.mount(self.endpoint, local_calls.LocalAdapter(local))
            self._local.session = session
        return session

    def _local_app(self) -> Any:
        """This process's own application, when the endpoint is this server's own (see corral.core.local_calls)."""
        if self._conf[self._group].endpoint_override:
            return None
        return local_calls.app_for(self._conf)

    def _service_headers(self) -> dict[str, str]:
        with self._credentials_lock:
            if self._credentials is None:
                self._credentials = ServiceCredentials(self._conf, self._group)
        return self._credentials.headers()

    def call(self, method: str, path: str, *, token: str | None = None, **kwargs: Any) -> requests.Response:
        """One request; ``token`` (a user's) instead of the service's own."""
        options = self._conf[self._group]
        headers = kwargs.pop("headers", {})
        failures = 0
        refreshed = False
        while True:
            try:
                response = self._session().request(
                    method, self.endpoint + path, timeout=options.request_timeout,
                    headers={**({"X-Auth-Token": token} if token else self._service_headers()), **headers},
                    **kwargs)
            except requests.RequestException as error:
                failures += 1
                if failures > options.num_retries:
                    raise ServiceUnavailable(f"{self.endpoint} cannot be reached: {error}") from error
                LOG.warning("%s %s failed (%s); retrying", method, self.endpoint + path, error)
                time.sleep(min(2.0, 0.2 * failures))
                continue
            if response.status_code == 401 and token is None and self._credentials is not None and not refreshed:
                # The service token was revoked or the keys rotated: a new one, once.
                self._credentials.refused()
                refreshed = True
                continue
            if response.status_code >= 500 and failures < options.num_retries:
                failures += 1
                LOG.warning("%s %s answered %d; retrying", method, self.endpoint + path, response.status_code)
                time.sleep(min(2.0, 0.2 * failures))
                continue
            return response
