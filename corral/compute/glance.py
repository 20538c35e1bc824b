"""Compute's client of the Image service (Glance's Image API v2), as Nova's ``nova.image.glance``.

A boot looks its image up with ``GET /v2/images/{id}`` and the caller's
own credentials (:class:`Credentials`), as Nova forwards the user's token
to Glance, so that the caller's view of images counts: another project's
private image is not found.  Answers are translated as Nova translates
glanceclient's exceptions: 404 is :class:`ImageNotFound`, 401 and 403
:class:`ImageNotAuthorized`, 400 :class:`ImageBadRequest`; an Image
service that cannot be reached, or answers 503, after ``[glance]
num_retries`` retries is :class:`GlanceConnectionFailed`; any other
answer is :class:`UnexpectedImageAnswer`, naming the glanceclient
exception Nova would have let through.

Nothing is cached: each boot asks once (one request per boot, whatever
its ``max_count``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from oslo_config import cfg

from corral.core.service_client import ServiceClient, ServiceUnavailable

# Glance finds images only by their UUID (8-4-4-4-12 hexadecimal digits);
# anything else is a 404 there, so it is not asked.
_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")

# glanceclient's exception for each status (glanceclient.exc._code_map).
_GLANCECLIENT_CLASSES = {
    300: "HTTPMultipleChoices", 400: "HTTPBadRequest", 401: "HTTPUnauthorized", 403: "HTTPForbidden",
    404: "HTTPNotFound", 405: "HTTPMethodNotAllowed", 409: "HTTPConflict", 413: "HTTPOverLimit",
    500: "HTTPInternalServerError", 501: "HTTPNotImplemented", 502: "HTTPBadGateway", 503: "HTTPServiceUnavailable",
}


@dataclass(frozen=True)
class Credentials:
    """What identifies the caller to the Image service: its token, and headers its strategy reads."""

    token: str | None
    headers: dict[str, str] = field(default_factory=dict)


class ImageError(Exception):
    """The Image service refused or failed a lookup."""


class ImageNotFound(ImageError):
    pass


class ImageNotAuthorized(ImageError):
    pass


class ImageBadRequest(ImageError):
    pass


class GlanceConnectionFailed(ImageError):
    pass


class UnexpectedImageAnswer(ImageError):
    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.exception_class = "glanceclient.exc." + _GLANCECLIENT_CLASSES.get(status, "HTTPException")


class GlanceClient:
    def __init__(self, conf: cfg.ConfigOpts) -> None:
        self._client = ServiceClient(conf, "glance", "/image")

    @property
    def endpoint(self) -> str:
        return self._client.endpoint

    def show(self, image_id: str, credentials: Credentials) -> dict[str, Any]:
        """The image as the caller sees it (Glance's image body)."""
        if not _UUID.match(image_id):
            raise ImageNotFound(image_id)
        try:
            response = self._client.call("GET", f"/v2/images/{image_id}", token=credentials.token,
                                         headers=dict(credentials.headers))
        except ServiceUnavailable as error:
            raise GlanceConnectionFailed(
                f"Connection to glance host {self.endpoint} failed: {error}") from error
        status = response.status_code
        if status == 200:
            body = response.json()
            if isinstance(body, dict) and isinstance(body.get("id"), str):
                return body
            raise UnexpectedImageAnswer(status, f"GET /v2/images/{image_id} answered {response.text[:200]!r}")
        detail = response.text[:500]
        if status == 404:
            raise ImageNotFound(image_id)
        if status in (401, 403):
            raise ImageNotAuthorized(image_id)
        if status == 400:
            raise ImageBadRequest(f"HTTP {_explanation(response)}")
        if status == 503:
            # Retried num_retries times already: Nova gives up the same way.
            raise GlanceConnectionFailed(
                f"Connection to glance host {self.endpoint} failed: HTTP {status}: {detail}")
        raise UnexpectedImageAnswer(status, f"GET /v2/images/{image_id} answered {status}: {detail}")

    def create(self, body: dict[str, Any], credentials: Credentials) -> dict[str, Any]:
        """``POST /v2/images`` as the caller: the new (queued) image's record."""
        try:
            response = self._client.call("POST", "/v2/images", token=credentials.token,
                                         headers=dict(credentials.headers), json=body)
        except ServiceUnavailable as error:
            raise GlanceConnectionFailed(f"Connection to glance host {self.endpoint} failed: {error}") from error
        if response.status_code == 201:
            created = response.json()
            if isinstance(created, dict) and isinstance(created.get("id"), str):
                return created
        if response.status_code in (401, 403):
            raise ImageNotAuthorized(str(body.get("name", "")))
        if response.status_code == 400:
            raise ImageBadRequest(f"HTTP {_explanation(response)}")
        raise UnexpectedImageAnswer(response.status_code,
                                    f"POST /v2/images answered {response.status_code}: {response.text[:500]}")

    def delete(self, image_id: str, credentials: Credentials | None = None) -> None:
        """``DELETE /v2/images/{id}``, as the caller or (no credentials) as Compute's service user."""
        try:
            response = self._client.call(
                "DELETE", f"/v2/images/{image_id}", token=credentials.token if credentials else None,
                headers=dict(credentials.headers) if credentials else {},
            )
        except ServiceUnavailable as error:
            raise GlanceConnectionFailed(f"Connection to glance host {self.endpoint} failed: {error}") from error
        if response.status_code == 404:
            raise ImageNotFound(image_id)
        if response.status_code != 204:
            raise UnexpectedImageAnswer(response.status_code,
                                        f"DELETE /v2/images/{image_id} answered {response.status_code}")

    def image_url(self, image_id: str) -> str:
        """Where the image is, as upstream's generate_image_url puts it."""
        return f"{self.endpoint.rstrip('/')}/images/{image_id}"


def _explanation(response: Any) -> str:
    """The message of a Glance error body (JSON, or WebOb's plain text)."""
    try:
        body = response.json()
    except ValueError:
        lines = [line.strip() for line in response.text.splitlines() if line.strip()]
        return lines[1] if len(lines) > 1 else response.text.strip()
    message = body.get("message", "") if isinstance(body, dict) else ""
    return str(message).split("<br />")[0].strip()

