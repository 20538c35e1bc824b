"""The image a boot asks for: looked up in the Image service and checked against the flavor.

Refusals carry the status and text of upstream Nova's API (its
``servers.py`` create handler over ``compute/api.py``'s ``_get_image`` and
``_validate_flavor_image_nostatus``, with ``nova/exception.py``'s
messages), in Nova's order: the image must exist for the caller, be
``active``, have a ``min_ram`` the flavor's RAM meets, and fit the
flavor's root disk by its ``size`` then its ``min_disk`` (a flavor
with a 0 GB root disk is not checked, as upstream's legacy rule says).
"""

from __future__ import annotations

from typing import Any

from corral.core import errors
from corral.compute import glance
from corral.compute.domain.exceptions import ImageServiceFailed

GiB = 1024 ** 3


def requested_image(client: glance.GlanceClient, credentials: glance.Credentials, image_id: str,
                    not_found: str = "Can not find requested image") -> dict[str, Any]:
    """The caller's view of the image; 400 if it has none, 500 if the Image service fails (as Nova).

    ``not_found`` is the message of the 400 when the caller cannot see it
    (a rebuild says ``Cannot find image for rebuild``).
    """
    try:
        return client.show(image_id, credentials)
    except glance.ImageNotFound:
        raise errors.BadRequest(not_found) from None
    except glance.ImageNotAuthorized:
        raise errors.BadRequest(f"Not authorized for image {image_id}.") from None
    except glance.ImageBadRequest as error:
        raise errors.BadRequest(f"Request of image {image_id} got BadRequest response: {error}") from None
    except glance.GlanceConnectionFailed as error:
        raise ImageServiceFailed("nova.exception.GlanceConnectionFailed", str(error)) from error
    except glance.UnexpectedImageAnswer as error:
        raise ImageServiceFailed(error.exception_class, str(error)) from error


def check_flavor_image(image: dict[str, Any], flavor: dict[str, Any]) -> None:
    """400 when the flavor cannot boot the image (Nova's ``_validate_flavor_image``)."""
    if image.get("status") != "active":
        raise errors.BadRequest(f"Image {image['id']} is not active.")
    if flavor["memory_mb"] < int(image.get("min_ram") or 0):
        raise errors.BadRequest("Flavor's memory is too small for requested image.")
    min_disk = int(image.get("min_disk") or 0) * GiB
    size = int(image.get("size") or 0)
    root = int(flavor["root_gb"]) * GiB
    if root == 0:
        # Upstream's legacy meaning of a 0 GB root disk: the size is not checked.
        return
    if size > root:
        raise errors.BadRequest(
            f"Flavor's disk is too small for requested image. Flavor disk is {root} bytes, image is {size} bytes.")
    if min_disk > root:
        raise errors.BadRequest(
            "Flavor's disk is smaller than the minimum size specified in image metadata. "
            f"Flavor disk is {root} bytes, minimum size is {min_disk} bytes.")
