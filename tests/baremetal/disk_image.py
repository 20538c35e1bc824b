"""A whole-disk image for the lab's machines that proves, once booted from disk, what the config drive says.

The image is 64 MiB: an MBR (syslinux's boot code) and one active FAT
partition holding the lab's Debian kernel, a busybox initramfs, syslinux
for BIOS and a standalone GRUB as ``EFI/BOOT/BOOTX64.EFI`` for UEFI.  Its
init loads the virtio and ISO 9660 modules, finds the partition labelled
``config-2`` (the config drive the agent wrote at the end of the disk),
mounts it, reads ``openstack/latest/meta_data.json`` and calls the URL
named by its ``meta.corral_callback`` (else the URL the image was built
with followed by the ``uuid`` the file holds) with the file's bytes (hex)
and the partition it was found on.  It writes ``CORRAL-DEPLOYED`` lines on the
serial console as it goes.

Built without loop devices or root: mkfs.vfat, mtools' syslinux and mcopy
work on files (Debian: dosfstools syslinux syslinux-common mtools
busybox-static grub-efi-amd64-bin qemu-utils).
"""

from __future__ import annotations

import glob
import gzip
import io
import os
import re
import shutil
import subprocess
import tarfile
from pathlib import Path

SIZE = 64 * 1024 * 1024
PARTITION_START = 1024 * 1024
LABEL = "DEPLOYED"
TOOLS = ("mkfs.vfat", "syslinux", "mcopy", "mmd", "grub-mkstandalone", "qemu-img", "dpkg-deb", "cpio")
MBR_BIN = "/usr/lib/syslinux/mbr/mbr.bin"
BUSYBOX = "/bin/busybox"
# What the init needs, by module name; their dependencies come too.
MODULES = ("virtio_pci", "virtio_blk", "virtio_net", "isofs")
MODULE_DIRS = ("drivers/virtio", "drivers/cdrom/cdrom.ko", "drivers/block/virtio_blk.ko", "drivers/net/virtio_net.ko",
               "drivers/net/net_failover.ko", "net/core/failover.ko", "fs/isofs")

INIT = r"""#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc; mount -t sysfs sysfs /sys; mount -t devtmpfs devtmpfs /dev 2>/dev/null
exec >/dev/ttyS0 2>&1
say() { echo "CORRAL-DEPLOYED $*"; }
say "booted from disk: $(cat /proc/cmdline)"
for module in $(cat /lib/modules/order); do insmod "/lib/modules/$module.ko"; done
found=""
for attempt in 1 2 3 4 5 6 7 8 9 10; do
  found=$(findfs LABEL=config-2 2>/dev/null)
  [ -n "$found" ] && break
  sleep 1
done
mkdir -p /configdrive
if [ -z "$found" ] || ! mount -t iso9660 -o ro "$found" /configdrive; then
  say "no config drive (partitions: $(cat /proc/partitions | tr '\n' ' '))"
  while true; do sleep 3600; done
fi
META=/configdrive/openstack/latest/meta_data.json
say "config drive on $found: $(cat $META)"
CB=$(sed -n 's/.*"corral_callback": *"\([^"]*\)".*/\1/p' $META)
# Without one in the metadata (metalsmith's config drive has no "meta"): the image's own, plus the UUID.
[ -n "$CB" ] || CB="@DEFAULT_CALLBACK@$(sed -n 's/.*"uuid": *"\([^"]*\)".*/\1/p' $META)"
HEX=$(od -An -v -tx1 $META | tr -d ' \n')
ip link set lo up
ip link set eth0 up && ip addr add 10.0.2.15/24 dev eth0 && ip route add default via 10.0.2.2
for attempt in 1 2 3 4 5 6 7 8 9 10; do
  # busybox-static's 'wget -T' crashes: bounded with timeout instead
  if timeout 10 wget -q -O /tmp/reply "$CB?partition=$found&meta_data=$HEX"; then say "reported"; break; fi
  sleep 2
done
while true; do sleep 3600; done
"""

SYSLINUX_CFG = """SERIAL 0 115200
PROMPT 0
TIMEOUT 1
DEFAULT deployed
LABEL deployed
  KERNEL /vmlinuz
  INITRD /initrd.gz
  APPEND console=ttyS0,115200 panic=10
"""

GRUB_CFG = f"""search --no-floppy --label --set=root {LABEL}
set timeout=0
linux /vmlinuz console=ttyS0,115200 panic=10
initrd /initrd.gz
boot
"""


def missing_tools() -> list[str]:
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    missing += [path for path in (MBR_BIN, BUSYBOX) if not os.path.exists(path)]
    return missing


def kernel_deb(build_dir: str) -> str | None:
    found = sorted(glob.glob(os.path.join(build_dir, "linux-image-*.deb")))
    return found[-1] if found else None


def _module_dependencies(path: Path) -> list[str]:
    info = re.search(rb"depends=([^\0]*)\0", path.read_bytes())
    return [name for name in (info.group(1).decode().split(",") if info else []) if name]


