"""JSON-RPC 2.0 over HTTP between API processes and conductors.

Requests are ``{"jsonrpc": "2.0", "method": ..., "params": {...}, "id": ...}``
posted to the conductor's address.  A failure answers ``{"error": {"code",
"message", "data": {"class", "message", "status"}}}``; the caller raises
an API error with the same status and message, so the API's client sees
exactly what an in-process call would have produced.

With ``[json_rpc] auth_strategy = http_basic`` every call must carry
HTTP basic credentials found in the htpasswd file; anything else is
answered 401 before the body is even read, so nothing is written.  The
client sends ``http_basic_username``/``http_basic_password`` (never
logged) and, with ``use_ssl``, talks https, checking the conductor's
certificate against ``cafile`` unless ``insecure``.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Iterable
from typing import Any

import orjson
import requests
from oslo_config import cfg
from urllib3.exceptions import NewConnectionError

from corral.core.errors import ApiError, InternalError, ServiceUnavailable, Unauthorized

LOG = logging.getLogger(__name__)

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
SERVER_ERROR = -32000
# Seconds to wait for a conductor to accept a connection: one that is gone
# should not hold a call for the whole answer timeout.
CONNECT_TIMEOUT = 5.0

# Not a JSON-RPC code: sent with HTTP 401 when credentials are missing or wrong.
UNAUTHORIZED = -32001


def make_server_app(target: Any, methods: Iterable[str],
                    authenticate: Callable[[str | None], str] | None = None) -> Callable[..., Any]:
    """A WSGI application dispatching JSON-RPC calls to ``target``'s ``methods``.

    ``authenticate`` (given the ``Authorization`` header) returns the caller
    or raises :class:`Unauthorized`; without it every caller is accepted.
    """
    allowed = frozenset(methods)

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        if authenticate is not None:
            try:
                authenticate(environ.get("HTTP_AUTHORIZATION"))
            except Unauthorized as error:
                return _respond(start_response, "401 Unauthorized", _error(None, UNAUTHORIZED, error.message),
                                [("WWW-Authenticate", 'Basic realm="Corral JSON-RPC"')])
        if environ.get("REQUEST_METHOD") != "POST":
            return _respond(start_response, "405 Method Not Allowed", {"error": "POST only"})
        length = int(environ.get("CONTENT_LENGTH") or 0)
        try:
            request = orjson.loads(environ["wsgi.input"].read(length))
        except orjson.JSONDecodeError as error:
            return _respond(start_response, "200 OK", _error(None, PARSE_ERROR, str(error)))
        call_id = request.get("id") if isinstance(request, dict) else None
        if not isinstance(request, dict) or not isinstance(request.get("params", {}), dict):
            return _respond(start_response, "200 OK", _error(call_id, INVALID_REQUEST, "invalid request"))
        method = request.get("method")
        if method not in allowed:
            return _respond(start_response, "200 OK", _error(call_id, METHOD_NOT_FOUND, f"no method {method}"))
        params = dict(request.get("params") or {})
        params.pop("context", None)
        try:
            result = getattr(target, method)(**params)
        except ApiError as error:
            body = _error(call_id, SERVER_ERROR, error.message)
            body["error"]["data"] = {
                "class": type(error).__name__,
                "message": error.message,
                "status": error.status,
                "extra": error.extra,
            }
            return _respond(start_response, "200 OK", body)
        except Exception as error:  # noqa: BLE001 - reported to the caller as a server error
            LOG.exception("RPC %s failed", method)
            return _respond(start_response, "200 OK", _error(call_id, SERVER_ERROR, str(error)))
        return _respond(start_response, "200 OK", {"jsonrpc": "2.0", "result": result, "id": call_id})

    return app


def _error(call_id: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": call_id, "error": {"code": code, "message": message}}


def _respond(start_response: Callable[..., Any], status: str, body: Any,
             headers: Iterable[tuple[str, str]] = ()) -> list[bytes]:
    data = orjson.dumps(body)
    start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(data))), *headers])
    return [data]


class ConductorUnreachable(ServiceUnavailable):
    """No connection could be made: the conductor never saw the call, which may go elsewhere."""


def _not_connected(error: requests.RequestException) -> bool:
    """Whether the call failed before a connection existed (refused, unreachable, connect timeout)."""
    if isinstance(error, requests.ConnectTimeout):
        return True
    reason = getattr(error.args[0], "reason", None) if error.args else None
    return isinstance(error, requests.ConnectionError) and isinstance(reason, NewConnectionError)


class RemoteError(ApiError):
    """An error raised by the conductor, re-raised with its status and message."""


class Client:
    def __init__(self, timeout: float, *, username: str = "", password: str = "",
                 verify: bool | str = True, cert: tuple[str, str] | str | None = None) -> None:
        self.timeout = timeout
        self._ids = itertools.count(1)
        self._session = requests.Session()
        if username or password:
            self._session.auth = (username, password)
        # Passed with each call: a session's own setting would lose to REQUESTS_CA_BUNDLE.
        self._verify = verify
        self._cert = cert

    @classmethod
    def from_conf(cls, conf: cfg.ConfigOpts) -> Client:
        group = conf.json_rpc
        basic = group.auth_strategy == "http_basic"
        cert = (group.certfile, group.keyfile) if group.certfile and group.keyfile else group.certfile
        return cls(
            group.timeout,
            username=group.http_basic_username if basic else "",
            password=group.http_basic_password if basic else "",
            verify=False if group.insecure else (group.cafile or True),
            cert=cert,
        )

    def call(self, address: str, method: str, **params: Any) -> Any:
        body = {"jsonrpc": "2.0", "method": method, "params": params, "id": next(self._ids)}
        try:
            response = self._session.post(
                address, data=orjson.dumps(body), headers={"Content-Type": "application/json"},
                timeout=(min(CONNECT_TIMEOUT, self.timeout), self.timeout), verify=self._verify, cert=self._cert,
            )
        except requests.RequestException as error:
            message = f"The conductor at {address} could not be reached: {error}"
            if _not_connected(error):
                raise ConductorUnreachable(message) from None
            raise ServiceUnavailable(message) from None
        if response.status_code == 401:
            # An operator's mistake, not the caller's: a 500 that says what to fix.
            raise InternalError(f"The conductor at {address} refused this service's JSON-RPC credentials "
                                "([json_rpc] http_basic_username and http_basic_password).")
        try:
            answer = response.json()
        except ValueError:
            raise InternalError(f"The conductor at {address} answered HTTP {response.status_code}") from None
        error = answer.get("error")
        if error is None:
            return answer.get("result")
        data = error.get("data") or {}
        if "status" in data:
            raised = RemoteError(data.get("message", ""), status=int(data["status"]), **(data.get("extra") or {}))
            raise raised
        raise InternalError(error.get("message", "conductor error"))

    def close(self) -> None:
        self._session.close()
