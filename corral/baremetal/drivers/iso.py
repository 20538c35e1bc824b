"""Bootable ISO images made from a kernel and a ramdisk, with ``xorriso``.

BIOS: an isolinux image (``[DEFAULT] isolinux_bin`` and ``ldlinux_c32``),
as upstream builds it.  UEFI: a GRUB image that boots under both UEFI and
BIOS, made by ``grub-mkrescue`` (which runs xorriso itself).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from typing import Any

from corral.baremetal.drivers.base import DriverError

LDLINUX_LOCATIONS = (
    "/usr/lib/syslinux/modules/bios/ldlinux.c32",
    "/usr/share/syslinux/ldlinux.c32",
    "/usr/lib/syslinux/ldlinux.c32",
)
VOLUME_ID = "VMEDIA_BOOT_ISO"


class ImageBuildFailed(DriverError):
    """The ISO image could not be made."""


def build_iso(conf: Any, kernel: str, ramdisk: str, kernel_params: str, boot_mode: str, output: str) -> None:
    """Write a bootable ISO at ``output`` that boots ``kernel`` + ``ramdisk`` with ``kernel_params``."""
    if any(c in kernel_params for c in "\n\r"):
        raise ImageBuildFailed("kernel arguments must be on one line")
    with tempfile.TemporaryDirectory(prefix="iso-", dir=os.path.dirname(output)) as work:
        tree = os.path.join(work, "tree")
        if boot_mode == "uefi":
            _grub_tree(tree, kernel, ramdisk, kernel_params)
            command = ["grub-mkrescue", "-o", output + ".part", tree]
        else:
            _isolinux_tree(conf, tree, kernel, ramdisk, kernel_params)
            command = [
                "xorriso", "-as", "mkisofs", "-quiet", "-r", "-J", "-l", "-V", VOLUME_ID,
                "-b", "isolinux/isolinux.bin", "-c", "isolinux/boot.cat",
                "-no-emul-boot", "-boot-load-size", "4", "-boot-info-table",
                "-o", output + ".part", tree,
            ]
        _run(command)
    os.chmod(output + ".part", 0o644)
    os.replace(output + ".part", output)


def _isolinux_tree(conf: Any, tree: str, kernel: str, ramdisk: str, kernel_params: str) -> None:
    isolinux_bin = conf.isolinux_bin
    ldlinux = conf.ldlinux_c32 or next((p for p in LDLINUX_LOCATIONS if os.path.exists(p)), None)
    if not os.path.exists(isolinux_bin):
        raise ImageBuildFailed(f"isolinux.bin was not found at {isolinux_bin} ([DEFAULT] isolinux_bin)")
    if not ldlinux or not os.path.exists(ldlinux):
        raise ImageBuildFailed("ldlinux.c32 was not found ([DEFAULT] ldlinux_c32)")
    boot = os.path.join(tree, "isolinux")
    os.makedirs(boot)
    shutil.copyfile(isolinux_bin, os.path.join(boot, "isolinux.bin"))
    shutil.copyfile(ldlinux, os.path.join(boot, "ldlinux.c32"))
    shutil.copyfile(kernel, os.path.join(boot, "vmlinuz"))
    shutil.copyfile(ramdisk, os.path.join(boot, "initrd"))
    with open(os.path.join(boot, "isolinux.cfg"), "w") as cfg:
        cfg.write(
            "DEFAULT boot\nPROMPT 0\nTIMEOUT 0\n"
            f"LABEL boot\n  KERNEL /isolinux/vmlinuz\n  INITRD /isolinux/initrd\n  APPEND {kernel_params}\n"
        )


def _grub_tree(tree: str, kernel: str, ramdisk: str, kernel_params: str) -> None:
    boot = os.path.join(tree, "boot", "grub")
    os.makedirs(boot)
    shutil.copyfile(kernel, os.path.join(tree, "boot", "vmlinuz"))
    shutil.copyfile(ramdisk, os.path.join(tree, "boot", "initrd"))
    with open(os.path.join(boot, "grub.cfg"), "w") as cfg:
        cfg.write(
            "set default=0\nset timeout=0\n"
            f"menuentry boot {{\n  linux /boot/vmlinuz {kernel_params}\n  initrd /boot/initrd\n}}\n"
        )


def _run(command: list[str]) -> None:
    if shutil.which(command[0]) is None:
        raise ImageBuildFailed(f"{command[0]} is not installed on the conductor")
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    except subprocess.TimeoutExpired:
        raise ImageBuildFailed(f"{command[0]} did not finish within 600 seconds") from None
    if result.returncode != 0:
        raise ImageBuildFailed(f"{command[0]} failed: {result.stderr.strip()[-500:]}")
