"""Images and members as Glance renders them (keys in Glance's order).

Links are paths relative to the service's root (``/v2/images/<id>``), as
Glance sends them, so they hold behind any prefix the client's endpoint
has.
"""

from __future__ import annotations

import datetime
import urllib.parse
from collections.abc import Iterable
from typing import Any

from corral.image.domain.images import shown_properties

# Glance's order: additional properties first, then these.
_ATTRIBUTES = ("name", "disk_format", "container_format", "visibility", "size", "virtual_size", "status", "checksum",
               "protected", "min_ram", "min_disk", "owner", "os_hidden", "os_hash_algo", "os_hash_value")


def isotime(moment: datetime.datetime | None) -> str | None:
    """``YYYY-MM-DDTHH:MM:SSZ``, as Glance writes times."""
    return None if moment is None else moment.isoformat(timespec="seconds") + "Z"


def image(row: dict[str, Any], *, direct_url: bool = False) -> dict[str, Any]:
    view: dict[str, Any] = dict(shown_properties(row["properties"]))
    for key in _ATTRIBUTES:
        view[key] = row[key]
    view["id"] = row["id"]
    view["created_at"] = isotime(row["created_at"])
    view["updated_at"] = isotime(row["updated_at"])
    if direct_url and row.get("location"):
        view["direct_url"] = row["location"]
    view["tags"] = list(row["tags"])
    view["self"] = f"/v2/images/{row['id']}"
    view["file"] = f"/v2/images/{row['id']}/file"
    view["schema"] = "/v2/schemas/image"
    return view


def image_list(rows: list[dict[str, Any]], params: Iterable[tuple[str, str]], limit: int, *,
               direct_url: bool = False) -> dict[str, Any]:
    """The list answer: ``first`` repeats the query without its marker; ``next`` when the page is full."""
    kept = [(name, value) for name, value in params if name != "marker"]
    query = urllib.parse.urlencode(kept)
    body: dict[str, Any] = {
        "images": [image(row, direct_url=direct_url) for row in rows],
        "first": "/v2/images" + (f"?{query}" if query else ""),
        "schema": "/v2/schemas/images",
    }
    if rows and len(rows) == limit:
        body["next"] = "/v2/images?" + urllib.parse.urlencode([*kept, ("marker", rows[-1]["id"])])
    return body


def member(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "member_id": row["member"],
        "image_id": row["image_id"],
        "status": row["status"],
        "created_at": isotime(row["created_at"]),
        "updated_at": isotime(row["updated_at"]),
        "schema": "/v2/schemas/member",
    }
