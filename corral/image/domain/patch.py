"""Image updates: Glance's JSON-patch dialects, parsed and applied (no HTTP, no SQL).

``application/openstack-images-v2.1-json-patch`` is RFC 6902's form
(``{"op": "replace", "path": "/name", "value": ...}``);
``application/openstack-images-v2.0-json-patch`` is the older draft-4
form (``{"replace": "/name", "value": ...}``).  Only ``add``, ``remove``
and ``replace`` exist, and only on a top-level attribute or property.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from corral.image.domain.images import (
    READ_ONLY,
    RESERVED,
    RESERVED_NAMESPACE,
    ImageError,
    check_property_name,
    check_sizes,
)

CONTENT_TYPES = {
    "application/openstack-images-v2.0-json-patch": 4,
    "application/openstack-images-v2.1-json-patch": 10,
}
OPERATIONS = ("add", "remove", "replace")
# Attributes an image always has: they can be replaced, never removed.
ATTRIBUTES = ("name", "visibility", "protected", "os_hidden", "owner", "min_disk", "min_ram", "disk_format",
              "container_format", "tags", "status", "checksum", "size", "virtual_size", "id", "created_at",
              "updated_at", "os_hash_algo", "os_hash_value")


@dataclass(frozen=True)
class Change:
    op: str
    name: str
    value: Any = None


def content_type_error() -> ImageError:
    allowed = ", ".join(sorted(CONTENT_TYPES))
    return ImageError(415, f"Image PATCH expects Content-Type one of: {allowed}", {"Accept-Patch": allowed})


def parse(body: Any, draft: int, validate_value: Callable[[dict[str, Any]], None]) -> list[Change]:
    """The changes of a PATCH body; ``validate_value`` checks ``{name: value}`` against the image schema."""
    if not isinstance(body, list):
        raise ImageError(400, "Request body must be a JSON array of operation objects.")
    changes = []
    for raw in body:
        if not isinstance(raw, dict):
            raise ImageError(400, "Operations must be JSON objects.")
        op, pointer = _operation_d10(raw) if draft == 10 else _operation_d4(raw)
        path = _decode_pointer(pointer)
        if len(path) != 1:
            raise ImageError(400, f"Invalid JSON pointer for this resource: '/{'/'.join(path)}'")
        name = path[0]
        if name == "locations":
            raise _locations(op, raw.get("value"))
        value = None
        if op != "remove":
            if "value" not in raw:
                raise ImageError(400, f'Operation "{op}" requires a member named "value".')
            value = raw["value"]
        _check_name(name)
        if op != "remove":
            validate_value({name: value})
            check_property_name(name)
            check_sizes({name: value})
        changes.append(Change(op, name, value))
    return changes


def _operation_d10(raw: dict[str, Any]) -> tuple[str, Any]:
    op = raw.get("op")
    available = ", ".join(OPERATIONS)
    if op is None:
        raise ImageError(400, f"Unable to find `op` in JSON Schema change. It must be one of the following: "
                              f"{available}.")
    if op not in OPERATIONS:
        raise ImageError(400, f"Invalid operation: `{op}`. It must be one of the following: {available}.")
    if "path" not in raw:
        raise ImageError(400, "Unable to find 'path' in JSON Schema change")
    return op, raw["path"]


def _operation_d4(raw: dict[str, Any]) -> tuple[str, Any]:
    found = [key for key in OPERATIONS if key in raw]
    if len(found) > 1:
        raise ImageError(400, 'Operation objects must contain only one member named "add", "remove", or "replace".')
    if not found:
        raise ImageError(400, 'Operation objects must contain exactly one member named "add", "remove", or '
                              '"replace".')
    return found[0], raw[found[0]]


def _decode_pointer(pointer: Any) -> list[str]:
    if not isinstance(pointer, str):
        raise ImageError(400, f"Pointer `{pointer}` does not start with \"/\".")
    if not pointer.startswith("/"):
        raise ImageError(400, f'Pointer `{pointer}` does not start with "/".')
    if re.search(r"/\s*?/", pointer[1:]):
        raise ImageError(400, f'Pointer `{pointer}` contains adjacent "/".')
    if len(pointer) > 1 and pointer.endswith("/"):
        raise ImageError(400, f'Pointer `{pointer}` end with "/".')
    if pointer[1:].strip() == "/":
        raise ImageError(400, f"Pointer `{pointer}` does not contains valid token.")
    if re.search("~[^01]", pointer) or pointer.endswith("~"):
        raise ImageError(400, f'Pointer `{pointer}` contains "~" not part of a recognized escape sequence.')
    return [part.replace("~1", "/").replace("~0", "~").strip() for part in pointer.lstrip("/").split("/")]


def _locations(op: str, value: Any) -> ImageError:
    # Locations are never shown (show_multiple_locations is not offered),
    # so they cannot be changed either.
    if op == "replace" and value == []:
        return ImageError(403, "Cannot set locations to empty list.", as_detail=True)
    return ImageError(403, "It's not allowed to add locations if locations are invisible.", as_detail=True)


def _check_name(name: str) -> None:
    if name in READ_ONLY:
        raise ImageError(403, f"Attribute '{name}' is read-only.")
    if name in RESERVED or name.startswith(RESERVED_NAMESPACE):
        raise ImageError(403, f"Attribute '{name}' is reserved.")


@dataclass(frozen=True)
class Caller:
    """What applying changes needs to know of the caller."""

    is_admin: bool
    # Raises ImageError (403) when the caller may not give the image this visibility.
    check_visibility: Callable[[str], None]


def apply(image: dict[str, Any], changes: list[Change], caller: Caller, draft: int) -> dict[str, Any]:
    """A copy of ``image`` with ``changes`` applied, in order (the first refusal wins)."""
    result = dict(image, properties=dict(image["properties"]), tags=list(image["tags"]))
    for change in changes:
        if change.name == "visibility" and change.op != "remove":
            caller.check_visibility(change.value)
        if change.op == "replace":
            _replace(result, change, caller)
        elif change.op == "add":
            _add(result, change, caller, draft)
        else:
            _remove(result, change)
    return result


def _set(image: dict[str, Any], name: str, value: Any) -> None:
    if name == "tags":
        image["tags"] = list(dict.fromkeys(value))
    elif name in ATTRIBUTES:
        image[name] = value
    else:
        image["properties"][name] = value


def _check_settable(image: dict[str, Any], change: Change, caller: Caller) -> None:
    if change.name == "owner" and not caller.is_admin:
        raise ImageError(403, "Owner can't be updated by non admin.", as_detail=True)
    if change.name in ("disk_format", "container_format") and image["status"] not in ("queued", "importing"):
        raise ImageError(403, f"Attribute {change.name} can be only replaced for a queued image.")


def _replace(image: dict[str, Any], change: Change, caller: Caller) -> None:
    _check_settable(image, change, caller)
    if change.name not in ATTRIBUTES and change.name not in image["properties"]:
        raise ImageError(409, f"Property {change.name} does not exist.", as_detail=True)
    _set(image, change.name, change.value)


def _add(image: dict[str, Any], change: Change, caller: Caller, draft: int) -> None:
    if draft == 4 and (change.name in ATTRIBUTES or change.name in image["properties"]):
        raise ImageError(409, f"Property {change.name} already present.", as_detail=True)
    # Adding an attribute the image has is replacing it.
    _check_settable(image, change, caller)
    _set(image, change.name, change.value)


def _remove(image: dict[str, Any], change: Change) -> None:
    if change.name in ATTRIBUTES:
        raise ImageError(403, f"Property {change.name} may not be removed.", as_detail=True)
    if change.name not in image["properties"]:
        raise ImageError(409, f"Property {change.name} does not exist.", as_detail=True)
    del image["properties"][change.name]
