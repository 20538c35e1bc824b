"""Images from the Image service (Glance's Image API v2), as upstream Ironic takes them from Glance.

An ``instance_info`` image reference (``image_source``, ``boot_iso``,
``kernel``, ``ramdisk``) that is a UUID or ``glance://<uuid>`` names an
image of the Image service.  The conductor reads it with its service
credentials (``[glance]``: ``endpoint_override``, else this Corral's own
``/image`` on ``local_port``) and uses it only when it is ``active`` and
the node's owner may use it: a public or community image, one the owner
owns, or a shared image of which the owner is an accepted member (``GET
/v2/images/{id}/members/{owner}``).  A node without an owner may use any
active image.  Anything else is refused with the same words as an image
that does not exist, so that the refusal tells the node's owner nothing
about other projects' images.

The image's data (``GET /v2/images/{id}/file``) is streamed into the
conductor's image cache and verified there against the image's
``os_hash_algo`` / ``os_hash_value`` (or, lacking those, its MD5
``checksum``); see :meth:`corral.baremetal.drivers.images.ImageCache.fetch_image`.
"""

from __future__ import annotations

import contextlib
import threading
import urllib.parse
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

import requests
from oslo_config import cfg

from corral.baremetal.drivers.base import DriverError, InvalidParameterValue
from corral.baremetal.drivers.images import CHUNK, Checksum, ImageCache, ImageDownloadFailed, expected_checksum
from corral.core.service_client import ServiceClient, ServiceUnavailable

SCHEME = "glance://"
# Keys of Glance's image document that are not additional properties.
BASE_KEYS = frozenset((
    "id", "name", "status", "visibility", "protected", "os_hidden", "owner", "checksum", "os_hash_algo",
    "os_hash_value", "size", "virtual_size", "min_disk", "min_ram", "disk_format", "container_format", "tags",
    "created_at", "updated_at", "self", "file", "schema", "locations", "direct_url", "stores",
))


class ImageServiceError(DriverError):
    """The Image service could not be asked, or answered something unexpected."""


def is_glance_image(href: Any) -> bool:
    """Whether ``href`` names an image of the Image service (a UUID, or ``glance://...``), as upstream decides."""
    if not isinstance(href, str):
        return False
    return href.startswith(SCHEME) or _uuid(href) is not None


def _uuid(text: str) -> str | None:
    try:
        return str(uuid.UUID(text))
    except ValueError:
        return None


def parse_image_id(href: str, field: str) -> str:
    """The image id of a UUID or ``glance://[<host>/]<uuid>`` reference (InvalidParameterValue otherwise)."""
    image_id = _uuid(href) if not href.startswith(SCHEME) else _uuid(href.rstrip("/").rsplit("/", 1)[-1])
    if image_id is None:
        raise InvalidParameterValue(
            f"instance_info/{field} {href!r} is not a valid image reference: use an image UUID or glance://<uuid>")
    return image_id


