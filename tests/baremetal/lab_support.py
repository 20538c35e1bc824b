"""The bare metal lab's QEMU machines (libvirt, TCG), shared by the end-to-end tests.

``tools/baremetal-lab`` installs and starts what they need and writes
``$CORRAL_LAB_DIR/lab.env``; without it the tests skip, or fail under CI
(``CORRAL_TEST_REQUIRE_BACKENDS=1``).  Guests reach the host only through
QEMU's user-mode network, where the host's loopback is 10.0.2.2.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import threading
import urllib.parse
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from corral.core.server import ThreadedServer
from tests.baremetal.vmedia_support import require

LAB_DIR = os.environ.get("CORRAL_LAB_DIR", "/var/tmp/corral-baremetal-lab")
# The guest's view of the host: nothing on the host may send anything there.
GUEST_NETWORK = "10.0.2.0/24"


def read_lab() -> dict[str, str]:
    path = os.path.join(LAB_DIR, "lab.env")
    require(os.path.exists(path), f"the bare metal lab is not set up ({path} is missing)")
    with open(path) as handle:
        lab = dict(line.strip().split("=", 1) for line in handle if "=" in line)
    for tool in ("virsh", "xorriso"):
        require(shutil.which(tool) is not None, f"{tool} is not installed")
    for key in ("CORRAL_LAB_KERNEL", "CORRAL_LAB_RAMDISK", "CORRAL_LAB_ISOLINUX", "CORRAL_LAB_LDLINUX"):
        require(os.path.exists(lab[key]), f"{lab[key]} is missing")
    try:
        import libvirt  # noqa: F401
    except ImportError:
        require(False, "libvirt-python is not installed (sushy-tools' libvirt driver needs it)")
    probe = subprocess.run(["virsh", "-c", lab["CORRAL_LAB_LIBVIRT_URI"], "pool-info", lab["CORRAL_LAB_POOL"]],
                           capture_output=True, text=True, check=False)
    require(probe.returncode == 0, f"libvirtd or the lab's storage pool is not available: {probe.stderr.strip()}")
    return lab


@dataclass
class MachineSpec:
    """A lab machine: its firmware, memory and, for machines running the agent, disks and a forwarded port."""

    firmware: str
    memory_mib: int | None = None
    # (size in bytes, serial) of each virtio disk, the first one first in the boot order
    disks: Sequence[tuple[int, str]] = ()
    # a virtio NIC with this MAC whose guest port 9999 is reachable at 127.0.0.1:agent_port
    mac: str | None = None
    agent_port: int | None = None


class Machines:
    """Libvirt domains named corral-lab-*, removed with their disks and the volumes sushy-tools uploaded."""

    def __init__(self, lab: dict[str, str], specs: Sequence[str | MachineSpec]) -> None:
        self.uri = lab["CORRAL_LAB_LIBVIRT_URI"]
        self.pool = lab["CORRAL_LAB_POOL"]
        self.vm_dir = lab["CORRAL_LAB_VM_DIR"]
        self.volumes_before = set(self._volumes())
        prefix = f"corral-lab-{uuid.uuid4().hex[:8]}"
        self.machines: list[dict[str, Any]] = []
        try:
            for index, spec in enumerate(specs):
                spec = spec if isinstance(spec, MachineSpec) else MachineSpec(spec)
                name = f"{prefix}-{index}"
                machine = {"name": name, "uuid": str(uuid.uuid4()), "firmware": spec.firmware, "spec": spec,
                           "serial": os.path.join(self.vm_dir, f"{name}.serial.log"),
                           "disks": [os.path.join(self.vm_dir, f"{name}.disk{n}.raw") for n in range(len(spec.disks))]}
                self._define(machine)
                self.machines.append(machine)
        except Exception:
            self.remove()
            raise

    def virsh(self, *args: str) -> str:
        result = subprocess.run(["virsh", "-q", "-c", self.uri, *args], capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise RuntimeError(f"virsh {' '.join(args)}: {result.stderr.strip()}")
        return result.stdout

    def _volumes(self) -> list[str]:
        return [line.split()[0] for line in self.virsh("vol-list", self.pool).splitlines() if line.strip()]

    def _define(self, machine: dict[str, Any]) -> None:
        # TCG (type 'qemu'): this machine has no usable hardware virtualisation.  An empty CD drive is
        # needed before the BMC can insert media; the serial console goes to a file the test reads.
        spec: MachineSpec = machine["spec"]
        if spec.firmware == "uefi":
            # OVMF chosen by libvirt, secure boot off; GRUB under OVMF needs more than 256 MiB.
            memory, bus, cd = 512, "sata", "sdb"
            os_xml = ("<os firmware='efi'><type arch='x86_64' machine='q35'>hvm</type><firmware>"
                      "<feature enabled='no' name='secure-boot'/><feature enabled='no' name='enrolled-keys'/>"
                      "</firmware><boot dev='hd'/></os>")
        else:
            memory, bus, cd = 256, "ide", "hdc"
            os_xml = "<os><type arch='x86_64' machine='pc'>hvm</type><boot dev='hd'/></os>"
        disks = ""
        for index, ((size, serial), path) in enumerate(zip(spec.disks, machine["disks"])):
            with open(path, "wb") as handle:  # sparse
                handle.truncate(size)
            disks += (f"<disk type='file' device='disk'><driver name='qemu' type='raw' cache='unsafe'/>"
                      f"<source file='{path}'/><target dev='vd{'abcdefgh'[index]}' bus='virtio'/>"
                      f"<serial>{serial}</serial></disk>\n    ")
        if spec.mac:
            # QEMU's user network with a forwarded port (libvirt's own user interface forwards none).
            network = ""
            commandline = (
                "<qemu:commandline>"
                "<qemu:arg value='-netdev'/>"
                f"<qemu:arg value='user,id=corralnet,hostfwd=tcp:127.0.0.1:{spec.agent_port}-:9999'/>"
                "<qemu:arg value='-device'/>"
                # (a slot libvirt leaves free: it places its own devices without seeing this one)
                f"<qemu:arg value='virtio-net-pci,netdev=corralnet,mac={spec.mac},"
                f"bus={'pcie.0' if spec.firmware == 'uefi' else 'pci.0'},addr=0x10'/>"
                "</qemu:commandline>")
        else:
            network = "<interface type='user'><model type='e1000'/></interface>"
            commandline = ""
        xml = f"""<domain type='qemu' xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'>
  <name>{machine['name']}</name><uuid>{machine['uuid']}</uuid>
  <memory unit='MiB'>{spec.memory_mib or memory}</memory><vcpu>1</vcpu>
  {os_xml}
  <features><acpi/><apic/></features>
  <on_poweroff>destroy</on_poweroff><on_reboot>restart</on_reboot><on_crash>destroy</on_crash>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    {disks}<disk type='file' device='cdrom'><driver name='qemu' type='raw'/><target dev='{cd}' bus='{bus}'/><readonly/></disk>
    {network}
    <serial type='file'><source path='{machine['serial']}' append='on'/><target port='0'/></serial>
    <console type='file'><source path='{machine['serial']}' append='on'/><target type='serial' port='0'/></console>
    <video><model type='none'/></video><memballoon model='none'/>
  </devices>
  {commandline}
