"""What the pieces of a conductor need of it, as a typing protocol.

:class:`corral.baremetal.conductor.manager.Conductor` is assembled from
mixins (allocations, ports, later-microversion extras) and hands itself
to :class:`corral.baremetal.conductor.task.Task`.  Those modules type
their ``conductor``/``self`` as :class:`ConductorCore` rather than
importing the manager, so imports point one way only: the manager
imports its parts, never the reverse.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from oslo_config import cfg

    from corral.baremetal.drivers.registry import DriverRegistry
    from corral.core.db import Database
    from corral.core.workers import WorkerPool


class ConductorCore(Protocol):
    conf: cfg.ConfigOpts
    host: str
    db: Database
    drivers: DriverRegistry
    pool: WorkerPool
    conductor_id: int | None
    rpc_address: str | None
    # Where this conductor serves [deploy] http_root (None when it does not).
    file_server_url: str | None

    def live_conductors(self) -> list[dict[str, Any]]: ...

    # A locked :class:`~corral.baremetal.conductor.task.Task` (not imported:
    # the task module itself depends on this protocol).
    def _locked(self, node_id: int) -> Any: ...
