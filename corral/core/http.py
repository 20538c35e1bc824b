"""HTTP plumbing on Falcon shared by every service.

A service describes itself with an :class:`HttpService` (its version spec,
its error formatter, hooks for its own headers) and a declarative route
table of :class:`Route` entries; :func:`build_app` turns both into a Falcon
WSGI application with:

* request ids (``x-openstack-request-id``),
* microversion negotiation before routing and version headers on every
  response, errors included,
* authentication for every route not marked public,
* per-endpoint microversion bounds,
* one error handler that renders every failure in the service's own body,
* the checks of :mod:`corral.core.edge` (values no backend can store,
  the request-body size limit, chunked bodies) and orjson encoding.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import falcon
import orjson
from microversion_parse import Version

from corral.core import edge, errors, metrics
from corral.core.auth import Authenticator
from corral.core.context import RequestContext
from corral.core.db import is_data_error, is_database_unavailable
from corral.core.microversion import VersionSpec

LOG = logging.getLogger(__name__)

Handler = Callable[..., None]
# (request, error) -> (body bytes, content type)
ErrorFormatter = Callable[[falcon.Request, errors.ApiError], tuple[bytes, str]]

HTTP_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")


class Request(falcon.Request):
    context_type = RequestContext


@dataclass(frozen=True)
class Endpoint:
    """One handler for one method, available in a range of microversions."""

    handler: Handler
    min_version: tuple[int, int] | None = None
    max_version: tuple[int, int] | None = None

    def accepts(self, version: Version | None) -> bool:
        if version is None:
            return True
        if self.min_version is not None and version < self.min_version:
            return False
        return not (self.max_version is not None and version > self.max_version)


@dataclass(frozen=True)
class Route:
    """A path template and its handlers, keyed by HTTP method."""

    path: str
    methods: Mapping[str, Handler | Endpoint | Iterable[Endpoint]]
    # Reachable without authentication (version documents, the agent's
    # lookup and heartbeat); a templated path opens everything under its
    # static prefix.
    public: bool = False


def _default_version_miss(req: falcon.Request, method: str) -> errors.ApiError:
    return errors.NotFound("The resource could not be found.")


@dataclass
class HttpService:
    name: str
    versions: VersionSpec
    format_error: ErrorFormatter
    authenticate: Authenticator
    max_body_size: int = 114688
    # The error to raise when a route exists but not at the request's version.
    version_miss: Callable[[falcon.Request, str], errors.ApiError] = _default_version_miss
    # Extra headers for every response, e.g. Ironic's openstack-request-id.
    extra_headers: Callable[[falcon.Request, falcon.Response], None] | None = None
    # Called with the negotiation error so a service can reshape it.
    on_version_error: Callable[[errors.VersionNotAcceptable], errors.ApiError] | None = None
    strip_trailing_slash: bool = False
    # Refuse JSON integers beyond 64 bits (which orjson would round to
    # floats), for services that store documents as sent.
    exact_json_integers: bool = True
    # (METHOD, path regex) of requests whose bodies are data the handler
    # streams (image uploads): neither the body size limit nor the JSON
    # checks apply to them, and nothing reads them before the handler.
    streamed_bodies: tuple[tuple[str, str], ...] = ()
    options: dict[str, Any] = field(default_factory=dict)


class _Resource:
    """A Falcon resource dispatching to :class:`Endpoint` s by microversion."""

    def __init__(self, service: HttpService, route: Route, state: Any) -> None:
        self._service = service
        self._endpoints: dict[str, tuple[Endpoint, ...]] = {}
        for method, spec in route.methods.items():
            method = method.upper()
            if method not in HTTP_METHODS:
                raise ValueError(f"unknown HTTP method {method} for {route.path}")
            if callable(spec) and not isinstance(spec, Endpoint):
                endpoints: tuple[Endpoint, ...] = (Endpoint(spec),)
            elif isinstance(spec, Endpoint):
                endpoints = (spec,)
            else:
                endpoints = tuple(spec)
            if state is not None:
                endpoints = tuple(
                    Endpoint(functools.partial(e.handler, state), e.min_version, e.max_version) for e in endpoints
                )
            self._endpoints[method] = endpoints
            setattr(self, f"on_{method.lower()}", self._make_responder(method, endpoints))

    def _make_responder(self, method: str, endpoints: tuple[Endpoint, ...]) -> Handler:
        service = self._service
        if len(endpoints) == 1 and endpoints[0].min_version is None and endpoints[0].max_version is None:
            return endpoints[0].handler

        def responder(req: falcon.Request, resp: falcon.Response, **params: Any) -> None:
            version = req.context.version
            for endpoint in endpoints:
                if endpoint.accepts(version):
                    return endpoint.handler(req, resp, **params)
            raise service.version_miss(req, method)

        return responder


class _Middleware:
    def __init__(self, service: HttpService, public_paths: frozenset[str],
                 public_prefixes: tuple[str, ...] = ()) -> None:
        self._service = service
        # Authentication happens before routing (as upstream's middleware
        # does), so unknown paths need a token too; only these are open.
        self._public_paths = public_paths
        self._public_prefixes = public_prefixes
        self._streamed = [(method, re.compile(pattern)) for method, pattern in service.streamed_bodies]
        # The app's router, to name the route of a request refused before
        # routing (401, 406): set by build_app.
        self.router: Any = None

    def _streams_body(self, req: falcon.Request) -> bool:
        return any(req.method == method and pattern.fullmatch(req.path) for method, pattern in self._streamed)

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        incoming = req.get_header("X-OpenStack-Request-Id")
        if incoming and incoming.startswith("req-") and len(incoming) <= 64:
            req.context.extras["global_request_id"] = incoming
        service = self._service
        try:
            req.context.version = service.versions.negotiate(req.headers)
        except errors.VersionNotAcceptable as error:
            if service.on_version_error is not None:
                raise service.on_version_error(error) from None
            raise
        if req.path not in self._public_paths and not (
            self._public_prefixes and req.path.startswith(self._public_prefixes)
        ):
            service.authenticate(req)
        if not self._streamed or not self._streams_body(req):
            edge.check_length(req, service.max_body_size)

    def process_resource(self, req: falcon.Request, resp: falcon.Response, resource: Any, params: Any) -> None:
        # Only for requests a handler will serve: an unknown path or method
        # is a 404 or 405 whatever its values, as upstream answers.
        if resource is None or not hasattr(resource, f"on_{req.method.lower()}"):
            return
        edge.check_request(req)
        if self._streamed and self._streams_body(req):
            return
        edge.check_body(req, self._service.max_body_size, exact_integers=self._service.exact_json_integers)

    def process_response(
        self, req: falcon.Request, resp: falcon.Response, resource: Any, req_succeeded: bool
    ) -> None:
        # For the metrics (corral.core.metrics): the route template, never the raw path.
        env = req.env
        env[metrics.SERVICE_KEY] = self._service.name
        env[metrics.ROUTE_KEY] = req.uri_template or self._template_of(req.path)
        resp.set_header("x-openstack-request-id", req.context.request_id)
        for name, value in self._service.versions.response_headers(req.context.version, self._service.versions):
            resp.set_header(name, value)
        if self._service.extra_headers is not None:
            self._service.extra_headers(req, resp)

    def _template_of(self, path: str) -> str:
        """The template of the route ``path`` matches, for a request answered before routing."""
        found = self.router.find(path) if self.router is not None else None
        return found[3] if found is not None and found[3] else metrics.UNMATCHED


def build_app(service: HttpService, routes: Iterable[Route], state: Any = None) -> falcon.App:
    """A Falcon app serving ``routes``.

    When ``state`` is given (the service's database, policy, compiled
    schemas...), every handler is called as ``handler(state, req, resp,
    **params)``; otherwise as ``handler(req, resp, **params)``.
    """
    routes = list(routes)
    public_paths = set()
    public_prefixes = []
    for route in routes:
        if route.public:
            if "{" in route.path:
                prefix = route.path.split("{", 1)[0]
                if not prefix.endswith("/") or prefix.count("/") < 3:
                    raise ValueError(f"public templated routes need a static prefix of two segments: {route.path}")
                public_prefixes.append(prefix)
                continue
            public_paths.update({route.path, route.path.rstrip("/") or "/", route.path.rstrip("/") + "/"})
    middleware = _Middleware(service, frozenset(public_paths), tuple(public_prefixes))
    app = falcon.App(request_type=Request, middleware=[middleware], cors_enable=False)
    middleware.router = app._router
    app.req_options.strip_url_path_trailing_slash = service.strip_trailing_slash
    app.req_options.auto_parse_qs_csv = False
    app.req_options.keep_blank_qs_values = True
    app.resp_options.default_media_type = falcon.MEDIA_JSON
    for route in routes:
        app.add_route(route.path, _Resource(service, route, state))

    def handle_error(req: falcon.Request, resp: falcon.Response, error: Exception, params: Any) -> None:
        api_error = to_api_error(error)
        # An unreachable database is no bug: corral.core.db logs it, once
        # every few seconds, however many requests it fails.
        if api_error.status >= 500 and not isinstance(api_error, errors.DatabaseUnavailable):
            LOG.error("%s %s failed", req.method, req.path, exc_info=error)
        body, content_type = service.format_error(req, api_error)
        resp.status = api_error.status
        resp.content_type = content_type
        resp.data = body
        for name, value in api_error.headers.items():
            resp.set_header(name, value)

    app.add_error_handler(Exception, handle_error)
    app.add_error_handler(falcon.HTTPError, handle_error)
    app.add_error_handler(falcon.HTTPStatus, handle_error)
    return app


def to_api_error(error: BaseException) -> errors.ApiError:
    """Turn anything raised while serving a request into an :class:`ApiError`."""
    if isinstance(error, errors.ApiError):
        return error
    if is_data_error(error):
        # The database refused a value the schemas let through (an
        # out-of-range number, a string too long): the client's input is at
        # fault and the transaction was rolled back.
        return errors.BadRequest("Invalid input: a value is not acceptable to the database.")
    if is_database_unavailable(error):
        # Refused, timed out, cut by corral.core.db_liveness, or no free
        # pooled connection: the client may try again later.
        return errors.DatabaseUnavailable()
    if isinstance(error, falcon.HTTPError):
        status = error.status_code
        message = error.description or ""
        if isinstance(error, falcon.HTTPRouteNotFound) or status == 404:
            return errors.NotFound(message or "The resource could not be found.", headers=dict(error.headers or {}))
        if status == 405:
            method_error = errors.MethodNotAllowed(
                message or "The method specified is not allowed for this resource.",
                headers=dict(error.headers or {}),
            )
            return method_error
        return errors.ApiError(message, status=status, headers=dict(error.headers or {}))
    return errors.InternalError("An unexpected error occurred while processing the request.")


# ---------------------------------------------------------------- helpers


def send_json(resp: falcon.Response, body: Any, status: int = 200) -> None:
    resp.status = status
    resp.content_type = falcon.MEDIA_JSON
    resp.data = orjson.dumps(body)


def send_empty(resp: falcon.Response, status: int = 204) -> None:
    resp.status = status
    resp.data = b""
    if status == 204:
        # No body means no content type either.
        resp.content_type = None  # type: ignore[assignment]


def read_body(req: falcon.Request, limit: int) -> bytes:
    """The raw request body, refusing more than ``limit`` bytes (413).

    Chunked bodies are read too, under the same limit (see :mod:`corral.core.edge`).
    """
    return edge.read_request_body(req, limit)


def parse_json(data: bytes) -> Any:
    """Decode a JSON body; malformed input is a 400 naming the problem."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as error:
        raise errors.BadRequest(f"Malformed JSON: {error}") from None


def base_url(req: falcon.Request, public_endpoint: str | None = None) -> str:
    """The URL prefix a service's links are built on (no trailing slash)."""
    if public_endpoint:
        return public_endpoint.rstrip("/") + req.root_path
    return req.prefix.rstrip("/")
