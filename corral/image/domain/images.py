"""Images: attributes, what a request may set, the status machine (no HTTP, no SQL).

An image is a plain dict of Glance's base attributes (``id``, ``name``,
``status``, ``visibility``...) plus ``properties`` (additional string
properties) and ``tags`` (a list, in the order they were added).  Errors
are raised as :class:`ImageError` with the HTTP status Glance answers and
its message.
"""

from __future__ import annotations

import datetime
import functools
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from corral.core import statemachine

STATUSES = ("queued", "saving", "active", "killed", "deleted", "uploading", "importing", "pending_delete",
            "deactivated")
VISIBILITIES = ("community", "public", "private", "shared")
MEMBER_STATUSES = ("pending", "accepted", "rejected")

# Attributes a client sets at creation (``id`` as ``image_id`` upstream).
BASE_ATTRIBUTES = ("checksum", "created_at", "container_format", "disk_format", "id", "min_disk", "min_ram",
                   "name", "size", "virtual_size", "status", "tags", "owner", "updated_at", "visibility",
                   "protected", "os_hidden")
# Never accepted in a request body (403 "Attribute ... is read-only.").
DISALLOWED = ("direct_url", "self", "file", "schema", "stores")
READ_ONLY = ("created_at", "updated_at", "status", "checksum", "size", "virtual_size", "direct_url", "self", "file",
             "schema", "id", "os_hash_algo", "os_hash_value")
RESERVED = ("location", "deleted", "deleted_at")
# Properties in this namespace are Glance's own (import progress, staging).
RESERVED_NAMESPACE = "os_glance"
# Properties Glance keeps but never shows.
HIDDEN_PROPERTIES = ("os_glance_stage_host", "os_glance_hash_op_host")
SORT_KEYS = ("name", "status", "container_format", "disk_format", "size", "id", "created_at", "updated_at")
# Base attributes a PATCH may change (the others are read-only or reserved).
MUTABLE = ("name", "visibility", "protected", "os_hidden", "owner", "min_disk", "min_ram", "disk_format",
           "container_format", "tags")

_UUID = re.compile(r"^([0-9a-fA-F]){8}-([0-9a-fA-F]){4}-([0-9a-fA-F]){4}-([0-9a-fA-F]){4}-([0-9a-fA-F]){12}$")

# Glance's image status machine: for each status, where it may go next.
# ``saving`` and ``importing`` go back to ``queued`` when an upload or an
# import fails, so that it can be tried again.
NEXT_STATUSES = {
    "queued": ("saving", "uploading", "importing", "active", "deleted"),
    "saving": ("active", "killed", "deleted", "queued"),
    "uploading": ("importing", "queued", "deleted"),
    "importing": ("active", "deleted", "queued"),
    "active": ("pending_delete", "deleted", "deactivated"),
    "killed": ("deleted",),
    "pending_delete": ("deleted", "active"),
    "deleted": (),
    "deactivated": ("active", "deleted"),
}


@functools.cache
def _status_machine() -> Any:
    # Each target status is also the event that leads there.
    return statemachine.build({(source, target): target for source, targets in NEXT_STATUSES.items()
                               for target in targets})


class ImageError(Exception):
    """A refusal: ``status`` is the HTTP status Glance answers with ``message``."""

    def __init__(self, status: int, message: str, headers: Mapping[str, str] | None = None, *,
                 as_detail: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = dict(headers or {})
        # Glance passes some messages as WebOb's "detail" rather than its
        # "explanation", which changes where they appear in the body.
        self.as_detail = as_detail or status == 415


def now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC).replace(tzinfo=None)


def is_uuid(text: str) -> bool:
    return bool(_UUID.match(text))


@dataclass
class NewImage:
    """What a create request asks for, split as Glance splits it."""

    base: dict[str, Any]
    properties: dict[str, str]
    tags: list[str] = field(default_factory=list)