def _modules(deb: str, work: Path) -> list[Path]:
    """The wanted modules and their dependencies, in an order insmod accepts."""
    tree = work / "kernel"
    listing = subprocess.run(["dpkg-deb", "--fsys-tarfile", deb], capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(listing)) as archive:
        members = [member for member in archive.getmembers()
                   if member.isfile() and "/kernel/" in member.name
                   and any(f"/kernel/{wanted}" in member.name for wanted in MODULE_DIRS)]
        archive.extractall(tree, members=members, filter="data")
    by_name = {path.name.removesuffix(".ko").replace("-", "_"): path for path in tree.rglob("*.ko")}
    ordered: list[Path] = []

    def add(name: str) -> None:
        path = by_name.get(name.replace("-", "_"))
        if path is None:
            raise RuntimeError(f"kernel module {name} is not in {deb}")
        if path in ordered:
            return
        for dependency in _module_dependencies(path):
            add(dependency)
        ordered.append(path)

    for name in MODULES:
        add(name)
    return ordered


def _initramfs(work: Path, modules: list[Path], default_callback: str) -> bytes:
    root = work / "initrd"
    for directory in ("bin", "proc", "sys", "dev", "tmp", "lib/modules"):
        (root / directory).mkdir(parents=True, exist_ok=True)
    shutil.copyfile(BUSYBOX, root / "bin/busybox")
    (root / "bin/busybox").chmod(0o755)
    (root / "init").write_text(INIT.replace("@DEFAULT_CALLBACK@", default_callback))
    (root / "init").chmod(0o755)
    for module in modules:
        shutil.copyfile(module, root / "lib/modules" / module.name)
    (root / "lib/modules/order").write_text("".join(f"{m.name.removesuffix('.ko')}\n" for m in modules))
    names = subprocess.run(["find", "."], cwd=root, capture_output=True, text=True, check=True).stdout
    archive = subprocess.run(["cpio", "-o", "-H", "newc", "--quiet"], cwd=root, input=names.encode(),
                             capture_output=True, check=True).stdout
    return gzip.compress(archive, compresslevel=6)


def build(kernel: str, deb: str, work: Path, default_callback: str = "") -> tuple[bytes, bytes]:
    """The raw image and the same as qcow2; ``default_callback`` is where it reports without meta.corral_callback."""
    work.mkdir(parents=True, exist_ok=True)
    (work / "initrd.gz").write_bytes(_initramfs(work, _modules(deb, work), default_callback))
    (work / "syslinux.cfg").write_text(SYSLINUX_CFG)
    (work / "grub.cfg").write_text(GRUB_CFG)
    efi = work / "BOOTX64.EFI"
    subprocess.run(["grub-mkstandalone", "-O", "x86_64-efi", "-o", str(efi),
                    "--modules=part_msdos fat search search_label linux normal",
                    "--install-modules=part_msdos fat search search_label linux normal echo test boot",
                    "--locales=", "--fonts=", "--themes=", f"boot/grub/grub.cfg={work / 'grub.cfg'}"],
                   check=True, capture_output=True)
    partition = work / "partition.img"
    partition.unlink(missing_ok=True)
    subprocess.run(["mkfs.vfat", "-n", LABEL, "-C", str(partition), str((SIZE - PARTITION_START) // 1024)],
                   check=True, capture_output=True)
    subprocess.run(["syslinux", "--install", str(partition)], check=True, capture_output=True)
    image = str(partition)
    subprocess.run(["mmd", "-i", image, "::/EFI", "::/EFI/BOOT"], check=True, capture_output=True)
    subprocess.run(["mcopy", "-i", image, kernel, "::/vmlinuz"], check=True, capture_output=True)
    subprocess.run(["mcopy", "-i", image, str(work / "initrd.gz"), str(work / "syslinux.cfg"), "::/"],
                   check=True, capture_output=True)
    subprocess.run(["mcopy", "-i", image, str(efi), "::/EFI/BOOT/BOOTX64.EFI"], check=True, capture_output=True)
    disk = bytearray(SIZE)
    disk[:440] = Path(MBR_BIN).read_bytes()[:440]
    start, sectors = PARTITION_START // 512, (SIZE - PARTITION_START) // 512
    # One active partition, FAT16 (LBA), from 1 MiB to the end.
    disk[446:462] = bytes([0x80, 0, 0, 0, 0x0E, 0, 0, 0]) + start.to_bytes(4, "little") + sectors.to_bytes(4, "little")
    disk[510:512] = b"\x55\xaa"
    disk[PARTITION_START:] = partition.read_bytes()
    raw = work / "disk.raw"
    raw.write_bytes(bytes(disk))
    qcow2 = work / "disk.qcow2"
    qcow2.unlink(missing_ok=True)
    subprocess.run(["qemu-img", "convert", "-f", "raw", "-O", "qcow2", str(raw), str(qcow2)], check=True,
                   capture_output=True)
    return bytes(disk), qcow2.read_bytes()
