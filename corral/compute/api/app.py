"""Build Compute's WSGI application (serving at its own root)."""

from __future__ import annotations

import logging
from typing import Any

import falcon
import sqlalchemy as sa
import microversion_parse
from oslo_config import cfg

from corral.core import auth, errors, microversion
from corral.core.db import database_from_conf
from corral.core.http import HttpService, build_app
from corral.core.policy import Enforcer
from corral.compute import conf as compute_conf
from corral.compute.api import policies
from corral.compute.api.errors import format_error
from corral.compute.api.routes import all_routes
from corral.compute.api.state import ComputeState
from corral.compute.microversions import LEGACY_HEADER, SERVICE_TYPE, SPEC, VERSIONS


LOG = logging.getLogger(__name__)


def _version_error(error: errors.VersionNotAcceptable) -> errors.ApiError:
    if error.malformed:
        return errors.BadRequest(
            f"API Version String {error.requested} is of invalid format. Must be of format MajorNum.MinorNum."
        )
    return errors.ApiError(
        f"Version {error.requested} is not supported by the API. "
        f"Minimum is {VERSIONS[0]} and maximum is {VERSIONS[-1]}.",
        status=406,
    )


def _unacceptable_version_headers(req: falcon.Request, resp: falcon.Response) -> None:
    # A well-formed but unsupported version is echoed back in the version
    # headers of the 406, as upstream does; a malformed one gets none.
    if req.context.version is not None:
        return
    requested = microversion_parse.get_version(
        req.headers, service_type=SERVICE_TYPE, legacy_headers=[LEGACY_HEADER]
    )
    if not requested:
        return
    try:
        version = microversion.parse(requested.strip())
    except TypeError:
        return
    shown = f"{version.major}.{version.minor}"
    resp.set_header("openstack-api-version", f"{SERVICE_TYPE} {shown}")
    resp.set_header("x-openstack-nova-api-version", shown)
    resp.set_header("vary", "OpenStack-API-Version, X-OpenStack-Nova-API-Version")


def _response_headers(req: falcon.Request, resp: falcon.Response) -> None:
    # Nova answers its request id under its older name too.
    resp.set_header("x-compute-request-id", req.context.request_id)
    _unacceptable_version_headers(req, resp)


def _make_authenticator(conf: cfg.ConfigOpts) -> auth.Authenticator:
    base = auth.make_authenticator(conf)

    def authenticate(req: falcon.Request) -> None:
        base(req)
        # noauth2 tokens without a project act in a project named after
        # the user, as upstream's noauth2 does.
        if req.context.project_id is None and conf.api.auth_strategy == "noauth2":
            req.context.project_id = req.context.user_id

    return authenticate


def build_state(conf: cfg.ConfigOpts, scheduler: Any = None) -> ComputeState:
    from corral.compute.cells import CellRegistry
    from corral.compute.glance import GlanceClient
    from corral.compute.domain.cell_admin import ensure_default_cells
    from corral.compute.scheduler import make_scheduler

    api_db = database_from_conf(conf, compute_conf.api_database_url(conf), "api_database")
    state = ComputeState(
        conf=conf,
        api_db=api_db,
        policy=Enforcer(conf, policies.rules(), forbidden_message=policies.FORBIDDEN_MESSAGE),
    )
    state.cells = CellRegistry(conf, api_db)
    state.scheduler = scheduler if scheduler is not None else make_scheduler(conf)
    state.images = GlanceClient(conf)
    if conf.compute.auto_map_cells:
        try:
            ensure_default_cells(conf, api_db, migrate=False)
        except sa.exc.SQLAlchemyError as error:
            LOG.warning("cells not mapped automatically (is the API database migrated?): %s", error)
    return state


def make_app(conf: cfg.ConfigOpts, state: ComputeState | None = None) -> falcon.App:
    if state is None:
        state = build_state(conf)
    service = HttpService(
        name="compute",
        versions=SPEC,
        format_error=format_error,
        authenticate=_make_authenticator(conf),
        max_body_size=conf.api.max_request_body_size,
        on_version_error=_version_error,
        extra_headers=_response_headers,
        strip_trailing_slash=False,
    )
    return build_app(service, all_routes(), state)