def split_create_body(body: dict[str, Any]) -> NewImage:
    """Base attributes, additional properties and tags of a (schema-valid) create body."""
    for key in DISALLOWED:
        if key in body:
            raise ImageError(403, f"Attribute '{key}' is read-only.")
    properties = dict(body)
    tags = properties.pop("tags", [])
    base = {key: properties.pop(key) for key in BASE_ATTRIBUTES if key in properties}
    for key in properties:
        check_property_name(key)
        if key in RESERVED or key.startswith(RESERVED_NAMESPACE):
            # (Glance words these with a generic line first.)
            raise ImageError(403, f"Attribute '{key}' is reserved.", as_detail=True)
    readonly = [key for key in base if key in READ_ONLY and key != "id"]
    if readonly:
        raise ImageError(403, f"Attribute '{readonly[0]}' is read-only.")
    if "locations" in properties:
        raise ImageError(403, "Attribute 'locations' is reserved.")
    check_sizes(base)
    return NewImage(base, properties, list(dict.fromkeys(tags)))


def check_property_name(name: str) -> None:
    if len(name) > 255:
        raise ImageError(400, "Custom property should not be greater than 255 characters.")


# Largest min_disk / min_ram: the columns are 32-bit integers.
MAX_INT = 2147483647


def check_sizes(values: Mapping[str, Any]) -> None:
    """``min_disk`` and ``min_ram`` are neither negative nor beyond 32 bits (400, as Glance words it)."""
    for name in ("min_disk", "min_ram"):
        value = values.get(name)
        if isinstance(value, int) and value < 0:
            raise ImageError(400, f"Invalid value '{value}' for parameter '{name}': Cannot be a negative value")
        if isinstance(value, int) and value > MAX_INT:
            raise ImageError(400, f"'{name}' value out of range, must not exceed {MAX_INT}.")


def new_image(request: NewImage, owner: str | None) -> dict[str, Any]:
    """The row of a newly created image (status ``queued``)."""
    base = request.base
    moment = now()
    return {
        "id": base.get("id") or str(uuid.uuid4()),
        "name": base.get("name"),
        "status": "queued",
        "visibility": base.get("visibility", "shared"),
        "protected": bool(base.get("protected", False)),
        "os_hidden": bool(base.get("os_hidden", False)),
        "owner": base.get("owner", owner),
        "checksum": None,
        "os_hash_algo": None,
        "os_hash_value": None,
        "size": None,
        "virtual_size": None,
        "min_disk": base.get("min_disk", 0),
        "min_ram": base.get("min_ram", 0),
        "disk_format": base.get("disk_format"),
        "container_format": base.get("container_format"),
        "created_at": moment,
        "updated_at": moment,
    }


def check_transition(image: Mapping[str, Any], target: str) -> None:
    """Refuse (409) a status change Glance does not allow."""
    if statemachine.step(_status_machine(), image["status"], target) is None:
        raise ImageError(409, f"Image status transition from {image['status']} to {target} is not allowed")


def over_quota(what: str, attempted: int, maximum: int) -> str:
    return (f"The limit has been exceeded on the number of allowed {what}. Attempted: {attempted}, "
            f"Maximum: {maximum}")


def check_limits(image: Mapping[str, Any], conf: Any) -> None:
    """Per-image quotas on properties and tags (413, as Glance answers them)."""
    quota = conf.image_property_quota
    if quota >= 0 and len(image["properties"]) > quota:
        raise ImageError(413, over_quota("image properties", len(image["properties"]), quota))
    quota = conf.image_tag_quota
    if quota >= 0 and len(image["tags"]) > quota:
        raise ImageError(413, over_quota("image tags", len(image["tags"]), quota))


def shown_properties(properties: Mapping[str, str]) -> dict[str, str]:
    return {key: value for key, value in properties.items() if key not in HIDDEN_PROPERTIES}


def parse_size(text: str) -> int:
    """``user_storage_quota``: bytes, or a number with B, KB, MB, GB or TB (1024-based)."""
    match = re.fullmatch(r"\s*(\d+)\s*([KMGT]?B)?\s*", text or "0", re.IGNORECASE)
    if match is None:
        raise ValueError(f"invalid size {text!r}: use a number of bytes or a number with B, KB, MB, GB or TB")
    units = {"": 1, "B": 1, "KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30, "TB": 1 << 40}
    return int(match.group(1)) * units[(match.group(2) or "").upper()]
