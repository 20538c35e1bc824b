"""Failures of the domain that the API renders as upstream does."""

from __future__ import annotations

from corral.core import errors

UNEXPECTED_MESSAGE = "Unexpected API Error. Please contact the administrator\n<class '{name}'>"


class CellDown(errors.InternalError):
    """A cell could not be reached and the request cannot do without it.

    Rendered as upstream renders its NovaException in that case: a 500
    computeFault naming the exception class; the detail goes to the log.
    """

    def __init__(self, detail: str) -> None:
        super().__init__(UNEXPECTED_MESSAGE.format(name="nova.exception.NovaException"))
        self.detail = detail

    def __str__(self) -> str:
        # What the log shows; the response body keeps upstream's message.
        return self.detail


class CellDatabaseError(errors.InternalError):
    """A query that goes straight to a cell's database failed (no scatter-gather)."""

    def __init__(self, detail: str) -> None:
        super().__init__(UNEXPECTED_MESSAGE.format(name="oslo_db.exception.DBError"))
        self.detail = detail

    def __str__(self) -> str:
        return self.detail


class ImageServiceFailed(errors.InternalError):
    """The Image service could not be reached, or answered a boot's image lookup as nobody expects.

    Nova lets these through its API as a 500 computeFault naming the
    exception (``nova.exception.GlanceConnectionFailed`` after its retries,
    or glanceclient's for an unexpected status); the detail goes to the log.
    """

    def __init__(self, exception_class: str, detail: str) -> None:
        super().__init__(UNEXPECTED_MESSAGE.format(name=exception_class))
        self.detail = detail

    def __str__(self) -> str:
        return self.detail