</domain>"""
        path = os.path.join(self.vm_dir, f"{machine['name']}.xml")
        with open(path, "w") as handle:
            handle.write(xml)
        self.virsh("define", path)

    def state(self, machine: dict[str, Any]) -> str:
        return self.virsh("domstate", machine["name"]).strip()

    def serial(self, machine: dict[str, Any]) -> str:
        try:
            with open(machine["serial"], errors="replace") as handle:
                return handle.read()
        except FileNotFoundError:
            return ""

    def read_disk(self, machine: dict[str, Any], index: int, length: int, offset: int = 0) -> bytes:
        with open(machine["disks"][index], "rb") as handle:
            handle.seek(offset)
            return handle.read(length)

    def remove(self) -> None:
        for machine in self.machines:
            subprocess.run(["virsh", "-q", "-c", self.uri, "destroy", machine["name"]], capture_output=True,
                           check=False)
            # (UEFI machines refuse a plain undefine)
            subprocess.run(["virsh", "-q", "-c", self.uri, "undefine", "--nvram", machine["name"]],
                           capture_output=True, check=False)
            for path in [*(os.path.join(self.vm_dir, machine["name"] + suffix) for suffix in (".xml", ".serial.log")),
                         *machine["disks"]]:
                if os.path.exists(path):
                    os.unlink(path)
        # Ejecting leaves the uploaded image in the pool.
        for volume in set(self._volumes()) - self.volumes_before:
            subprocess.run(["virsh", "-q", "-c", self.uri, "vol-delete", volume, "--pool", self.pool],
                           capture_output=True, check=False)


class Callbacks:
    """Where the guests' init reports: GET /<label>?key=value..."""

    def __init__(self) -> None:
        self.received: dict[str, dict[str, str]] = {}
        self._lock = threading.Lock()
        self.server = ThreadedServer(self._app).start()

    def _app(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        query = urllib.parse.parse_qs(environ.get("QUERY_STRING", ""))
        with self._lock:
            self.received[environ["PATH_INFO"].strip("/")] = {key: values[0] for key, values in query.items()}
        start_response("200 OK", [("Content-Length", "3")])
        return [b"ok\n"]

    def url_for_guest(self, label: str) -> str:
        # QEMU's user-mode network: the guest reaches the host's loopback as 10.0.2.2.
        return f"http://10.0.2.2:{self.server.port}/{label}"

    def stop(self) -> None:
        self.server.stop()


@contextlib.contextmanager
def guest_network_blackholed() -> Iterator[None]:
    """While the lab runs, the host's packets to the guests' view of it (10.0.2.0/24) go nowhere.

    Host-side code must never request an address only a guest can reach; a
    mistake then fails on this machine instead of leaving it.
    """
    shown = subprocess.run(["ip", "route", "show", "type", "blackhole"], capture_output=True, text=True,
                           check=False).stdout
    added = False
    if GUEST_NETWORK not in shown:
        added = subprocess.run(["ip", "route", "add", "blackhole", GUEST_NETWORK], capture_output=True,
                               check=False).returncode == 0
    try:
        yield
    finally:
        if added:
            subprocess.run(["ip", "route", "del", "blackhole", GUEST_NETWORK], capture_output=True, check=False)
