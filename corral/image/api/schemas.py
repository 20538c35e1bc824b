"""JSON schemas: served at ``/v2/schemas/*`` and used to check request bodies.

The image schema is Glance's: the base attributes, with any additional
property a string (``additionalProperties: {"type": "string"}``), and the
accepted disk and container formats from ``[image_format]``.  Glance
reports a body the schema refuses as ``Provided object does not match
schema 'image': <the validator's whole message>``; so does Corral, with
the same validator on the same schema.
"""

from __future__ import annotations

import copy
from typing import Any

import jsonschema

from corral.image.domain.images import STATUSES, VISIBILITIES, ImageError

UUID_PATTERN = ("^([0-9a-fA-F]){8}-([0-9a-fA-F]){4}-([0-9a-fA-F]){4}-([0-9a-fA-F]){4}-([0-9a-fA-F]){12}$")


def _nullable(kind: str, description: str, **extra: Any) -> dict[str, Any]:
    return {"type": ["null", kind], "description": description, **extra}


def image_properties(disk_formats: list[str], container_formats: list[str]) -> dict[str, Any]:
    read_only = {"readOnly": True}
    return {
        "id": {"type": "string", "description": "The image's identifier", "pattern": UUID_PATTERN},
        "name": _nullable("string", "The image's name", maxLength=255),
        "status": {"type": "string", **read_only, "description": "Where the image is in its life",
                   "enum": list(STATUSES)},
        "visibility": {"type": "string", "description": "Who may see the image", "enum": list(VISIBILITIES)},
        "protected": {"type": "boolean", "description": "A protected image cannot be deleted."},
        "os_hidden": {"type": "boolean", "description": "A hidden image is left out of default lists."},
        "checksum": _nullable("string", "MD5 digest of the image's data", **read_only, maxLength=32),
        "os_hash_algo": _nullable("string", "Algorithm of os_hash_value", **read_only, maxLength=64),
        "os_hash_value": _nullable("string", "Hex digest of the image's data by os_hash_algo", **read_only,
                                   maxLength=128),
        "owner": _nullable("string", "The project owning the image", maxLength=255),
        "size": _nullable("integer", "Bytes of image data", **read_only),
        "virtual_size": _nullable("integer", "Bytes of the disk the image describes", **read_only),
        "container_format": {"type": ["null", "string"], "description": "Format of the container",
                             "enum": [None, *container_formats]},
        "disk_format": {"type": ["null", "string"], "description": "Format of the disk",
                        "enum": [None, *disk_formats]},
        "created_at": {"type": "string", **read_only, "description": "When the image was created"},
        "updated_at": {"type": "string", **read_only, "description": "When the image last changed"},
        "tags": {"type": "array", "description": "Strings describing the image",
                 "items": {"type": "string", "maxLength": 255}},
        "direct_url": {"type": "string", **read_only, "description": "Where the store keeps the data"},
        "min_ram": {"type": "integer", "description": "MiB of memory the image needs to boot"},
        "min_disk": {"type": "integer", "description": "GiB of disk the image needs to boot"},
        "self": {"type": "string", **read_only, "description": "The image's URL"},
        "file": {"type": "string", **read_only, "description": "The URL of the image's data"},
        "stores": {"type": "string", **read_only, "description": "Stores holding the data"},
        "schema": {"type": "string", **read_only, "description": "The URL of this schema"},
        "locations": {
            "type": "array",
            "items": {"type": "object", "properties": {"url": {"type": "string", "maxLength": 255},
                                                       "metadata": {"type": "object"}},
                      "required": ["url", "metadata"]},
            "description": "Where the stores keep the data",
        },
    }


def image_schema(disk_formats: list[str], container_formats: list[str]) -> dict[str, Any]:
    return {
        "name": "image",
        "properties": image_properties(disk_formats, container_formats),
        "additionalProperties": {"type": "string"},
        "links": [{"rel": "self", "href": "{self}"}, {"rel": "enclosure", "href": "{file}"},
                  {"rel": "describedby", "href": "{schema}"}],
    }


def collection_schema(name: str, item: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": name,
        "properties": {
            name: {"type": "array", "items": item},
            "first": {"type": "string"},
            "next": {"type": "string"},
            "schema": {"type": "string"},
        },
        "links": [{"rel": "first", "href": "{first}"}, {"rel": "next", "href": "{next}"},
                  {"rel": "describedby", "href": "{schema}"}],
    }


MEMBER_PROPERTIES = {
    "member_id": {"type": "string", "description": "The member project's identifier"},
    "image_id": {"type": "string", "description": "The image's identifier", "pattern": UUID_PATTERN},
    "created_at": {"type": "string", "description": "When the membership was created"},
    "updated_at": {"type": "string", "description": "When the membership last changed"},
    "status": {"type": "string", "description": "The member's answer", "enum": ["pending", "accepted", "rejected"]},
    "schema": {"readOnly": True, "type": "string"},
}


class Schemas:
    """The documents and the image validator, built once per application."""

    def __init__(self, disk_formats: list[str], container_formats: list[str]) -> None:
        self.image = image_schema(disk_formats, container_formats)
        self.images = collection_schema("images", copy.deepcopy(self.image))
        self.member = {"name": "member", "properties": MEMBER_PROPERTIES}
        members_item = {"name": "member", "properties": MEMBER_PROPERTIES, "additionalProperties": False}
        self.members = {"name": "members", "properties": collection_schema("members", members_item)["properties"]}
        validator_class = jsonschema.validators.validator_for(self.image, default=jsonschema.Draft4Validator)
        self._image_validator = validator_class(self.image)

    def check_image(self, document: dict[str, Any]) -> None:
        error = jsonschema.exceptions.best_match(self._image_validator.iter_errors(document))
        if error is not None:
            raise ImageError(400, f"Provided object does not match schema 'image': {error}")
