"""Build Bare Metal's WSGI application."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import falcon
from oslo_config import cfg

from corral.baremetal import conf as baremetal_conf
from corral.baremetal.api import policies
from corral.baremetal.api.errors import NO_VERSION_HEADERS, format_error
from corral.baremetal.api.routes import ROUTES
from corral.baremetal.api.state import BaremetalState
from corral.baremetal.microversions import LEGACY_HEADER, MAX_VERSION, MIN_VERSION, SERVICE_TYPE, SPEC
from corral.core import auth, errors
from corral.core.db import database_from_conf
from corral.core.http import HttpService, build_app
from corral.core.microversion import parse
from corral.core.policy import Enforcer

_RANGE = f"The supported version range is: [{MIN_VERSION}, {MAX_VERSION}]."


def _version_error(error: errors.VersionNotAcceptable) -> errors.ApiError:
    """Upstream's three negotiation messages."""
    if error.malformed:
        message = f"Invalid value for {LEGACY_HEADER} header"
    elif parse(error.requested or "").major != parse(MIN_VERSION).major:
        message = (
            f"Mutually exclusive versions requested. Version {error.requested} requested but not "
            f"supported by this service. {_RANGE}"
        )
    else:
        message = (
            f"Version {error.requested} was requested but the minor version is not supported by "
            f"this service. {_RANGE}"
        )
    return errors.VersionNotAcceptable(message, requested=error.requested, malformed=error.malformed)


def _version_miss(req: falcon.Request, method: str) -> errors.ApiError:
    """A route too new for the requested version: 404 for reads, 405 otherwise."""
    if method in ("GET", "HEAD"):
        return errors.NotFound("The resource could not be found.", routing=True)
    return errors.MethodNotAllowed("The method specified is not allowed for this resource.", routing=True)


def _headers(conf: cfg.ConfigOpts):  # noqa: ANN202 - closure
    def add(req: falcon.Request, resp: falcon.Response) -> None:
        resp.set_header("openstack-request-id", req.context.request_id)
        if req.context.extras.get(NO_VERSION_HEADERS):
            return
        resp.set_header("X-OpenStack-Ironic-API-Minimum-Version", MIN_VERSION)
        resp.set_header("X-OpenStack-Ironic-API-Maximum-Version", MAX_VERSION)
        version = req.context.version
        if version is not None:
            resp.set_header(LEGACY_HEADER, str(version))
            resp.set_header("OpenStack-API-Version", f"{SERVICE_TYPE} {version}")
            resp.set_header("Vary", f"{LEGACY_HEADER}, OpenStack-API-Version")

    return add


class _ConfMiddleware:
    """Makes the configuration reachable from link builders."""

    def __init__(self, conf: cfg.ConfigOpts) -> None:
        self._conf = conf

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        req.context.extras["baremetal_conf"] = self._conf


def build_state(conf: cfg.ConfigOpts) -> BaremetalState:
    from corral.baremetal.conductor.rpcapi import ConductorAPI
    from corral.baremetal.drivers.registry import DriverRegistry

    db = database_from_conf(conf, baremetal_conf.database_url(conf), "baremetal_database")
    return BaremetalState(
        conf=conf,
        db=db,
        policy=Enforcer(conf, policies.rules(), forbidden_message="{rule} is disallowed by policy"),
        rpc=ConductorAPI(conf, db),
        drivers=DriverRegistry(conf),
    )


class _UntypedAccepted:
    """Drops the content type from empty 202 answers, as upstream sends them.

    Falcon always adds its default media type; python-ironicclient then
    tries to decode the empty body as JSON and logs an error.
    """

    def __init__(self, app: falcon.App) -> None:
        self.app = app

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        def start(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            if status.startswith("202") and ("content-length", "0") in [(k.lower(), v) for k, v in headers]:
                headers = [(name, value) for name, value in headers if name.lower() != "content-type"]
            return start_response(status, headers, exc_info)

        return self.app(environ, start)


def make_app(conf: cfg.ConfigOpts, state: BaremetalState | None = None) -> _UntypedAccepted:
    if state is None:
        state = build_state(conf)
    service = HttpService(
        name="baremetal",
        versions=SPEC,
        format_error=format_error,
        authenticate=auth.make_authenticator(conf),
        max_body_size=conf.api.max_request_body_size,
        on_version_error=_version_error,
        version_miss=_version_miss,
        extra_headers=_headers(conf),
        strip_trailing_slash=True,
    )
    app = build_app(service, ROUTES, state)
    app.add_middleware(_ConfMiddleware(conf))
    return _UntypedAccepted(app)
