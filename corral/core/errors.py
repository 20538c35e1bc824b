"""API errors shared by every service.

Handlers and domain code raise :class:`ApiError` (or one of its status
subclasses); each service's error formatter turns it into that service's own
error body (Placement's ``errors`` list, Ironic's ``error_message``, Nova's
``itemNotFound``...).  ``code`` carries a service-specific error code
constant, ``extra`` any additional members the service's body needs.
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Any


class ApiError(Exception):
    status = 500

    def __init__(
        self,
        message: str = "",
        *,
        code: str | None = None,
        status: int | None = None,
        headers: dict[str, str] | None = None,
        **extra: Any,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        if status is not None:
            self.status = status
        self.headers = headers or {}
        self.extra = extra

    @property
    def title(self) -> str:
        try:
            return HTTPStatus(self.status).phrase
        except ValueError:
            return "Error"

    def __str__(self) -> str:
        return self.message


class BadRequest(ApiError):
    status = 400


class Unauthorized(ApiError):
    status = 401


class Forbidden(ApiError):
    status = 403


class NotFound(ApiError):
    status = 404


class MethodNotAllowed(ApiError):
    status = 405


class NotAcceptable(ApiError):
    status = 406


class Conflict(ApiError):
    status = 409


class PayloadTooLarge(ApiError):
    status = 413


class UnsupportedMediaType(ApiError):
    status = 415


class InternalError(ApiError):
    status = 500


class ServiceUnavailable(ApiError):
    status = 503


class DatabaseUnavailable(ServiceUnavailable):
    """A database could not be reached, did not answer in time, or had no free connection.

    The database's own log line (a WARNING naming it, once every few
    seconds) is written where it failed; nothing more is logged for it.
    """

    RETRY_AFTER = "5"

    def __init__(self, message: str = "The database is not available; try again later.", **kwargs: Any) -> None:
        kwargs.setdefault("headers", {"Retry-After": self.RETRY_AFTER})
        super().__init__(message, **kwargs)


class VersionNotAcceptable(NotAcceptable):
    """The requested microversion is outside the service's range or malformed.

    ``malformed`` tells formatters that the header could not be parsed at all
    (some services answer that case without version headers).
    """

    def __init__(self, message: str, *, requested: str | None, malformed: bool = False, **kw: Any):
        super().__init__(message, **kw)
        self.requested = requested
        self.malformed = malformed
