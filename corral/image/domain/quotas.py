"""Per-project limits, with the names of Glance's unified limits (no HTTP, no SQL).

``[image_limits]`` gives every project the same limits: ``image_count_total``
(images of any status), ``image_size_total`` (MiB stored),
``image_stage_total`` (MiB staged for import) and ``image_count_uploading``
(images being uploaded or imported at once); -1 means unlimited.  A
refusal reads as Glance's (413, with oslo.limit's description of the
limit).  ``[DEFAULT] user_storage_quota`` (bytes stored per project) is
Glance's older quota and applies too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from corral.image.domain.images import ImageError, parse_size

MIB = 1024 * 1024
LIMITS = ("image_size_total", "image_stage_total", "image_count_total", "image_count_uploading")


def _over(project: str, name: str, limit: int, usage: int, delta: int) -> ImageError:
    body = (f"Project {project} is over a limit for [Resource {name} is over limit of {limit} due to current "
            f"usage {usage} and delta {delta}]")
    return ImageError(413, "The request returned a 413 Request Entity Too Large. This generally means that rate "
                           f"limiting or a quota threshold was breached.\n\nThe response body:\n{body}")


def _check(conf: Any, project: str, name: str, usage: int, delta: int) -> None:
    limit = getattr(conf.image_limits, name)
    if limit >= 0 and usage + delta > limit:
        raise _over(project, name, limit, usage, delta)


def check_count(conf: Any, project: str, usage: Mapping[str, int]) -> None:
    """Before creating an image."""
    _check(conf, project, "image_count_total", usage["image_count_total"], 1)


def check_upload(conf: Any, project: str, usage: Mapping[str, int], size: int | None) -> None:
    """Before an upload or import starts (``size`` when the client declared it)."""
    check_size(conf, project, usage, size)
    _check(conf, project, "image_count_uploading", usage["image_count_uploading"], 1)


def check_size(conf: Any, project: str, usage: Mapping[str, int], size: int | None) -> None:
    """Before data of ``size`` bytes is stored (the import of staged data)."""
    _check(conf, project, "image_size_total", usage["image_size_total"] // MIB, (size or 0) // MIB)


def check_stage(conf: Any, project: str, usage: Mapping[str, int], size: int | None) -> None:
    """Before data is staged for a glance-direct import."""
    _check(conf, project, "image_stage_total", usage["image_stage_total"] // MIB, (size or 0) // MIB)
    _check(conf, project, "image_count_uploading", usage["image_count_uploading"], 1)


def reported_usage(usage: Mapping[str, int]) -> dict[str, int]:
    """Usage in each limit's unit (sizes in MiB)."""
    return {name: usage[name] // MIB if name.endswith(("size_total", "stage_total")) else usage[name]
            for name in LIMITS}


def storage_room(conf: Any, usage: Mapping[str, int]) -> int | None:
    """Bytes a project may still store under ``user_storage_quota`` (None: unlimited)."""
    quota = parse_size(conf.user_storage_quota)
    if quota == 0:
        return None
    return max(0, quota - usage["image_size_total"])


def storage_full(size: int, remaining: int) -> ImageError:
    return ImageError(413, f"Image exceeds the storage quota: The size of the data {size} will exceed the limit. "
                           f"{remaining} bytes remaining.")
