"""A unit of conductor work on one node, holding the node's lock.

A :class:`Task` takes the lock, loads the node and builds its driver.
Every change goes through :meth:`Task.update` (the node's row) or
:meth:`Task.write` (other tables), which write only while this conductor
still holds the very lock the task took: same host, same lock generation
(see :mod:`corral.baremetal.conductor.locks`).  A power action first checks
the same.  A task that finds its lock gone raises :class:`LockLost` from then
on, without asking the database again.  Work that outlives the request
hands the task to a worker (see ``Conductor.spawn``), which releases the
lock when it finishes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from corral.baremetal.conductor import locks
from corral.baremetal.conductor.locks import LockLost
from corral.baremetal.db import history
from corral.baremetal.db import nodes as node_db
from corral.baremetal.domain import states
from corral.core.errors import BadRequest, NotFound

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from corral.baremetal.conductor.core import ConductorCore

LOG = logging.getLogger(__name__)
T = TypeVar("T")
# Power interface methods that act on the hardware: each checks the lock first.
POWER_ACTIONS = frozenset({"set_power_state", "reboot"})


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
        # The generation of the lock this task holds (None: none held).
        self.generation: int | None = None
        # Set once a write found the lock gone: nothing more is attempted.
        self.lost = False
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
        if not self.shared and not self._locked:
            conf = self.conductor.conf.conductor
            self.generation = locks.reserve(
                self.conductor.db, self.node_id, self.node["uuid"], self.conductor.host,
                attempts=conf.node_locked_retry_attempts, interval=conf.node_locked_retry_interval,
            )
            self._locked = True
            self.node = self._load()
        self.driver = self.conductor.drivers.build(self.node)
        if not self.shared:
            self.driver.interfaces["power"] = FencedPower(self.driver.interfaces["power"], self)
        return self

    def adopt_lock(self, generation: int) -> Task:
        """Hold a lock taken over from another conductor (``locks.take_over``); no driver is built."""
        self._locked = True
        self.generation = generation
        self.node = self._load()
        return self

    def release(self) -> None:
        if not self._locked:
            return
        self._locked = False
        if self.lost:
            return  # the lock is someone else's now
        try:
            locks.release(self.conductor.db, self.node_id, self.conductor.host, self.generation)
        except Exception:  # noqa: BLE001 - a lock left behind is taken over when this conductor is presumed dead
            LOG.exception("could not release the lock on node %s", self.node["uuid"])

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
        self._check_not_lost()
        written_values = {**values, "reservation": None} if release and self._locked else values
        written = self.conductor.db.write(
            lambda conn: node_db.update(conn, self.node_id, written_values, reservation=self.conductor.host,
                                        generation=self.generation)
        )
        if not written:
            raise self._lost()
        self.node.update(written_values)
        if release:
            self._locked = False

    def write(self, work: Callable[..., T], *args: Any) -> T:
        """Run ``work(conn, *args)`` in one transaction that first checks this task still holds its lock.

        For writes to other tables than the node's row (BIOS settings,
        firmware, inventory, history, traits ...): a conductor presumed dead
        that comes back writes none of them.
        """
        if self.shared:
            raise RuntimeError("a shared task cannot change the node")
        self._check_not_lost()

        def fenced(conn: Connection) -> tuple[bool, Any]:
            if not self._holds(conn):
                return False, None
            return True, work(conn, *args)

        held, result = self.conductor.db.write(fenced)
        if not held:
            raise self._lost()
        return result

    def check_lock(self) -> None:
        """Raise LockLost unless this task still holds its lock (before acting on the hardware)."""
        if self.shared:
            return
        self._check_not_lost()
        if self.generation is None or not locks.still_held(
                self.conductor.db, self.node_id, self.conductor.host, self.generation):
            raise self._lost()

    def _holds(self, conn: Connection) -> bool:
        return self.generation is not None and locks.check(conn, self.node_id, self.conductor.host,
                                                           self.generation)

    def _check_not_lost(self) -> None:
        if self.lost:
            raise LockLost(self.node["uuid"], self.conductor.host)

    def _lost(self) -> LockLost:
        if not self.lost:
            LOG.warning("node %s: conductor %s no longer holds lock %s (another conductor took the node over); "
                        "its work on the node stops here", self.node["uuid"], self.conductor.host, self.generation)
        self.lost = True
        return LockLost(self.node["uuid"], self.conductor.host)

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
        self.write(history.flash_firmware, self.node_id, component, version)

    def store_inventory(self, inventory: dict[str, Any], plugin_data: dict[str, Any]) -> None:
        """Keep what inspection found (GET /v1/nodes/{node}/inventory)."""
        self.write(history.store_inventory, self.node_id, inventory, plugin_data)

    def bios_settings(self, settings: dict[str, str], *, merge: bool = False) -> None:
        self.write(lambda conn: node_db.write_bios(conn, self.node_id, settings, merge=merge))

    @property
    def internal_info(self) -> dict[str, Any]:
        return dict(self.node["driver_internal_info"] or {})


def stop_if_lost(task: Any) -> None:
    """Raise LockLost when the task's lock is known to be gone: its failure paths act on no hardware."""
    if getattr(task, "lost", False):
        raise LockLost(task.node["uuid"], task.conductor.host)


class FencedPower:
    """A node's power interface whose actions first check that the task still holds the node's lock.

    Everything else (reads, validation) passes straight through, so
    ``hasattr(power, "reboot")`` answers as the interface itself does.
    """

    def __init__(self, interface: Any, task: Task) -> None:
        self._interface = interface
        self._task = task

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._interface, name)
        if name not in POWER_ACTIONS:
            return attribute
        task = self._task

        def fenced(*args: Any, **kwargs: Any) -> Any:
            task.check_lock()
            return attribute(*args, **kwargs)

        return fenced