class ImageService:
    """The calls Bare Metal makes to the Image service, with Corral's service credentials."""

    def __init__(self, conf: cfg.ConfigOpts) -> None:
        self._client = ServiceClient(conf, "glance", "/image")
        self.endpoint = self._client.endpoint

    def _call(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        try:
            return self._client.call(method, path, **kwargs)
        except ServiceUnavailable as error:
            raise ImageServiceError(f"Failed to connect to the Image service: {error}") from None

    def _unexpected(self, response: requests.Response, what: str) -> ImageServiceError:
        return ImageServiceError(f"The Image service at {self.endpoint} answered HTTP {response.status_code} "
                                 f"to {what}: {response.text[:300]}")

    def show(self, image_id: str) -> dict[str, Any] | None:
        """The image's document (``GET /v2/images/{id}``), or None when there is no such image."""
        response = self._call("GET", f"/v2/images/{image_id}")
        if response.status_code == 404:
            return None
        if response.status_code != 200:
            raise self._unexpected(response, f"GET /v2/images/{image_id}")
        image = response.json()
        if not isinstance(image, dict) or image.get("id") != image_id:
            raise ImageServiceError(f"The Image service at {self.endpoint} did not answer with image {image_id}")
        return image

    def member_status(self, image_id: str, project: str) -> str | None:
        """``project``'s membership of a shared image (pending, accepted, rejected), None when not a member."""
        path = f"/v2/images/{image_id}/members/{urllib.parse.quote(project, safe='')}"
        response = self._call("GET", path)
        if response.status_code == 404:
            return None
        if response.status_code != 200:
            raise self._unexpected(response, f"GET {path}")
        status = response.json().get("status")
        return str(status) if status is not None else None

    @contextlib.contextmanager
    def data(self, image_id: str) -> Iterator[Iterator[bytes]]:
        """The image's data as it streams in (``GET /v2/images/{id}/file``)."""
        response = self._call("GET", f"/v2/images/{image_id}/file", stream=True)
        with response:
            if response.status_code == 204:
                raise ImageDownloadFailed(f"Image {image_id} has no data in the Image service")
            if response.status_code != 200:
                raise ImageDownloadFailed(f"Failed to download image {image_id} from the Image service: HTTP "
                                          f"{response.status_code} {response.reason}")

            def chunks() -> Iterator[bytes]:
                try:
                    yield from response.iter_content(CHUNK)
                except requests.RequestException as error:
                    raise ImageDownloadFailed(f"Failed to download image {image_id} from the Image service: "
                                              f"{error}") from None

            yield chunks()


_SERVICES: dict[tuple[int, str | None, int], tuple[cfg.ConfigOpts, ImageService]] = {}
_SERVICES_LOCK = threading.Lock()


def image_service(conf: cfg.ConfigOpts) -> ImageService:
    """The configuration's client (one per configuration and endpoint: its sessions and token are reused)."""
    group = conf.glance
    key = (id(conf), group.endpoint_override, group.local_port)
    with _SERVICES_LOCK:
        known = _SERVICES.get(key)
        if known is None or known[0] is not conf:
            known = (conf, ImageService(conf))
            _SERVICES[key] = known
        return known[1]


def not_found(image_id: str, owner: str | None) -> InvalidParameterValue:
    if owner:
        return InvalidParameterValue(f"Image {image_id} could not be found, or the node's owner (project {owner}) "
                                     "may not use it.")
    return InvalidParameterValue(f"Image {image_id} could not be found.")


def usable_image(conf: cfg.ConfigOpts, href: str, field: str, owner: str | None) -> dict[str, Any]:
    """The active image ``href`` names, if the node's ``owner`` may use it (InvalidParameterValue otherwise)."""
    image_id = parse_image_id(href, field)
    service = image_service(conf)
    image = service.show(image_id)
    if image is None or not _visible(service, image, owner):
        raise not_found(image_id, owner)
    if image.get("status") != "active":
        raise InvalidParameterValue(f"Image {image_id} is unacceptable: the image is required to be in an active "
                                    f"state, and it is {image.get('status')}.")
    return image


def _visible(service: ImageService, image: Mapping[str, Any], owner: str | None) -> bool:
    """Whether the node's owner may use the image, as Glance would let that project see it."""
    if not owner:
        return True
    if image.get("visibility") in ("public", "community") or image.get("owner") == owner:
        return True
    if image.get("visibility") == "shared":
        return service.member_status(image["id"], owner) == "accepted"
    return False


def instance_info_fields(image: Mapping[str, Any]) -> dict[str, Any]:
    """What upstream records in instance_info about a Glance image."""
    return {
        "image_checksum": image.get("checksum"),
        "image_os_hash_algo": image.get("os_hash_algo"),
        "image_os_hash_value": image.get("os_hash_value"),
        "image_disk_format": image.get("disk_format"),
        "image_container_format": image.get("container_format"),
        "image_tags": list(image.get("tags") or []),
        "image_properties": {key: value for key, value in image.items() if key not in BASE_KEYS},
    }


def image_checksum(image: Mapping[str, Any]) -> Checksum:
    """What the image's data must hash to: its os_hash_algo/os_hash_value, else its MD5 checksum."""
    checksum = expected_checksum(instance_info_fields(image), f"{SCHEME}{image['id']}")
    if checksum is None:
        raise InvalidParameterValue(f"Image {image['id']} has neither os_hash_value nor checksum: it cannot be "
                                    "verified")
    return checksum


def fetch(conf: cfg.ConfigOpts, cache: ImageCache, image: Mapping[str, Any],
          checksum: Checksum | None = None) -> str:
    """The path of the image's verified copy in ``cache`` (downloaded from the Image service unless cached)."""
    service = image_service(conf)
    return cache.fetch_image(image["id"], checksum or image_checksum(image), lambda: service.data(image["id"]))
