"""Test machines running the real ironic-python-agent, and an http server for images.

A :class:`TestMachine` is what a node's power button would boot: the
real agent process (see ``agent_machine``) with a disk file and a MAC.
Its PATH starts with a directory of stand-ins for the commands that act
on the machine itself (poweroff, reboot, ``ip link set``, module loading,
hardware clock): the agent runs them on the host it runs on, and a test
host must stay up and connected.
"""

from __future__ import annotations

import functools
import hashlib
import http.server
import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.support.ports import free_port

REPO_ROOT = Path(__file__).resolve().parents[2]
DISK_SIZE = 8 * 1024 * 1024
SECTOR = 512
# Commands the agent may run that act on the host as a whole; each stand-in records that it ran.
_HOST_COMMANDS = ("poweroff", "reboot", "shutdown", "halt", "hwclock", "modprobe", "multipath",
                  "iscsistart", "chronyd", "ntpdate")
# The machine has no software RAID: mdadm finds no array (the agent asks whether its disk is one).
_MDADM_STANDIN = """#!/bin/sh
printf 'mdadm %s\n' "$*" >> "$CORRAL_TEST_MACHINE_EVENTS"
echo "mdadm: no md device" >&2
exit 1
"""
# The firmware's boot entries are the machine's: recorded, never the host's NVRAM.
_EFIBOOTMGR_STANDIN = """#!/bin/sh
case " $* " in *" --version "*) echo "efibootmgr version 18"; exit 0;; esac
printf 'efibootmgr %s\n' "$*" >> "$CORRAL_TEST_MACHINE_EVENTS"
exit 0
"""
# The machine's udev.  The host runs none (devtmpfs makes the partition devices at once), so nothing
# records what its disk's partitions hold, and lsblk, which reads udev's database, would show no UUID,
# PARTUUID or label.  Asked to settle, this one does what udev's blkid builtin does: it probes the disk
# and its partitions and records the result in the udev database, under the /run of the machine's own
# mount namespace (see TestMachine.power_on).
_UDEVADM_STANDIN = """#!/bin/sh
case "$1" in settle|trigger) ;; *) exit 0;; esac
disk=$(basename "$CORRAL_TEST_MACHINE_DISK")
mkdir -p /run/udev/data
rm -f /run/udev/data/b*
for dev in /sys/class/block/$disk /sys/class/block/$disk/${disk}p*; do
  [ -e "$dev/dev" ] || continue
  { blkid -p -o udev "/dev/$(basename "$dev")" 2>/dev/null | sed 's/^/E:/'; echo "I:1"; } \
    > "/run/udev/data/b$(cat "$dev/dev")"
done
exit 0
"""
# udev also re-probes a partition once something wrote to it (its inotify watch): lsblk, which reads what
# udev recorded, first has the stand-in probe again, so that it never shows what a partition held before.
_LSBLK_STANDIN = """#!/bin/sh
udevadm settle
exec @LSBLK@ "$@"
"""
# The agent asks fuser whether anything holds its disk and takes any message as "busy": here, where the
# machine's processes are the host's, fuser also says it may not look into some of them (another user's, a
# sandbox's init); those messages are dropped, what it finds holding the disk is kept.
_FUSER_STANDIN = """#!/bin/sh
err=$(mktemp)
@FUSER@ "$@" 2>"$err"
rc=$?
grep -v "Permission denied" "$err" >&2
rm -f "$err"
exit $rc
"""
_IP_STANDIN = """#!/bin/sh
# Reading addresses and routes is harmless; changing links is not.
case " $* " in
  *" set "*|*" del "*|*" add "*|*" flush "*) echo "ip $*" >> "$CORRAL_TEST_MACHINE_EVENTS"; exit 0;;
esac
exec /usr/sbin/ip "$@"
"""


ENTRY_POINT_NAME = "corral_test_machine"
# What a test machine needs of the host: loop devices, and the disk tools
# the agent runs on them.
_MACHINE_TOOLS = ("losetup", "lsblk", "blkid", "parted")
# And for partition images, which the agent partitions and formats itself.
PARTITION_TOOLS = ("sgdisk", "mkswap", "mkfs.ext4", "debugfs", "partx", "unshare", "file", "busybox")


def machine_unavailable_reason() -> str | None:
    """Why no test machine can run here, or None."""
    if os.geteuid() != 0:
        return "test machines need root (their disks are loop devices)"
    missing = [tool for tool in _MACHINE_TOOLS if shutil.which(tool) is None]
    if missing:
        return f"test machines need {', '.join(missing)} (Debian: apt-get install parted util-linux)"
    return None


