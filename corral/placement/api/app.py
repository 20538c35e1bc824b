"""Build Placement's WSGI application."""

from __future__ import annotations

import falcon
import microversion_parse
from oslo_config import cfg

from corral.core import auth, errors
from corral.core.db import database_from_conf
from corral.core.http import HttpService, build_app
from corral.core.policy import Enforcer
from corral.placement import conf as placement_conf
from corral.placement.api import policies
from corral.placement.api.errors import format_error
from corral.placement.api.http_rules import PlacementRules
from corral.placement.api.routes import ROUTES
from corral.placement.api.schemas import compile_all
from corral.placement.api.state import PlacementState
from corral.placement.db import catalog
from corral.placement.microversions import SPEC


def _version_error(error: errors.VersionNotAcceptable) -> errors.ApiError:
    if error.malformed:
        # Upstream's wording comes from microversion_parse's own parser.
        try:
            microversion_parse.parse_version_string(error.requested)
        except TypeError as problem:
            return errors.BadRequest(f"Invalid microversion: {problem}")
        return errors.BadRequest(f"Invalid microversion: invalid version string: {error.requested}")
    return error


def load_standard_names(state: PlacementState) -> None:
    """Make sure the standard resource classes and traits exist; cache their ids."""
    state.standard_classes = catalog.sync_standard(
        state.db, catalog.RESOURCE_CLASSES, catalog.standard_resource_classes()
    )
    state.standard_traits = catalog.sync_standard(state.db, catalog.TRAITS, catalog.standard_traits())


def build_state(conf: cfg.ConfigOpts, *, load_names: bool = True) -> PlacementState:
    state = PlacementState(
        conf=conf,
        db=database_from_conf(conf, placement_conf.database_url(conf), "placement_database"),
        policy=Enforcer(conf, policies.rules()),
        schemas=compile_all(),
    )
    if load_names:
        load_standard_names(state)
    return state


def make_app(conf: cfg.ConfigOpts, state: PlacementState | None = None) -> falcon.App:
    if state is None:
        state = build_state(conf)
    service = HttpService(
        name="placement",
        versions=SPEC,
        format_error=format_error,
        authenticate=auth.make_authenticator(conf),
        max_body_size=conf.api.max_request_body_size,
        on_version_error=_version_error,
        # Placement stores no documents, and upstream compares such numbers
        # (a generation, an amount) and answers 409, as the rounded float does.
        exact_json_integers=False,
    )
    app = build_app(service, ROUTES, state)
    app.add_middleware(PlacementRules(ROUTES))
    # Bodiless answers (201 from POST before 1.20, PUT of a trait) carry no content type.
    app.resp_options.default_media_type = None
    return app
