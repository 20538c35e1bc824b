"""Storage interfaces: ``noop`` and ``cinder`` (boot-from-volume records validated, no Cinder calls)."""

from __future__ import annotations

from typing import Any

from corral.baremetal.db import volumes as volume_db
from corral.baremetal.domain import volumes
from corral.baremetal.drivers.base import BaseInterface, InvalidParameterValue


class NoopStorage(BaseInterface):
    interface_type = "storage"
    name = "noop"


class CinderStorage(BaseInterface):
    """Checks a node's volume connectors and targets as upstream's cinder interface does.

    Attaching volumes needs Cinder, which Corral does not talk to: the
    records are stored and validated (``GET /v1/nodes/{node}/validate``)
    so a deployment tool sees the same answers.
    """

    interface_type = "storage"
    name = "cinder"

    def validate(self, task: Any) -> None:
        node = task.node
        with task.conductor.db.read() as conn:
            connectors = volume_db.list_rows(conn, "connector", {"node_id": node["id"]})
            targets = volume_db.list_rows(conn, "target", {"node_id": node["id"]})
        boot = getattr(task.driver, "boot", None)
        ipxe = "ipxe_boot" in getattr(boot, "capabilities", ())
        try:
            volumes.check_boot_from_volume(node, connectors, targets, ipxe=ipxe)
        except volumes.StorageInvalid as error:
            raise InvalidParameterValue(str(error)) from None