def require_machines(tools: tuple[str, ...] = ()) -> None:
    """Skip the test where no test machine can run (or ``tools`` are missing), or fail under
    CORRAL_TEST_REQUIRE_BACKENDS=1 (as CI sets)."""
    reason = machine_unavailable_reason()
    missing = [tool for tool in tools if shutil.which(tool) is None]
    if reason is None and missing:
        reason = (f"this test machine needs {', '.join(missing)} (Debian: apt-get install gdisk e2fsprogs file "
                  "busybox-static)")
    if reason is not None:
        if os.environ.get("CORRAL_TEST_REQUIRE_BACKENDS") == "1":
            pytest.fail(reason)
        pytest.skip(reason)


def install_entry_point(site_dir: Path) -> None:
    """A dist-info under ``site_dir`` (put on PYTHONPATH) registering the test machine's manager with IPA."""
    dist = site_dir / "corral_test_machine-1.0.dist-info"
    dist.mkdir(parents=True, exist_ok=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: corral-test-machine\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[ironic_python_agent.hardware_managers]\n"
        f"{ENTRY_POINT_NAME} = tests.baremetal.agent_machine:TestMachineHardwareManager\n"
    )


def raw_image(payload: bytes, size: int = 4 * 1024 * 1024) -> bytes:
    """A raw whole-disk image: an MBR with one Linux partition from sector 2048, ``payload`` at 1 MiB."""
    image = bytearray(size)
    start, sectors = 2048, size // SECTOR - 2048
    entry = bytes([0x00, 0, 0, 0, 0x83, 0, 0, 0]) + start.to_bytes(4, "little") + sectors.to_bytes(4, "little")
    image[446:462] = entry
    image[510:512] = b"\x55\xaa"
    image[start * SECTOR:start * SECTOR + len(payload)] = payload
    return bytes(image)


