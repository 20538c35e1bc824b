"""/resource_classes (1.2): standard and custom resource classes."""

from __future__ import annotations

import falcon
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from corral.core import errors
from corral.core.http import Endpoint, Route, send_empty, send_json
from corral.placement.api import util
from corral.placement.api.state import PlacementState
from corral.placement.db import catalog, topology
from corral.placement.db.tables import inventories, resource_classes

INTRODUCED = (1, 2)
PUT_CREATES = (1, 7)


def _body(req: falcon.Request, name: str) -> dict:
    return {"name": name, "links": [{"rel": "self", "href": util.url(req, f"/resource_classes/{name}")}]}


def _not_found(name: str) -> errors.NotFound:
    return errors.NotFound(f"No such resource class {name}.")


def _check_custom_name(state: PlacementState, req: falcon.Request, name: str) -> None:
    # Upstream checks the name from the path with the rename schema.
    state.schema("resource_classes.put").validate({"name": name}, req.context.version)


def list_classes(state: PlacementState, req: falcon.Request, resp: falcon.Response) -> None:
    util.authorize(state, req, "placement:resource_classes:list")
    with state.db.read() as conn:
        names = catalog.all_names(conn, resource_classes)
    util.send_cacheable(req, resp, {"resource_classes": [_body(req, name) for name in names]}, None)


def create_class(state: PlacementState, req: falcon.Request, resp: falcon.Response) -> None:
    util.authorize(state, req, "placement:resource_classes:create")
    body = util.json_body(state, req, state.schema("resource_classes.post"))
    name = body["name"]
    if not state.db.write(catalog.insert, resource_classes, name, util.utcnow()):
        raise errors.Conflict(f"Conflicting resource class already exists: {name}")
    util.set_location(req, resp, f"/resource_classes/{name}")
    send_empty(resp, 201)


def show_class(state: PlacementState, req: falcon.Request, resp: falcon.Response, name: str) -> None:
    util.authorize(state, req, "placement:resource_classes:show")
    with state.db.read() as conn:
        if catalog.get_id(conn, resource_classes, name) is None:
            raise _not_found(name)
    util.send_cacheable(req, resp, _body(req, name), None)


def rename_class(state: PlacementState, req: falcon.Request, resp: falcon.Response, name: str) -> None:
    """Before 1.7, PUT renames a custom class."""
    util.authorize(state, req, "placement:resource_classes:update")
    body = util.json_body(state, req, state.schema("resource_classes.put"))
    new_name = body["name"]

    def work(conn: Connection) -> None:
        ident = catalog.get_id(conn, resource_classes, name)
        if ident is None:
            raise _not_found(name)
        if name in state.standard_classes:
            raise errors.BadRequest(f"Cannot update standard resource class {name}")
        if new_name != name and catalog.get_id(conn, resource_classes, new_name) is not None:
            raise errors.Conflict(f"Resource class already exists: {new_name}")
        # UPDATE resource_classes SET name = :new_name, updated_at = :now WHERE id = :id
        conn.execute(
            resource_classes.update()
            .where(resource_classes.c.id == ident)
            .values(name=new_name, updated_at=util.utcnow())
        )
        topology.changed(conn, classes=True)

    state.db.write(work)
    send_json(resp, _body(req, new_name))


def ensure_class(state: PlacementState, req: falcon.Request, resp: falcon.Response, name: str) -> None:
    """From 1.7, PUT without a body creates a custom class (201) or confirms it (204)."""
    util.authorize(state, req, "placement:resource_classes:update")
    _check_custom_name(state, req, name)
    created = state.db.write(catalog.insert, resource_classes, name, util.utcnow())
    # Upstream sends the Location whether or not the class was new.
    util.set_location(req, resp, f"/resource_classes/{name}")
    send_empty(resp, 201 if created else 204)


def delete_class(state: PlacementState, req: falcon.Request, resp: falcon.Response, name: str) -> None:
    util.authorize(state, req, "placement:resource_classes:delete")

    def work(conn: Connection) -> None:
        ident = catalog.get_id(conn, resource_classes, name)
        if ident is None:
            raise _not_found(name)
        if name in state.standard_classes:
            raise errors.BadRequest(f"Error in delete resource class: Cannot delete standard resource class {name}.")
        # SELECT 1 FROM inventories WHERE resource_class_id = :id LIMIT 1
        if conn.execute(
            sa.select(inventories.c.id).where(inventories.c.resource_class_id == ident).limit(1)
        ).first():
            raise errors.Conflict(
                f"Error in delete resource class: Cannot delete resource class {name}. Class is in use in inventory."
            )
        # DELETE FROM resource_classes WHERE id = :id
        conn.execute(resource_classes.delete().where(resource_classes.c.id == ident))
        topology.changed(conn, classes=True)

    state.db.write(work)
    send_empty(resp)


ROUTES = [
    Route(
        "/resource_classes",
        {
            "GET": Endpoint(list_classes, min_version=INTRODUCED),
            "POST": Endpoint(create_class, min_version=INTRODUCED),
        },
    ),
    Route(
        "/resource_classes/{name}",
        {
            "GET": Endpoint(show_class, min_version=INTRODUCED),
            "PUT": [
                Endpoint(rename_class, min_version=INTRODUCED, max_version=(1, 6)),
                Endpoint(ensure_class, min_version=PUT_CREATES),
            ],
            "DELETE": Endpoint(delete_class, min_version=INTRODUCED),
        },
    ),
]
