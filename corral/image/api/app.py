"""Build the Image service's WSGI application (serving at its own root)."""

from __future__ import annotations

import threading
import time
from typing import Any

import falcon
import futurist
from oslo_config import cfg

from corral.core import auth
from corral.core.db import database_from_conf
from corral.core.http import HttpService, build_app
from corral.core.microversion import VersionSpec
from corral.core.policy import Enforcer
from corral.image import conf as image_conf
from corral.image.api import policies
from corral.image.api.errors import format_error
from corral.image.api.handlers.data import STREAMED_BODIES
from corral.image.api.routes import ROUTES
from corral.image.api.schemas import Schemas
from corral.image.api.state import ImageState
from corral.image.api.versions import VersionNegotiation
from corral.image.data import recover_expired
from corral.image.store import ImageStore, Staging

# Imports one process runs at a time; more wait their turn.
IMPORT_WORKERS = 4


class _NoMicroversions(VersionSpec):
    """Glance has no microversion header: every request is served the same way."""

    def negotiate(self, headers):  # type: ignore[no-untyped-def]
        return None


SPEC = _NoMicroversions(service_type="image", versions=("2.17",))


def build_state(conf: cfg.ConfigOpts) -> ImageState:
    formats = conf.image_format
    return ImageState(
        conf=conf,
        db=database_from_conf(conf, image_conf.database_url(conf), "image_database"),
        policy=Enforcer(conf, policies.rules(), forbidden_message="You are not authorized to complete {rule} action."),
        schemas=Schemas(list(formats.disk_formats), list(formats.container_formats)),
        store=ImageStore(conf),
        staging=Staging(conf.node_staging_uri),
        imports=futurist.ThreadPoolExecutor(max_workers=IMPORT_WORKERS),
    )


class _Recovery:
    """Every so often, on the import pool: put back uploads whose process died (see corral.image.data)."""

    def __init__(self, state: ImageState) -> None:
        self._state = state
        self._next = 0.0
        self._lock = threading.Lock()

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        now = time.monotonic()
        if now < self._next or not self._lock.acquire(blocking=False):
            return
        try:
            state = self._state
            self._next = now + state.conf.corral_image.recovery_interval
            state.imports.submit(recover_expired, state.db, state.store, state.staging)
        finally:
            self._lock.release()


def make_app(conf: cfg.ConfigOpts, state: ImageState | None = None) -> Any:
    if state is None:
        state = build_state(conf)
    service = HttpService(
        name="image",
        versions=SPEC,
        format_error=format_error,
        authenticate=auth.make_authenticator(conf),
        max_body_size=conf.api.max_request_body_size,
        streamed_bodies=STREAMED_BODIES,
    )
    app = build_app(service, ROUTES, state)
    app.add_middleware(_Recovery(state))
    # Bodiless answers (204) carry no content type, as Glance's.
    app.resp_options.default_media_type = None
    wrapped = VersionNegotiation(app, conf.api.public_endpoint)
    wrapped.state = state  # type: ignore[attr-defined]
    return wrapped
