"""/traits and /resource_providers/{uuid}/traits (1.6)."""

from __future__ import annotations

import re

import falcon
from sqlalchemy.engine import Connection

from corral.core import errors
from corral.core.http import Endpoint, Route, send_empty
from corral.placement.api import errors as codes
from corral.placement.api import util
from corral.placement.api.state import PlacementState
from corral.placement.db import catalog, provider_traits, providers
from corral.placement.db.tables import traits

INTRODUCED = (1, 6)
_CUSTOM = re.compile(r"^CUSTOM_[A-Z0-9_]+$")
_LIST_QUERY = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "associated": {"type": "string"}},
    "additionalProperties": False,
}


def _parse_name_filter(value: str | None) -> tuple[list[str] | None, str | None]:
    if value is None:
        return None, None
    if value.startswith("in:"):
        return [name for name in value[3:].split(",") if name], None
    if value.startswith("startswith:"):
        return None, value[len("startswith:"):]
    raise errors.BadRequest(
        "Badly formatted name parameter. Expected name query string parameter in form: "
        f"?name=[in|startswith]:[name1,name2|prefix]. Got: \"{value}\""
    )


def _parse_associated(value: str | None) -> bool | None:
    if value is None:
        return None
    if value.lower() not in ("true", "false"):
        raise errors.BadRequest('The query parameter "associated" only accepts "true" or "false"')
    return value.lower() == "true"


def list_traits(state: PlacementState, req: falcon.Request, resp: falcon.Response) -> None:
    util.authorize(state, req, "placement:traits:list")
    single = util.last_values(util.query_params(req))
    validator = state.cache.get("traits.list_query")
    if validator is None:
        validator = state.cache["traits.list_query"] = util.QuerySchema(_LIST_QUERY)
    validator.validate(single)
    names, prefix = _parse_name_filter(single.get("name"))
    associated = _parse_associated(single.get("associated"))
    with state.db.read() as conn:
        found = provider_traits.list_traits(conn, names=names, prefix=prefix, associated=associated)
    util.send_cacheable(req, resp, {"traits": found}, None)


def show_trait(state: PlacementState, req: falcon.Request, resp: falcon.Response, name: str) -> None:
    util.authorize(state, req, "placement:traits:show")
    with state.db.read() as conn:
        if catalog.get_id(conn, traits, name) is None:
            raise errors.NotFound(f"No such trait(s): {name}.")
    if req.context.at_least(*util.LAST_MODIFIED):
        resp.set_header("last-modified", util.http_date(None))
        resp.set_header("cache-control", "no-cache")
    send_empty(resp)


def put_trait(state: PlacementState, req: falcon.Request, resp: falcon.Response, name: str) -> None:
    util.authorize(state, req, "placement:traits:update")
    if len(name) > 255 or not _CUSTOM.match(name):
        raise errors.BadRequest(
            'The trait is invalid. A valid trait must be no longer than 255 characters, start with the '
            'prefix "CUSTOM_" and use following characters: "A"-"Z", "0"-"9" and "_"'
        )
    created = state.db.write(catalog.insert, traits, name, util.utcnow())
    # Upstream sends the Location whether or not the trait was new.
    util.set_location(req, resp, f"/traits/{name}")
    if req.context.at_least(*util.LAST_MODIFIED):
        resp.set_header("last-modified", util.http_date(None))
        resp.set_header("cache-control", "no-cache")
    send_empty(resp, 201 if created else 204)


def delete_trait(state: PlacementState, req: falcon.Request, resp: falcon.Response, name: str) -> None:
    util.authorize(state, req, "placement:traits:delete")

    def work(conn: Connection) -> None:
        ident = catalog.get_id(conn, traits, name)
        if ident is None:
            raise errors.NotFound(f"No such trait(s): {name}.")
        if name in state.standard_traits:
            raise errors.BadRequest(f"Cannot delete standard trait {name}.")
        if provider_traits.in_use(conn, ident):
            raise errors.Conflict(f"The trait {name} is in use by a resource provider.")
        # DELETE FROM traits WHERE id = :id
        conn.execute(traits.delete().where(traits.c.id == ident))

    state.db.write(work)
    send_empty(resp)


# ------------------------------------------------------ provider traits


def show_provider_traits(state: PlacementState, req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
    util.authorize(state, req, "placement:resource_providers:traits:list")
    with state.db.read() as conn:
        provider = providers.get_or_404(conn, uuid, context="No resource provider with uuid {uuid} found")
        names = provider_traits.trait_names(conn, provider.id)
    body = {"traits": names, "resource_provider_generation": provider.generation}
    util.send_cacheable(req, resp, body, provider.modified)


def replace_provider_traits(state: PlacementState, req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
    util.authorize(state, req, "placement:resource_providers:traits:update")
    body = util.json_body(state, req, state.schema("provider_traits.put"))
    wanted = list(dict.fromkeys(body["traits"]))  # upstream accepts repeats
    now = util.utcnow()

    def work(conn: Connection) -> tuple[list[str], int]:
        provider = providers.get_or_404(conn, uuid)
        if body["resource_provider_generation"] != provider.generation:
            raise errors.Conflict(util.GENERATION_CHANGED, code=codes.CONCURRENT_UPDATE)
        found = catalog.ids_by_name(conn, traits, wanted, state.standard_traits)
        missing = sorted(set(wanted) - set(found))
        if missing:
            raise errors.BadRequest(f"No such trait {', '.join(missing)}")
        current = provider_traits.trait_names(conn, provider.id)
        if set(current) == set(found):
            # Upstream leaves the generation alone when nothing changes.
            return current, provider.generation
        generation = providers.bump_generation(conn, provider.id, body["resource_provider_generation"], now)
        provider_traits.replace(conn, provider.id, list(found.values()), now)
        return provider_traits.trait_names(conn, provider.id), generation

    names, generation = state.db.write(work)
    util.send_cacheable(req, resp, {"traits": names, "resource_provider_generation": generation}, now)


def delete_provider_traits(state: PlacementState, req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
    util.authorize(state, req, "placement:resource_providers:traits:delete")
    now = util.utcnow()

    def work(conn: Connection) -> None:
        provider = providers.get_or_404(conn, uuid)
        if not provider_traits.trait_names(conn, provider.id):
            return  # nothing to remove: upstream leaves the generation alone
        providers.bump_generation(conn, provider.id, provider.generation, now)
        provider_traits.replace(conn, provider.id, [], now)

    state.db.write(work)
    send_empty(resp)


ROUTES = [
    Route("/traits", {"GET": Endpoint(list_traits, min_version=INTRODUCED)}),
    Route(
        "/traits/{name}",
        {
            "GET": Endpoint(show_trait, min_version=INTRODUCED),
            "PUT": Endpoint(put_trait, min_version=INTRODUCED),
            "DELETE": Endpoint(delete_trait, min_version=INTRODUCED),
        },
    ),
    Route(
        "/resource_providers/{uuid}/traits",
        {
            "GET": Endpoint(show_provider_traits, min_version=INTRODUCED),
            "PUT": Endpoint(replace_provider_traits, min_version=INTRODUCED),
            "DELETE": Endpoint(delete_provider_traits, min_version=INTRODUCED),
        },
    ),
]