class ImageServer:
    """Serves a directory over http on 127.0.0.1 (the image store the agent downloads from).

    ``requests`` lists the method and path of every request, in order.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.requests: list[str] = []
        handler = functools.partial(_QuietHandler, directory=str(directory), seen=self.requests)
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def publish(self, name: str, data: bytes) -> tuple[str, str]:
        """Store an image; returns its URL and sha256."""
        (self.directory / name).write_bytes(data)
        return f"{self.url}/{name}", hashlib.sha256(data).hexdigest()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def __init__(self, *args: Any, seen: list[str], **kwargs: Any) -> None:
        self.seen = seen
        super().__init__(*args, **kwargs)

    def send_head(self) -> Any:
        self.seen.append(f"{self.command} {self.path}")
        return super().send_head()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass


class TestMachine:
    __test__ = False  # not a test class

    def __init__(self, root: Path, name: str, mac: str, *, disk_fill: bytes = b"\xaa",
                 disk_size: int = DISK_SIZE, boot_mode: str = "uefi") -> None:
        require_machines()
        self.name = name
        self.boot_mode = boot_mode
        self.mac = mac
        self.root = root / name
        self.root.mkdir(parents=True, exist_ok=True)
        self.backing_file = self.root / "disk.img"
        if disk_size == DISK_SIZE:
            self.backing_file.write_bytes(disk_fill * DISK_SIZE)
        else:
            # A larger disk (partition images need room for a root of whole GiBs) is sparse: zeros.
            with open(self.backing_file, "wb") as backing:
                backing.truncate(disk_size)
        # The machine's disk: a loop device over the file, so that the agent's disk tools (lsblk,
        # blkid, parted) see the block device they expect.
        attached = subprocess.run(["losetup", "--find", "--show", str(self.backing_file)], check=True,
                                  capture_output=True, text=True)
        self.disk = Path(attached.stdout.strip())
        self.events = self.root / "host-commands.log"
        self.events.write_text("")
        self.log_path = self.root / "agent.log"
        self._bin = self.root / "bin"
        self._site = self.root / "site"
        self._config_dir = self.root / "etc"
        self._config_dir.mkdir(exist_ok=True)
        self._bin.mkdir(exist_ok=True)
        for command in _HOST_COMMANDS:
            standin = self._bin / command
            standin.write_text(f'#!/bin/sh\necho "{command} $*" >> "$CORRAL_TEST_MACHINE_EVENTS"\nexit 0\n')
            standin.chmod(0o755)
        standins = [("ip", _IP_STANDIN), ("mdadm", _MDADM_STANDIN), ("efibootmgr", _EFIBOOTMGR_STANDIN),
                    ("udevadm", _UDEVADM_STANDIN)]
        for command, script in (("fuser", _FUSER_STANDIN), ("lsblk", _LSBLK_STANDIN)):
            found = shutil.which(command)
            if found:
                standins.append((command, script.replace(f"@{command.upper()}@", found)))
        for command, script in standins:
            (self._bin / command).write_text(script)
            (self._bin / command).chmod(0o755)
        install_entry_point(self._site)
        self.process: subprocess.Popen[bytes] | None = None
        self.port = 0

    def power_on(self, api_url: str, *extra: str, tls: bool = False) -> TestMachine:
        """Boot the ramdisk: start the agent (a fresh one each boot); with ``tls`` it serves https."""
        self.power_off()
        self.port = free_port()
        env = {
            **os.environ,
            "PATH": f"{self._bin}:{os.environ.get('PATH', '/usr/bin:/bin')}",
            "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), str(self._site)]),
            "CORRAL_TEST_MACHINE_MAC": self.mac,
            "CORRAL_TEST_MACHINE_DISK": str(self.disk),
            "CORRAL_TEST_MACHINE_EVENTS": str(self.events),
            "CORRAL_TEST_MACHINE_DIR": str(self.root),
            "CORRAL_TEST_MACHINE_BOOT_MODE": self.boot_mode,
        }
        # The agent mounts the disk's partitions to install a boot loader (and binds /dev, /proc ... into
        # them): in a mount namespace of its own, whatever it leaves mounted goes with the process.  Its
        # /run is its own too (a ramdisk's), where its udev keeps its database.
        namespace = []
        if shutil.which("unshare"):
            namespace = ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
                         'mount -t tmpfs -o mode=755 corral-machine-run /run && exec "$@"', self.name]
        args = [
            *namespace, sys.executable, "-m", "tests.baremetal.agent_machine",
            "--config-dir", str(self._config_dir),
            "--api_url", api_url,
            "--listen_host", "127.0.0.1", "--listen_port", str(self.port),
            "--advertise_host", "127.0.0.1", "--advertise_port", str(self.port),
            "--enable_auto_tls" if tls else "--noenable_auto_tls", "--nocollect_lldp",
            "--lookup_timeout", "120", "--lookup_interval", "1",
            "--image_download_connection_retries", "0",
            "--log-file", str(self.log_path),
            *extra,
        ]
        log = open(self.root / "agent.stdout", "ab")
        self.process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=self.root,
                                        start_new_session=True)
        log.close()
        return self

    def power_off(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)
        self.process = None

    def dispose(self) -> None:
        """Power off for good and give the loop device back."""
        self.power_off()
        subprocess.run(["losetup", "--detach", str(self.disk)], check=False)

    def log(self) -> str:
        text = ""
        for path in (self.log_path, self.root / "agent.stdout"):
            if path.exists():
                text += path.read_text(errors="replace")[-8000:]
        return text

    def disk_bytes(self) -> bytes:
        with open(self.disk, "rb") as disk:
            return disk.read()


# What the partition image holds: a file to find on the root partition, and the image's own boot loader
# installer, which the agent runs in a chroot of the root partition (BIOS: grub-install <disk>, then
# grub-mkconfig).  The installer is a busybox script that records how it was called and writes a grub.cfg:
# the test shows the agent ran the image's installer against the machine's disk, not that GRUB boots
# (a real GRUB needs a distribution's userland in the image).
PARTITION_IMAGE_FILE = ("hello.txt", b"corral partition image\n")
BOOTLOADER_LOG = "/var/log/corral-bootloader.log"
_GRUB_INSTALL = f"""#!/bin/sh
echo "grub-install $*" >> {BOOTLOADER_LOG}
"""
_GRUB_MKCONFIG = f"""#!/bin/sh
echo "grub-mkconfig $*" >> {BOOTLOADER_LOG}
[ "$1" = "-o" ] && echo "# made by the image's grub-mkconfig" > "$2"
exit 0
"""
BUSYBOX = "/bin/busybox"


def partition_image(work: Path, size: int = 8 * 1024 * 1024) -> bytes:
    """A raw ext4 file system (no partition table): a partition image, built without mounting (mkfs.ext4 -d)."""
    tree = work / "tree"
    # A root file system's mount points too: the agent binds /dev, /proc, /run and mounts sysfs into them.
    for directory in ("etc", "bin", "usr/sbin", "var/log", "boot/grub", "dev", "proc", "sys", "run", "tmp"):
        (tree / directory).mkdir(parents=True, exist_ok=True)
    (tree / "etc/fstab").write_text("# corral test image\n")
    (tree / PARTITION_IMAGE_FILE[0]).write_bytes(PARTITION_IMAGE_FILE[1])
    shutil.copyfile(BUSYBOX, tree / "bin/busybox")
    (tree / "bin/busybox").chmod(0o755)
    for applet in ("sh", "mount", "umount"):
        (tree / "bin" / applet).symlink_to("busybox")
    for name, script in (("grub-install", _GRUB_INSTALL), ("grub-mkconfig", _GRUB_MKCONFIG)):
        (tree / "usr/sbin" / name).write_text(script)
        (tree / "usr/sbin" / name).chmod(0o755)
    image = work / "root.ext4"
    image.unlink(missing_ok=True)
    subprocess.run(["mkfs.ext4", "-q", "-F", "-L", "corral-root", "-d", str(tree), str(image), f"{size // 1024}k"],
                   check=True, capture_output=True)
    return image.read_bytes()
