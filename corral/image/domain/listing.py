"""``GET /v2/images``: what a query string asks for, and who sees what (no HTTP, no SQL).

:func:`parse_query` turns the query parameters into a :class:`ListQuery`
with Glance's rules and error messages; :class:`Viewer` and
:func:`can_see` say which images a caller may see at all.  The database
layer turns both into one query.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from corral.image.domain.images import SORT_KEYS, VISIBILITIES, ImageError

# Filters on a base attribute that take an operator (``in:a,b`` or ``eq:a``).
OPERATOR_FILTERS = ("name", "id", "status", "container_format", "disk_format")
TIME_FILTERS = ("created_at", "updated_at")
TIME_OPERATORS = ("gt", "gte", "lt", "lte", "neq", "eq")
# ``<attribute>_min`` / ``_max`` ranges Glance supports on its numeric columns.
RANGE_ATTRIBUTES = ("size", "virtual_size", "min_disk", "min_ram")
# Filters compared as they are against a base attribute.
EXACT_FILTERS = ("owner", "checksum", "os_hash_value", "os_hash_algo", "protected", "os_hidden", "min_disk",
                 "min_ram", "size", "virtual_size")
_CONTROL = ("limit", "marker", "member_status", "tag", "sort", "sort_key", "sort_dir", "visibility")


@dataclass(frozen=True)
class Viewer:
    project_id: str | None
    is_admin: bool


def can_see(image: Mapping[str, Any], viewer: Viewer, membership: str | None) -> bool:
    """Whether ``viewer`` may see ``image`` (``membership``: the viewer's member status, if any)."""
    if viewer.is_admin or image["owner"] is None or image["visibility"] in ("public", "community"):
        return True
    if viewer.project_id is None:
        return False
    if image["owner"] == viewer.project_id:
        return True
    return image["visibility"] == "shared" and membership is not None


@dataclass
class ListQuery:
    limit: int
    marker: str | None = None
    # (attribute, "asc" | "desc"), ending with created_at and id.
    sort: list[tuple[str, str]] = field(default_factory=list)
    member_status: str = "accepted"
    visibility: str | None = None
    exact: dict[str, Any] = field(default_factory=dict)
    # attribute -> values (``in:``), or a one-element list for equality.
    one_of: dict[str, list[str]] = field(default_factory=dict)
    # (attribute, operator, value), operator one of TIME_OPERATORS.
    compare: list[tuple[str, str, Any]] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    properties: dict[str, str] = field(default_factory=dict)


def parse_query(params: Mapping[str, Sequence[str]], default_limit: int, max_limit: int) -> ListQuery:
    """``params``: every query parameter's values, in the order given."""
    last = {name: values[-1] for name, values in params.items() if values}
    query = ListQuery(limit=min(max_limit, _limit(last.get("limit"), default_limit)))
    query.marker = last.get("marker")
    query.member_status = last.get("member_status", "accepted")
    if query.member_status not in ("pending", "accepted", "rejected", "all"):
        raise ImageError(400, f"Invalid status: {query.member_status}")
    query.tags = [tag.strip() for tag in params.get("tag", ())]
    visibility = last.get("visibility")
    if visibility:
        if visibility not in (*VISIBILITIES, "all"):
            raise ImageError(400, f"Invalid visibility value: {visibility}")
        query.visibility = visibility
    if "changes-since" in last:
        raise ImageError(400, 'The "changes-since" filter is no longer available on v2.')
    query.sort = _sorting(params)
    _filters(query, {name: value for name, value in last.items() if name not in _CONTROL})
    return query


def _limit(text: str | None, default: int) -> int:
    if text is None:
        return default
    try:
        limit = int(text)
    except ValueError:
        raise ImageError(400, "limit param must be an integer") from None
    if limit < 0:
        raise ImageError(400, "limit param must be positive")
    return limit


def _sort_key(key: str) -> str:
    if key not in SORT_KEYS:
        raise ImageError(400, f"Invalid sort key: {key}. It must be one of the following: {', '.join(SORT_KEYS)}.")
    return key


def _sort_dir(direction: str) -> str:
    if direction not in ("asc", "desc"):
        raise ImageError(400, f"Invalid sort direction: {direction}")
    return direction


def _sorting(params: Mapping[str, Sequence[str]]) -> list[tuple[str, str]]:
    keys: list[str] = []
    dirs: list[str] = []
    if "sort" in params:
        if "sort_key" in params or "sort_dir" in params:
            raise ImageError(400, "Old and new sorting syntax cannot be combined")
        for item in params["sort"][0].strip().split(","):
            key, _, direction = item.partition(":")
            keys.append(_sort_key(key.strip()))
            dirs.append(_sort_dir(direction.strip() or "desc"))
    else:
        keys = [_sort_key(key.strip()) for key in params.get("sort_key", ())]
        dirs = [_sort_dir(direction.strip()) for direction in params.get("sort_dir", ())]
        if len(dirs) > 1 and len(dirs) != len(keys):
            raise ImageError(400, "Number of sort dirs does not match the number of sort keys")
    keys = keys or ["created_at"]
    default = dirs[0] if len(dirs) == 1 else "desc"
    dirs = dirs if len(dirs) == len(keys) else [default] * len(keys)
    sort = list(zip(keys, dirs, strict=True))
    for key in ("created_at", "id"):
        if key not in keys:
            sort.append((key, default))
    return sort


def _filters(query: ListQuery, filters: dict[str, str]) -> None:
    hidden = filters.pop("os_hidden", "false").lower()
    if hidden not in ("true", "false"):
        raise ImageError(400, f"Invalid value '{hidden}' for 'os_hidden' filter. Valid values are 'true' or 'false'.")
    query.exact["os_hidden"] = hidden == "true"
    protected = filters.pop("protected", None)
    if protected is not None:
        if protected not in ("true", "false"):
            raise ImageError(400, f"Invalid value '{protected}' for 'protected' filter. "
                                  "Valid values are 'true' or 'false'.")
        query.exact["protected"] = protected == "true"
    for name, value in filters.items():
        if name.endswith(("_min", "_max")) and name[:-4] in RANGE_ATTRIBUTES:
            query.compare.append((name[:-4], "gte" if name.endswith("_min") else "lte", _range_value(value)))
        elif name in TIME_FILTERS:
            operator, moment = _split_operator(value)
            if operator not in TIME_OPERATORS:
                raise ImageError(400, "Unable to filter on a unknown operator.")
            query.compare.append((name, operator, _parse_time(name, moment)))
        elif name in OPERATOR_FILTERS:
            operator, text = _split_operator(value)
            if operator == "in":
                query.one_of[name] = split_quoted(text)
            elif operator == "eq":
                query.one_of[name] = [text]
            else:
                raise ImageError(400, f"Unable to filter by unknown operator '{operator}'.")
        elif name in EXACT_FILTERS:
            query.exact[name] = value
        else:
            query.properties[name] = value


def _range_value(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ImageError(400, "Unable to filter on a range with a non-numeric value.") from None


def _split_operator(expression: str) -> tuple[str, str]:
    left, separator, right = expression.partition(":")
    if not separator:
        return "eq", left
    if _iso_time(expression) is not None:
        return "eq", expression
    return left, right


def _iso_time(text: str) -> datetime.datetime | None:
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        return None
    if moment.tzinfo is not None:
        moment = moment.astimezone(datetime.UTC).replace(tzinfo=None)
    return moment


def _parse_time(name: str, text: str) -> datetime.datetime:
    moment = _iso_time(text)
    if moment is None:
        raise ImageError(400, f'Bad "{name}" query filter format. Use ISO 8601 DateTime notation.')
    return moment


_QUOTED = re.compile(r'"([^"\\]*(?:\\.[^"\\]*)*)",?|([^,]+),?|,')


def split_quoted(value: str) -> list[str]:
    """``a,"b,c",d`` -> ``["a", "b,c", "d"]`` (the API working group's ``in:`` syntax)."""
    if value.count('"') % 2:
        raise ImageError(400, f"Invalid filter value {value}. The quote is not closed.")
    return [quoted or plain for quoted, plain in _QUOTED.findall(value)]
