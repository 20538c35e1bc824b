"""A unit of conductor work on one node, holding the node's lock.

A :class:`Task` takes the lock, loads the node and builds its driver.
Every change goes through :meth:`Task.update`, which writes the row only
while this conductor still holds the lock.  Work that outlives the request
hands the task to a worker (see ``Conductor.spawn``), which releases the
lock when it finishes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from corral.baremetal.conductor import locks
from corral.baremetal.db import history
from corral.baremetal.db import nodes as node_db
from corral.baremetal.domain import states
from corral.core.errors import BadRequest, Conflict, NotFound

if TYPE_CHECKING:
    from corral.baremetal.conductor.core import ConductorCore


class InvalidState(BadRequest):
    """An action the state machine does not allow from the node's state."""


def invalid_action(action: str, node: dict[str, Any]) -> InvalidState:
    return InvalidState(
        f'The requested action "{action}" can not be performed on node "{node["uuid"]}" '
        f'while it is in state "{node["provision_state"]}".'
    )


class Task:
    def __init__(self, conductor: ConductorCore, node_id: int, *, shared: bool = False) -> None:
        self.conductor = conductor
        self.node_id = node_id
        self.shared = shared
        self._locked = False
        self.node: dict[str, Any] = self._load()
        self.driver: Any = None

    def _load(self) -> dict[str, Any]:
        with self.conductor.db.read() as conn:
            node = node_db.get(conn, node_id=self.node_id)
        if node is None:
            raise NotFound(f"Node {self.node_id} could not be found.")
        return node

    # -------------------------------------------------------- locking

    def acquire(self) -> Task:
        if self.driver is not None:
            return self  # already acquired
        if not self.shared:
            conf = self.conductor.conf.conductor
            locks.reserve(
                self.conductor.db, self.node_id, self.node["uuid"], self.conductor.host,
                attempts=conf.node_locked_retry_attempts, interval=conf.node_locked_retry_interval,
            )
            self._locked = True
            self.node = self._load()
        self.driver = self.conductor.drivers.build(self.node)
        return self

    def release(self) -> None:
        if self._locked:
            self._locked = False
            locks.release(self.conductor.db, self.node_id, self.conductor.host)

    def __enter__(self) -> Task:
        return self.acquire()

    def __exit__(self, *exc_info: object) -> None:
        self.release()

    # -------------------------------------------------------- changes

    def update(self, *, release: bool = False, **values: Any) -> None:
        """Write ``values`` to the node (only while this task holds the lock).

        With ``release`` the same write gives the lock back: a node that
        comes to rest (``clean wait`` and the like) is never seen resting
        yet still locked, so the next request for it (an abort) does not
        race the lock's release.
        """
        if self.shared:
            raise RuntimeError("a shared task cannot change the node")
        written_values = {**values, "reservation": None} if release and self._locked else values
        written = self.conductor.db.write(
            lambda conn: node_db.update(conn, self.node_id, written_values, reservation=self.conductor.host)
        )
        if not written:
            raise Conflict(f"Node {self.node['uuid']} lost its lock held by {self.conductor.host}.")
        self.node.update(written_values)
        if release:
            self._locked = False

    def process_event(self, event: str, *, action: str | None = None, release: bool = False,
                      **values: Any) -> str:
        """Move the node along the state machine and write ``values`` with it
        (and, with ``release``, give the lock back in the same write)."""
        current = self.node["provision_state"]
        new_state = states.next_state(current, event)
        if new_state is None:
            raise invalid_action(action or event, self.node)
        target = states.target_for(current, event, new_state, self.node["target_provision_state"])
        started = self.node.get("provision_updated_at")
        self.update(
            provision_state=new_state,
            target_provision_state=target,
            provision_updated_at=node_db.utcnow(),
            release=release,
            **values,
        )
        if values.get("last_error"):
            history.record(self, values["last_error"], history.event_type(current), started=started, error=True)
        return new_state

    def firmware_flashed(self, component: str, version: str) -> None:
        """Record a firmware component's new version (GET /v1/nodes/{node}/firmware)."""
        self.conductor.db.write(lambda conn: history.flash_firmware(conn, self.node_id, component, version))

    def store_inventory(self, inventory: dict[str, Any], plugin_data: dict[str, Any]) -> None:
        """Keep what inspection found (GET /v1/nodes/{node}/inventory)."""
        self.conductor.db.write(lambda conn: history.store_inventory(conn, self.node_id, inventory, plugin_data))

    def bios_settings(self, settings: dict[str, str], *, merge: bool = False) -> None:
        self.conductor.db.write(lambda conn: node_db.write_bios(conn, self.node_id, settings, merge=merge))

    @property
    def internal_info(self) -> dict[str, Any]:
        return dict(self.node["driver_internal_info"] or {})
